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

from typing import Any

from .. import defaults
from ..base.errors import InvalidJob
from ..base.keys import Keys
from ..store.calls import Op, read
from . import records

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


def get(keys: Keys) -> Op[dict[str, dict[str, Any]]]:
    """See ``Queue.retention``."""
    (stored,) = yield read(("HMGET", keys.retention, *FINISHED))
    return {state: _policy(text, state) for state, text in zip(FINISHED, stored, strict=True)}


def put(keys: Keys, policies: dict[str, Any]) -> Op[dict[str, dict[str, Any]]]:
    """See ``Queue.set_retention``: checks every policy before it writes any."""
    unknown = set(policies) - set(FINISHED)
    if unknown:
        raise InvalidJob(f"retention is set for complete and failed, not {sorted(unknown)}")
    writes: list[str] = []
    forget: list[str] = []
    for state, value in policies.items():
        if value == DEFAULT:
            forget.append(state)
            continue
        kept = records.keep(value, f"{state} retention")
        writes += [state, "," if kept is None else kept.to_text()]
    if not writes and not forget:
        raise InvalidJob("give complete= or failed= (a policy, None to keep all, or 'default')")
    commands: list[tuple[Any, ...]] = []
    if writes:
        commands.append(("HSET", keys.retention, *writes))
    if forget:
        commands.append(("HDEL", keys.retention, *forget))
    yield read(*commands)
    return (yield from get(keys))


def memory() -> Op[dict[str, Any]]:
    """Redis memory figures from ``INFO memory``: used, peak and limit (bytes; limit 0 for
    none) and the eviction policy."""
    (info,) = yield read(("INFO", "memory"))
    return {
        "used": int(info.get("used_memory", 0)),
        "peak": int(info.get("used_memory_peak", 0)),
        "maxmemory": int(info.get("maxmemory", 0)),
        "policy": str(info.get("maxmemory_policy", "")),
    }
