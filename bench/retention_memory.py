#!/usr/bin/env python
"""Redis memory per completed job (its hash with the result, one log line, its history), and
what retention does to a queue that keeps running: batches of jobs go through one worker
process (16 slots) under the default retention (the last ``RETAIN_COMPLETE`` completed jobs,
for at most a week), and ``used_memory`` is read after each batch.

usage: python bench/retention_memory.py REDIS_URL [--batch 100000] [--batches 4]

The first batch fills retention (with the default count of 100,000 and --batch 100000), so
its delta per job is the memory of a completed job; each later batch replaces as many older
jobs as it adds. The Redis is flushed: use a private one.
"""

from __future__ import annotations

import argparse
import json
import threading
import time

from kue_core import Job, Queue, defaults


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("redis_url")
    ap.add_argument("--batch", type=int, default=100_000)
    ap.add_argument("--batches", type=int, default=4)
    args = ap.parse_args()
    q = Queue(args.redis_url, prefix="keep")
    q.client.flushall()
    left = [0]
    done = threading.Event()
    lock = threading.Lock()

    def handler(job: Job) -> dict[str, bool]:
        job.log("sent to %s", job.data["to"])
        with lock:
            left[0] -= 1
            if left[0] == 0:
                done.set()
        return {"ok": True}

    def used() -> int:
        return int(q.client.info("memory")["used_memory"])

    base = used()
    q.process("mail", 16, handler)
    for b in range(args.batches):
        done.clear()
        left[0] = args.batch
        first = b * args.batch
        began = time.perf_counter()
        for start in range(first, first + args.batch, 1000):
            q.save_many(
                [
                    q.create_job("mail", {"to": f"user{i}@example.com"})
                    for i in range(start, start + 1000)
                ]
            )
        if not done.wait(600):
            raise SystemExit(f"batch {b + 1}: {left[0]} jobs left after 600 s")
        # The last completions' retention runs in their own calls: wait for the count to hold.
        deadline = time.monotonic() + 30
        while q.counts("mail")["complete"] > defaults.RETAIN_COMPLETE[0]:
            if time.monotonic() > deadline:
                break
            time.sleep(0.05)
        took = time.perf_counter() - began
        kept, grown = q.counts("mail")["complete"], used() - base
        row = {
            "jobs run": (b + 1) * args.batch,
            "jobs kept": kept,
            "used MB": round(grown / 1e6, 1),
            "bytes per kept job": round(grown / kept),
            "jobs/s": round(args.batch / took),
        }
        print(json.dumps(row), flush=True)
    q.shutdown(timeout=5)
    q.client.flushall()
    q.close()


if __name__ == "__main__":
    main()
