#!/usr/bin/env python
"""What flow control costs a drain: N waiting jobs run by one worker process at concurrency C,
plain, under a rate limit and a concurrency cap set too high to bind, and spread over G groups;
jobs per second, Redis commands per job (``INFO commandstats``), Redis CPU per job
(``used_cpu_sys`` + ``used_cpu_user`` over the drain, µs) and the worker process's CPU per job
(µs), in interleaved rounds,
medians reported. Run ``bench/bullmq_limiter.js`` beside it on the same Redis for BullMQ with
and without its rate limiter.

usage: python bench/limits_drain.py REDIS_URL [--n 20000] [--conc 1,16] [--groups 100]
       [--rounds 3]

The Redis is flushed between measurements: use a private one.
"""

from __future__ import annotations

import argparse
import json
import statistics
import threading
import time

from kue_core import Job, Queue

HIGH = 10**9  # a limit that never binds


def _commands(q: Queue) -> int:
    stats = q.client.info("commandstats")
    return sum(int(v["calls"]) for v in stats.values())  # type: ignore[union-attr]


def _cpu(q: Queue) -> float:
    info = q.client.info("cpu")
    return float(info["used_cpu_sys"]) + float(info["used_cpu_user"])


def drain(url: str, kind: str, n: int, conc: int, groups: int) -> tuple[float, float, float, float]:
    q = Queue(url, prefix="bench")
    q.client.flushall()
    if kind == "rate":
        q.limit("bench", rate=(HIGH, 1000))
    elif kind == "cap":
        q.limit("bench", concurrency=HIGH)

    def make(i: int) -> Job:
        job = q.create_job("bench", {"i": i, "t": 1795474947.069})
        return job.group(f"tenant-{i % groups}") if kind == "groups" else job

    for start in range(0, n, 1000):
        q.save_many([make(i) for i in range(start, min(start + 1000, n))])
    done, left = threading.Event(), [n]
    lock = threading.Lock()

    def handler(job: Job) -> None:
        with lock:
            left[0] -= 1
            if left[0] == 0:
                done.set()

    q.client.config_resetstat()
    before, cpu, own = _commands(q), _cpu(q), time.process_time()
    began = time.perf_counter()
    q.process("bench", conc, handler)
    done.wait(600)
    while q.count("complete", "bench") < n:  # the last reports
        time.sleep(0.001)
    took = time.perf_counter() - began
    own_us = (time.process_time() - own) / n * 1e6
    per_job = (_commands(q) - before) / n
    cpu_us = (_cpu(q) - cpu) / n * 1e6
    q.shutdown()
    q.close()
    return n / took, per_job, cpu_us, own_us


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("redis_url")
    ap.add_argument("--n", type=int, default=20_000)
    ap.add_argument("--conc", default="1,16")
    ap.add_argument("--groups", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--kinds", default="plain,rate,cap,groups")
    args = ap.parse_args()
    kinds = args.kinds.split(",")
    concs = [int(c) for c in args.conc.split(",")]
    got: dict[tuple[str, int], list[tuple[float, float, float, float]]] = {}
    for r in range(args.rounds):
        order = kinds[r % len(kinds) :] + kinds[: r % len(kinds)]  # rotated every round
        for conc in concs:
            for kind in order:
                got.setdefault((kind, conc), []).append(
                    drain(args.redis_url, kind, args.n, conc, args.groups)
                )
    for (kind, conc), runs in sorted(got.items(), key=lambda kv: (kv[0][1], kinds.index(kv[0][0]))):
        base = got.get(("plain", conc))
        plain = statistics.median(x[0] for x in base) if base else 0
        rate = statistics.median(x[0] for x in runs)
        print(
            json.dumps(
                {
                    "system": "kue_core",
                    "kind": kind,
                    "conc": conc,
                    "jobs_per_s": round(rate),
                    "vs_plain": round(rate / plain, 2) if plain else None,
                    "commands_per_job": round(statistics.median(x[1] for x in runs), 2),
                    "redis_cpu_us_per_job": round(statistics.median(x[2] for x in runs), 1),
                    "worker_cpu_us_per_job": round(statistics.median(x[3] for x in runs), 1),
                    "runs": [round(x[0]) for x in runs],
                }
            )
        )


if __name__ == "__main__":
    main()
