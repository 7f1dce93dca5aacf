#!/usr/bin/env python
"""Tick lag of schedules beside delayed jobs' lag, on one Redis: how long after its time a
schedule's job starts in a worker, and how long after its due time a delayed job starts.

    python bench/schedule_lag.py --redis redis://127.0.0.1:6392/0 [--ticks 300] [--every 50]

One worker process (this one, one slot) runs both. Prints p50/p99/max in ms.
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time

from kue_core import Job, Queue


def _pct(values: list[float], p: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(len(values) * p))]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--redis", default="redis://127.0.0.1:6392/0")
    ap.add_argument("--ticks", type=int, default=300)
    ap.add_argument("--every", type=int, default=50)
    args = ap.parse_args()
    queue = Queue(args.redis, prefix="lagbench")
    queue.client.flushdb()
    lags: dict[str, list[float]] = {"schedule": [], "delayed": []}
    done = threading.Event()

    def server_ms() -> float:
        seconds, micros = queue.client.time()
        return int(seconds) * 1000 + int(micros) / 1000

    def handler(job: Job) -> None:
        now = server_ms()
        if job.type == "tick":
            lags["schedule"].append(now - job.tick)  # type: ignore[operator]
        else:
            lags["delayed"].append(now - job.promote_at)  # type: ignore[operator]
        if min(len(v) for v in lags.values()) >= args.ticks:
            done.set()

    queue.process("tick", 1, handler)
    queue.process("late", 1, handler)
    queue.every("lag", args.every, "tick")
    for _ in range(args.ticks):  # delayed jobs due at the same rate, interleaved
        queue.create_job("late").delay(args.every * 2).save()
        time.sleep(args.every / 1000)
    done.wait(args.ticks * args.every / 1000 + 30)
    queue.pause_schedule("lag")
    queue.shutdown()
    for name, values in lags.items():
        print(
            f"{name:9} n={len(values):4}  p50 {statistics.median(values):6.2f} ms  "
            f"p99 {_pct(values, 0.99):6.2f} ms  max {max(values):6.2f} ms"
        )
    queue.client.flushdb()
    queue.close()


if __name__ == "__main__":
    main()
