#!/usr/bin/env python
"""Redis memory of the statistics' history at its largest: every type busy every minute, so
each keeps its full day of minute points, week of hour points and 30 days of day points (the
most the series hold before their keys expire), plus its version changes, all as the sampler
writes them (``kue_core.features.history``: the same keys, the same encoding).

usage: python bench/history_memory.py REDIS_URL [--types 100] [--buckets 4] [--deploys 30]

Each point has counts in the thousands and ``--buckets`` non-empty duration buckets in each of
its wait and run histograms (busy types spread over 3 to 5). Reports ``used_memory`` before and
after and the sum of ``MEMORY USAGE`` of the history's keys, in all and per type. The Redis is
flushed: use a private one.
"""

from __future__ import annotations

import argparse
import json
import random

from kue_core import Queue, defaults
from kue_core.features.history import STEPS, Point


def _hist(rng: random.Random, count: int, buckets: int) -> list[int]:
    h = [count, count * rng.randint(5, 900)] + [0] * (len(defaults.DURATION_BUCKETS_MS) + 1)
    first = rng.randint(0, len(defaults.DURATION_BUCKETS_MS) - buckets)
    left = count
    for i in range(first, first + buckets):
        n = left if i == first + buckets - 1 else rng.randint(0, left)
        h[2 + i], left = n, left - n
    return h


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("redis_url")
    ap.add_argument("--types", type=int, default=100)
    ap.add_argument("--buckets", type=int, default=4)
    ap.add_argument("--deploys", type=int, default=30)
    args = ap.parse_args()
    q = Queue(args.redis_url, prefix="hist")
    r = q.client
    r.flushall()
    used = lambda: int(r.info("memory")["used_memory"])  # noqa: E731
    before = used()
    rng = random.Random(7)
    now_minute = int(r.time()[0]) // 60
    spans = {"m": 24 * 60, "h": 7 * 24, "d": 30}
    for t in range(args.types):
        job_type = f"type-{t:03d}"
        pipe = r.pipeline(transaction=False)
        for code, points in spans.items():
            step = STEPS[code]
            last = now_minute * 60_000 // step.ms
            for index in range(last - points + 1, last + 1):
                count = rng.randint(1_000, 9_000) * (step.ms // 60_000)
                point = Point(
                    count, rng.randint(0, 50), rng.randint(0, 5_000), rng.randint(0, 500),
                    _hist(rng, count, args.buckets), _hist(rng, count, args.buckets),
                )  # fmt: skip
                key = q.keys.series(code, index // step.per_key, job_type)
                pipe.hset(key, str(index % step.per_key), point.encode())
                pipe.expire(key, step.keep_s)
        for d in range(args.deploys):
            change = {"at": d, "versions": [f"1.{d + 1}.0"], "was": [f"1.{d}.0"]}
            pipe.zadd(q.keys.deploys(job_type), {json.dumps(change): d})
        pipe.execute()
    after = used()
    keys = list(r.scan_iter("hist:history:*", count=1000))
    usage = sum(int(r.memory_usage(k) or 0) for k in keys)
    report = {
        "types": args.types,
        "keys": len(keys),
        "used_memory_delta": after - before,
        "memory_usage_sum": usage,
        "per_type": round(usage / args.types),
        "minute_point_bytes": round(
            sum(len(v) for v in r.hvals(q.keys.series("m", now_minute // 60, "type-000")))
            / max(1, r.hlen(q.keys.series("m", now_minute // 60, "type-000")))
        ),
    }
    print(json.dumps(report, indent=2))
    r.flushall()
    q.close()


if __name__ == "__main__":
    main()
