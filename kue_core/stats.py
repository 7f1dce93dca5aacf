"""Counters read for charts and metrics: jobs ended per minute, and totals since the start
(written by the scripts that end jobs; see ``count_outcome`` in ``scripts/lib.lua``)."""

from __future__ import annotations

from typing import Any, cast

import redis

from . import checks, defaults
from .keys import Keys


def throughput(client: redis.Redis, keys: Keys, minutes: int) -> list[dict[str, int]]:
    """See ``Queue.throughput``."""
    checks.integer(minutes, "minutes", 1, defaults.THROUGHPUT_MINUTES)
    seconds, _ = client.time()  # the scripts' clock
    last = seconds // 60
    span = range(last - minutes + 1, last + 1)
    complete = client.mget([keys.minute("complete", m) for m in span])
    failed = client.mget([keys.minute("failed", m) for m in span])
    return [
        {"at": m * 60_000, "complete": int(c or 0), "failed": int(f or 0)}
        for m, c, f in zip(span, complete, failed, strict=True)
    ]


def totals(client: redis.Redis, keys: Keys) -> dict[str, Any]:
    """See ``Queue.totals``."""
    raw = cast(dict[str, str], client.hgetall(keys.totals))
    out: dict[str, Any] = {"complete": {}, "failed": {}}
    for field, value in raw.items():
        kind, _, rest = field.partition(":")
        if kind in ("complete", "failed"):
            out[kind][rest] = int(value)
    bounds: list[int | None] = [*defaults.DURATION_BUCKETS_MS, None]
    out["durations"] = [(b, int(raw.get(f"le:{'inf' if b is None else b}", 0))) for b in bounds]
    return out
