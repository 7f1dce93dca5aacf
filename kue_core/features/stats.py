"""Counters read for charts and metrics: jobs per type and state, jobs ended per minute,
totals since the start, and the wait and run statistics of each type per UTC day (written by
the scripts that claim and end jobs; see ``count_outcome`` and ``record_timing`` in
``scripts/lib/attempts.lua``). Each is an operation either client runs
(:mod:`kue_core.store.calls`)."""

from __future__ import annotations

import math
import re
from datetime import UTC, date, datetime
from typing import Any

from .. import defaults
from ..base import checks
from ..base.errors import InvalidJob
from ..base.keys import Keys
from ..base.states import STATES
from ..base.values import validate_type
from ..store.calls import Op, hash_reply, read

_DAY = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")


def counts_by_type(keys: Keys) -> Op[dict[str, dict[str, int]]]:
    """See ``Queue.counts_by_type``."""
    (found,) = yield read(("SMEMBERS", keys.types))
    types = sorted(found)
    counts = iter((yield read(*(("ZCARD", keys.type_state(t, s)) for t in types for s in STATES))))
    return {t: {state: int(next(counts)) for state in STATES} for t in types}


def throughput(keys: Keys, minutes: int) -> Op[list[dict[str, int]]]:
    """See ``Queue.throughput``."""
    checks.integer(minutes, "minutes", 1, defaults.THROUGHPUT_MINUTES)
    ((seconds, _),) = yield read(("TIME",))  # the scripts' clock
    last = int(seconds) // 60
    span = range(last - minutes + 1, last + 1)
    complete, failed = yield read(
        ("MGET", *(keys.minute("complete", m) for m in span)),
        ("MGET", *(keys.minute("failed", m) for m in span)),
    )
    return [
        {"at": m * 60_000, "complete": int(c or 0), "failed": int(f or 0)}
        for m, c, f in zip(span, complete, failed, strict=True)
    ]


def totals(keys: Keys) -> Op[dict[str, Any]]:
    """See ``Queue.totals``."""
    (reply,) = yield read(("HGETALL", keys.totals))
    raw = hash_reply(reply)
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


def timings(keys: Keys, job_type: str | None, day: object | None) -> Op[dict[str, Any]]:
    """See ``Queue.timings``: the wait and run statistics of one type, or of every type, on
    a UTC day."""
    name = None if day is None else _day(day)
    if job_type is None:
        (found,) = yield read(("SMEMBERS", keys.types))
        types = sorted(found)
    else:
        types = [validate_type(job_type)]
    if name is None:
        ((seconds, _),) = yield read(("TIME",))  # the scripts' clock
        name = datetime.fromtimestamp(int(seconds), UTC).date().isoformat()
    kinds = ("wait", "run")
    replies = iter(
        (yield read(*(("HGETALL", keys.timings(t, name, k)) for t in types for k in kinds)))
    )
    out = {t: {k: _summary(hash_reply(next(replies))) for k in kinds} for t in types}
    if job_type is None:
        return {"day": name, "types": out}
    return {"type": job_type, "day": name, **out[job_type]}
