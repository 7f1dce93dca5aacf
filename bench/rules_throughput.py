#!/usr/bin/env python
"""Events per second through ``kue rules``: N events waiting on one input list, drained by one
watcher with one simple rule (a regex with two groups, a templated task, queue and dedupe
set), beside two bare Python loops on the same Redis as the limit: ``BRPOPLPUSH`` + ``LPUSH``
(nothing kept while an event is handled) and Resc's own safe loop (``BRPOPLPUSH``, ``SADD``,
``LPUSH``, ``LREM``). Interleaved rounds, medians reported, with Redis commands per event.

usage: python bench/rules_throughput.py REDIS_URL [--n 20000] [--rounds 3]

The Redis is flushed between measurements: use a private one.
"""

from __future__ import annotations

import argparse
import statistics
import time

import redis

from kue_core import Queue
from kue_rules import Rules, build
from kue_rules.keys import rules_key

RULE = {
    "name": "acquisition",
    "on": r"^acq/(?P<process_id>\d+)/(?P<product_id>\w+)$",
    "make": {
        "task": "trt/${process_id}/${product_id}",
        "queue": "trt/${process_id}/todo-queue",
        "set": "trt/${process_id}/todo-set",
    },
}


def _fill(client: redis.Redis, n: int) -> None:
    client.flushall()
    pipe = client.pipeline(transaction=False)
    for i in range(n):
        pipe.lpush("events", f"acq/{i % 10}/p{i}")
        if i % 1000 == 999:
            pipe.execute()
    pipe.execute()


def _commands(client: redis.Redis) -> int:
    stats = client.info("commandstats")
    return sum(int(v["calls"]) for v in stats.values())  # type: ignore[union-attr]


def bare(url: str, n: int, safe: bool) -> tuple[float, float]:
    client = redis.Redis.from_url(url, decode_responses=True)
    _fill(client, n)
    before, start = _commands(client), time.perf_counter()
    for _ in range(n):
        event = client.brpoplpush("events", "events/taken", 1)
        if safe:
            _, process, product = event.split("/")
            task = f"trt/{process}/{product}"
            if client.sadd(f"trt/{process}/todo-set", task):
                client.lpush(f"trt/{process}/todo-queue", task)
            client.lrem("events/taken", 1, event)
        else:
            client.lpush("done", event)
    took = time.perf_counter() - start
    cmds = (_commands(client) - before - 1) / n
    client.close()
    return n / took, cmds


def rules(url: str, n: int) -> tuple[float, float]:
    queue = Queue(url, prefix="bench")
    _fill(queue.client, n)
    config = build({"prefix": "bench", "watchers": [{"input_queue": "events", "rules": [RULE]}]})
    before, start = _commands(queue.client), time.perf_counter()
    running = Rules(config, queue).start()
    counts = rules_key(queue.keys, "counts")
    field = "events\n\nevents"
    while int(queue.client.hget(counts, field) or 0) < n:
        time.sleep(0.005)
    took = time.perf_counter() - start
    running.stop()
    cmds = (_commands(queue.client) - before) / n
    made = sum(queue.client.llen(f"trt/{i}/todo-queue") for i in range(10))
    assert made == n, made
    queue.close()
    return n / took, cmds


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("url")
    ap.add_argument("--n", type=int, default=20000)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    runs: dict[str, list[tuple[float, float]]] = {"bare": [], "resc-loop": [], "kue rules": []}
    for _ in range(a.rounds):
        runs["bare"].append(bare(a.url, a.n, safe=False))
        runs["resc-loop"].append(bare(a.url, a.n, safe=True))
        runs["kue rules"].append(rules(a.url, a.n))
    limit = statistics.median(r for r, _ in runs["bare"])
    print(f"events per second, N={a.n}, medians of {a.rounds} rounds")
    for name, got in runs.items():
        rate = statistics.median(r for r, _ in got)
        cmds = statistics.median(c for _, c in got)
        print(f"{name:>10}: {rate:8.0f}/s  ({rate / limit:.2f}x bare)  {cmds:.1f} cmds/event")


if __name__ == "__main__":
    main()
