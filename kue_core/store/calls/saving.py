"""Builders of the calls that store something new: jobs (``save``, ``save_unique``,
``flow``), schedules and their ticks (``schedule``, ``tick``), and the statistics' history
(``sample``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...base.keys import Keys
from .call import Call, as_is, flat, written
from .replies import Ticked, UniqueSaved


def save(keys: Keys, rows: Sequence[Sequence[Any]]) -> Call[list[int]]:
    """Store jobs given as rows of ``SAVE_WIDTH`` values; their ids."""
    return Call("save", keys.ids, (len(rows), *flat(rows)), as_is, True)


def _unique_saved(reply: Any) -> UniqueSaved:
    job_id, outcome, state = reply
    return UniqueSaved(int(job_id), outcome, state)


def save_unique(keys: Keys, row: Sequence[Any], key: str, mode: str, ttl: int) -> Call[UniqueSaved]:
    """Save one job with a unique key unless a job holds it: (id, outcome, state)."""
    return Call("save_unique", keys.ids, (*row, key, mode, ttl), _unique_saved, True)


def _flow_saved(reply: Any) -> list[tuple[int, str]]:
    return [(int(i), str(state)) for i, state in reply]


def flow(keys: Keys, rows: Sequence[Sequence[Any]]) -> Call[list[tuple[int, str]]]:
    """Save jobs with dependencies, all or nothing (rows as ``flow.lua`` takes them): (id,
    state) of each."""
    return Call("flow", keys.ids, (len(rows), *flat(rows)), _flow_saved, True)


# -- schedules ------------------------------------------------------------------------------
def schedule(keys: Keys, op: str, key: str, at: int = -1, fields: Sequence[Any] = ()) -> Call[bool]:
    """Define (``set``), ``pause``, ``resume`` or ``remove`` a schedule; False when it does
    not exist."""
    return Call("schedule", keys.schedules, (op, key, at, *fields), bool)


def _ticked(reply: Any) -> Ticked:
    outcome, *rest = reply
    if outcome != "made":
        return Ticked(str(outcome), [], 0)
    held, *ids = rest
    return Ticked("made", [int(i) for i in ids], int(held))


def tick(
    keys: Keys,
    key: str,
    due: int | None,
    rev: str,
    at: int,
    rows: Sequence[Sequence[Any]],
    unique: Sequence[Any] | None = None,
) -> Call[Ticked]:
    """Fire a schedule: its jobs (rows of SAVE_WIDTH values and a tick each, with the unique
    (key, mode, ttl) they share, if any) and its next due time ``at``, if it is still due at
    ``due`` under ``rev`` (None: a trigger). Gives (``made``, ids, held): with a unique key,
    each tick's new job or the holder, and how many found a holder; (``stale``, [], 0) or
    (``gone``, [], 0)."""
    args = (key, "" if due is None else due, rev, at, *(unique or ("", "", 0)))
    return Call("tick", keys.ids, (*args, len(rows), *flat(rows)), _ticked, True)


# -- the statistics' history ----------------------------------------------------------------
def sample(keys: Keys, seen: str, minute: int, args: Sequence[Any]) -> Call[bool]:
    """Write a sample of the history (``args`` as ``sample.lua`` takes them after the minute)
    unless another process wrote one since ``<p>:history:minute`` held ``seen``: whether
    it was written."""
    return Call("sample", keys.series_minute, (seen, minute, *args), written)
