"""Retention: how many finished jobs a queue keeps, and for how long.

Every job that completes or fails for good enters ``<p>:finished:<state>`` (ids by when they
ended). The script that finishes a job then removes, at most ``defaults.RETIRE_BATCH`` at a
time, the jobs that the policy in force no longer keeps: the oldest beyond its ``count``, and
those that ended more than ``age`` ms ago. Removing a job removes all of it: hash, log,
history, index entries, tags, tracking, unique key.

The policy in force for a job is its own (``remove_on_complete(...)``, ``remove_on_fail(...)``),
else the queue's (``queue.set_retention``, stored in ``<p>:retention`` so that every process
applies the same), else ``defaults.RETAIN_COMPLETE`` / ``defaults.RETAIN_FAILED``. Each worker
process also sweeps every ``defaults.RETENTION_SWEEP`` seconds (``retain.lua``): it takes in
jobs that Node Kue workers finished, and removes jobs that aged while nothing finished.
"""

from __future__ import annotations

from typing import Any, cast

import redis

from . import defaults, records
from .errors import InvalidJob
from .keys import Keys

FINISHED = ("complete", "failed")
#: ``queue.set_retention(complete=DEFAULT)``: forget the queue's own policy, use the default.
DEFAULT = "default"


def _policy(text: str | None, state: str) -> dict[str, Any]:
    if text is None:
        count, age = defaults.RETAIN_COMPLETE if state == "complete" else defaults.RETAIN_FAILED
        return {"count": count, "age": age, "source": "default"}
    kept = records.keep_from_text(text)
    assert isinstance(kept, records.Keep)
    return {**kept.to_dict(), "source": "queue"}


def get(client: redis.Redis, keys: Keys) -> dict[str, dict[str, Any]]:
    """See ``Queue.retention``."""
    stored = cast(list[str | None], client.hmget(keys.retention, list(FINISHED)))
    return {state: _policy(text, state) for state, text in zip(FINISHED, stored, strict=True)}


def put(client: redis.Redis, keys: Keys, policies: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """See ``Queue.set_retention``: checks every policy before it writes any."""
    writes: dict[str, str] = {}
    forget: list[str] = []
    for state, value in policies.items():
        if value == DEFAULT:
            forget.append(state)
            continue
        kept = records.keep(value, f"{state} retention")
        writes[state] = "," if kept is None else kept.to_text()
    if not writes and not forget:
        raise InvalidJob("give complete= or failed= (a policy, None to keep all, or 'default')")
    pipe = client.pipeline(transaction=True)
    for state, text in writes.items():
        pipe.hset(keys.retention, state, text)
    if forget:
        pipe.hdel(keys.retention, *forget)
    pipe.execute()
    return get(client, keys)


def memory(client: redis.Redis) -> dict[str, Any]:
    """Redis memory figures from ``INFO memory``: used, peak and limit (bytes; limit 0 for
    none) and the eviction policy."""
    info: dict[str, Any] = client.info("memory")
    return {
        "used": int(info.get("used_memory", 0)),
        "peak": int(info.get("used_memory_peak", 0)),
        "maxmemory": int(info.get("maxmemory", 0)),
        "policy": str(info.get("maxmemory_policy", "")),
    }
