"""Builders of the calls that change what is saved: one job (its state, priority, data,
tags, pins, progress and log), the jobs of a set in batches (``bulk``), and a job type's
rules (pause, limits, feeds)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ...base.keys import Keys
from .call import Call, as_is, flag, flat, integer, ints, nothing, pair, written


# -- one saved job: each gives its state (or what it says) ------------------------------------
def update(keys: Keys, job_id: int, fields: Sequence[Any]) -> Call[str]:
    return Call("update", keys.job(job_id), (job_id, *fields), as_is)


def set_state(keys: Keys, job_id: int, state: str, only_from: Sequence[str] = ()) -> Call[str]:
    """The state the job was in; with ``only_from``, a job in another state is refused
    (``InvalidTransition``) and left as it is."""
    return Call("set_state", keys.job(job_id), (job_id, state, " ".join(only_from)), as_is)


def set_priority(keys: Keys, job_id: int, priority: int) -> Call[None]:
    return Call("set_priority", keys.job(job_id), (job_id, priority), as_is)


def remove(keys: Keys, job_id: int, cascade: bool) -> Call[list[int]]:
    """Remove a job (with ``cascade``, and the jobs blocked waiting for it): the ids removed."""
    return Call("remove", keys.job(job_id), (job_id, flag(cascade)), ints)


def cancel(keys: Keys, job_id: int, reason: str) -> Call[str]:
    return Call("cancel", keys.job(job_id), (job_id, reason), as_is)


def move(keys: Keys, job_id: int, to_type: str, force: bool) -> Call[str]:
    return Call("move", keys.job(job_id), (job_id, to_type, flag(force)), as_is)


def edit(keys: Keys, job_id: int, data_json: str, words: str) -> Call[str]:
    return Call("edit", keys.job(job_id), (job_id, data_json, words), as_is)


def reseal(
    keys: Keys,
    job_id: int,
    fields: Sequence[tuple[str, str, str]],
    lines: Sequence[tuple[int, str, str]] = (),
    entries: Sequence[tuple[int, str, str]] = (),
    parts: Sequence[tuple[str, str, str]] = (),
) -> Call[int]:
    """Replace a job's sealed values by the same under a newer key, each only while it holds
    what was read: ``fields`` (field, read, new), ``lines`` of its log and ``entries`` of its
    history (index, read, new), ``parts`` of its stream (entry id, read, new); how many were
    replaced."""
    counts = (len(fields), len(lines), len(entries))
    args = (job_id, *counts, *flat(fields), *flat(lines), *flat(entries), *flat(parts))
    return Call("reseal", keys.job(job_id), args, int)


def tag(keys: Keys, job_id: int, what: str, rows: Sequence[str] = ()) -> Call[Any]:
    """Add or remove tags (``rows``: tag, its words...), or track or untrack a job."""
    return Call("tag", keys.job(job_id), (job_id, what, *rows), as_is)


def pin(keys: Keys, job_id: int, workers_json: str) -> Call[str]:
    return Call("pin", keys.job(job_id), (job_id, workers_json), as_is)


def progress(keys: Keys, job_id: int, percent: int, data_json: str) -> Call[None]:
    """Set a job's progress (``percent``, and ``data_json``: what its handler reported)."""
    return Call("progress", keys.job(job_id), (job_id, percent, data_json), nothing)


def log(keys: Keys, job_id: int, line: str) -> Call[int]:
    """Add a line to a job's log: how many lines it holds."""
    return Call("log", keys.job(job_id), (job_id, line), integer)


def stream(
    keys: Keys, job_id: int, token: str, parts: list[str], entries: int, most: int
) -> Call[str]:
    """Append parts (JSON each) to a running job's stream, under its attempt's fencing
    token, keeping at most ``entries`` parts and ``most`` bytes of them: the last part's
    entry id."""
    args = (job_id, token, entries, most, *parts)
    return Call("stream", keys.job(job_id), args, str)


def step(keys: Keys, job_id: int, token: str, name: str, result: str, attempt: int) -> Call[bool]:
    """Record a running job's step ``name`` and its result (JSON), under its attempt's
    fencing token: False when the step had a result already (kept)."""
    return Call("step", keys.job(job_id), (job_id, token, name, result, attempt), written)


def signal(keys: Keys, job_id: int, name: str, payload: str) -> Call[str]:
    """Give a job signal ``name`` with ``payload`` (JSON): ``resumed``, ``kept`` or
    ``already`` (see ``signal.lua``)."""
    return Call("signal", keys.job(job_id), (job_id, name, payload), str)


# -- the jobs of a set ------------------------------------------------------------------------
def bulk(
    keys: Keys,
    key: str,
    state: str,
    action: str,
    limit: int,
    members: Sequence[str] = (),
    reason: str = "",
) -> Call[tuple[int, int]]:
    """One batch of ``action`` (a state to move to, ``remove`` or ``cancel`` with its
    ``reason``) on the jobs of ``state`` in the set ``key`` (those of ``members`` only, when
    given): (jobs handled, jobs left in the set)."""
    return Call("bulk", key, (state, action, limit, reason, *members), pair)


# -- a job type's rules -----------------------------------------------------------------------
def feed(keys: Keys, job_type: str, event: str, on: bool) -> Call[None]:
    """Start or stop the feed of ``event`` of ``job_type`` (see ``feed.lua``)."""
    return Call("feed", keys.limits, (job_type, event, flag(on)), nothing)


def pause(keys: Keys, job_type: str) -> Call[bool]:
    """Stop claims of ``job_type``; False when it was paused already."""
    return Call("pause", keys.paused, (job_type,), bool)


def resume(keys: Keys, job_type: str) -> Call[bool]:
    """Allow claims of ``job_type`` again; False when it was not paused."""
    return Call("resume", keys.paused, (job_type,), bool)


def _rules(text: Any) -> dict[str, Any]:
    value = json.loads(text)
    return value if isinstance(value, dict) else {}


def limit(
    keys: Keys, job_type: str, changes: dict[str, Any], end_hold: bool
) -> Call[dict[str, Any]]:
    """Change the limits of ``job_type`` (see ``limit.lua``): its rules after."""
    return Call("limit", keys.limits, (job_type, json.dumps(changes), flag(end_hold)), _rules)
