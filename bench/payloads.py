#!/usr/bin/env python
"""What keeping large payloads outside Redis costs a job, and saves Redis (docs/payloads.md):
a queue whose jobs' data goes to a file store beside one that keeps it in Redis, interleaved,
on a redis-server of its own (no persistence), the store a temporary directory.

Per round and per queue: ``--n`` saves one at a time (jobs/s and the producer's CPU per job,
and Redis's memory per job once saved), then a drain of them by one worker process of
``--slots`` ``async def`` slots whose handler reads the data and returns its length (jobs/s,
and the worker's CPU per job). The data is ``--size`` bytes of JSON; the offloading queue
keeps at most ``--max`` bytes in Redis (``--max`` above ``--size``: the limit is set and
unused, the cost of the check alone). Medians of the rounds, each figure against Redis's.

usage: python bench/payloads.py [--rounds 3] [--n 2000] [--slots 16] [--size 100000]
       [--max 65536] [--redis-server /usr/bin/redis-server]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import psutil
import redis
from worker_cpu import _started  # (bench/, on the path when run as a script)

from kue_core import Queue

WORKER = """
import os, resource, sys, threading, time
from kue_core import Queue

n = int(sys.argv[2])
limits = {}
if sys.argv[4]:
    limits = {"max_data_bytes": int(sys.argv[5]), "payload_store": sys.argv[4]}
queue = Queue(sys.argv[1], prefix="bench", **limits)
seen = [0]
marks = {}
done = threading.Event()

def cpu():
    u = resource.getrusage(resource.RUSAGE_SELF)
    return u.ru_utime + u.ru_stime

async def handler(job):
    seen[0] += 1
    if seen[0] == 1:
        marks["t0"], marks["c0"] = time.monotonic(), cpu()
    elif seen[0] == n:
        marks["t1"], marks["c1"] = time.monotonic(), cpu()
        done.set()
    return {"n": len(job.data["payload"])}

queue.process("bench", int(sys.argv[3]), handler)
done.wait(600)
took = marks["t1"] - marks["t0"]
print((n - 1) / took, (marks["c1"] - marks["c0"]) / (n - 1) * 1e6, flush=True)
os._exit(0)
"""


def one(
    url: str, store: str, limit: int, n: int, slots: int, data: dict[str, str]
) -> dict[str, float]:
    client = redis.Redis.from_url(url)
    client.flushall()
    base = int(client.info("memory")["used_memory"])
    me = psutil.Process()
    limits = {"max_data_bytes": limit, "payload_store": store} if store else {}
    with Queue(url, prefix="bench", **limits) as queue:  # type: ignore[arg-type]
        cpu0, began = sum(me.cpu_times()[:2]), time.monotonic()
        for _ in range(n):
            queue.create_job("bench", data).save()
        took, cpu = time.monotonic() - began, sum(me.cpu_times()[:2]) - cpu0
    memory = (int(client.info("memory")["used_memory"]) - base) / n
    out = subprocess.run(
        [sys.executable, "-c", WORKER, url, str(n), str(slots), store, str(limit)],
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    rate, worker_us = map(float, out.stdout.split())
    return {
        "save_per_s": n / took,
        "save_cpu_us": cpu / n * 1e6,
        "redis_bytes_per_job": memory,
        "drain_per_s": rate,
        "worker_cpu_us": worker_us,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--slots", type=int, default=16)
    ap.add_argument("--size", type=int, default=100_000)
    ap.add_argument("--max", type=int, default=65_536)
    ap.add_argument("--redis-server", default=shutil.which("redis-server") or "redis-server")
    args = ap.parse_args()
    data = {"payload": "x" * max(0, args.size - 15)}
    figures: dict[str, list[dict[str, float]]] = {"redis": [], "store": []}
    with tempfile.TemporaryDirectory() as workdir, tempfile.TemporaryDirectory() as stored:
        server, url = _started(args.redis_server, workdir)
        try:
            for r in range(args.rounds):
                for name in ["redis", "store"] if r % 2 == 0 else ["store", "redis"]:
                    store = f"file://{stored}" if name == "store" else ""
                    figures[name].append(one(url, store, args.max, args.n, args.slots, data))
                    for path in os.scandir(stored):  # each round on an empty store
                        shutil.rmtree(path.path)
        finally:
            server.kill()
            server.wait()
    kept = "in the store" if len(json.dumps(data)) > args.max else "in Redis (limit unused)"
    print(f"data of {len(json.dumps(data))} bytes, max_data_bytes {args.max}: {kept}")
    print("| figure | in Redis | with a store | store / Redis |")
    print("|---|---:|---:|---:|")
    for figure in (
        "save_per_s",
        "save_cpu_us",
        "redis_bytes_per_job",
        "drain_per_s",
        "worker_cpu_us",
    ):
        plain = statistics.median(f[figure] for f in figures["redis"])
        other = statistics.median(f[figure] for f in figures["store"])
        print(f"| {figure} | {plain:,.1f} | {other:,.1f} | {other / plain:.2f}x |")


if __name__ == "__main__":
    main()
