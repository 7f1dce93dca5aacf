#!/usr/bin/env python
"""What job records cost at save, beside a plain job: Redis memory per waiting job
(``used_memory`` delta over N jobs saved in bulk on an empty Redis) and saves per second (one
round trip per job), in interleaved rounds, medians reported.

usage: python bench/records_cost.py REDIS_URL [--n 100000] [--saves 5000] [--rounds 3]

Kinds: ``plain`` ({"i", "t"}, as the harness saves), ``title`` (a three-word ``data.title``,
indexed), ``tags`` (two tags), ``search_keys`` (two indexed data fields besides the title),
``unique`` (a unique key). The Redis is flushed between measurements: use a private one.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable

from kue_core import Job, Queue


def _kinds(q: Queue) -> dict[str, Callable[[int], Job]]:
    def plain(i: int) -> Job:
        return q.create_job("bench", {"i": i, "t": 1795474947.069})

    return {
        "plain": plain,
        "title": lambda i: q.create_job("bench", {"i": i, "title": f"order {i} shipped"}),
        "tags": lambda i: plain(i).tags(f"customer:{i % 1000}", "vip"),
        "search_keys": lambda i: q.create_job(
            "bench", {"i": i, "title": f"order {i}", "to": f"user{i}@example.com", "sku": "A-7"}
        ).search_keys("to", "sku"),
        "unique": lambda i: plain(i).unique(f"order-{i}"),
    }


def _used(q: Queue) -> int:
    return int(q.client.info("memory")["used_memory"])


def memory(q: Queue, make: Callable[[int], Job], n: int) -> float:
    q.client.flushall()
    before = _used(q)
    for start in range(0, n, 1000):
        q.save_many([make(i) for i in range(start, min(start + 1000, n))])
    return (_used(q) - before) / n


def saves_per_second(q: Queue, make: Callable[[int], Job], n: int) -> float:
    q.client.flushall()
    jobs = [make(i) for i in range(n)]
    began = time.perf_counter()
    for job in jobs:
        job.save()
    return n / (time.perf_counter() - began)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("redis_url")
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--saves", type=int, default=5000)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    q = Queue(args.redis_url, prefix="bench")
    kinds = _kinds(q)
    mem: dict[str, list[float]] = {k: [] for k in kinds}
    rate: dict[str, list[float]] = {k: [] for k in kinds}
    for _ in range(args.rounds):
        for name, make in kinds.items():
            rate[name].append(saves_per_second(q, make, args.saves))
        for name, make in kinds.items():
            mem[name].append(memory(q, make, args.n))
    q.client.flushall()
    for name in kinds:
        print(
            json.dumps(
                {
                    "kind": name,
                    "bytes_per_job": round(statistics.median(mem[name])),
                    "saves_per_s": round(statistics.median(rate[name])),
                    "vs_plain": round(
                        statistics.median(rate[name]) / statistics.median(rate["plain"]), 2
                    ),
                }
            )
        )
    q.close()


if __name__ == "__main__":
    main()
