"""Counters read for charts and metrics: jobs ended per minute, totals since the start, and
the wait and run statistics of each type per UTC day (written by the scripts that claim and
end jobs; see ``count_outcome`` and ``record_timing`` in ``scripts/lib/attempts.lua``)."""

from __future__ import annotations

import math
import re
from datetime import UTC, date, datetime
from typing import Any, cast

import redis

from . import checks, defaults
from .errors import InvalidJob
from .keys import Keys

_DAY = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")


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


def _day(value: object) -> str:
    if isinstance(value, datetime):
        raise InvalidJob("day must be a date (or YYYY-MM-DD), not a datetime")
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, str) and _DAY.fullmatch(value):
        try:
            return date.fromisoformat(value).isoformat()
        except ValueError:
            pass
    raise InvalidJob(f"day must be a date as YYYY-MM-DD, got {value!r}")


def _summary(raw: dict[str, str]) -> dict[str, Any]:
    """count, mean and standard deviation (ms), and the count per bucket."""
    count = int(raw.get("count", 0))
    total = float(raw.get("sum", 0))
    squares = float(raw.get("sumsq", 0))
    mean = total / count if count else None
    stddev = None
    if count:
        assert mean is not None
        stddev = math.sqrt(max(0.0, squares / count - mean * mean))
    bounds: list[int | None] = [*defaults.DURATION_BUCKETS_MS, None]
    buckets = [[b, int(raw.get(f"le:{'inf' if b is None else b}", 0))] for b in bounds]
    return {"count": count, "mean_ms": mean, "stddev_ms": stddev, "buckets": buckets}


def timings(
    client: redis.Redis, keys: Keys, types: list[str], day: object | None
) -> dict[str, Any]:
    """See ``Queue.timings``: the wait and run statistics of ``types`` on a UTC day."""
    if day is None:
        seconds, _ = client.time()  # the scripts' clock
        name = datetime.fromtimestamp(seconds, UTC).date().isoformat()
    else:
        name = _day(day)
    pipe = client.pipeline(transaction=False)
    for job_type in types:
        for kind in ("wait", "run"):
            pipe.hgetall(keys.timings(job_type, name, kind))
    replies = iter(cast(list[dict[str, str]], pipe.execute()))
    out = {t: {"wait": _summary(next(replies)), "run": _summary(next(replies))} for t in types}
    return {"day": name, "types": out}
