"""Builders of ``kue doctor``'s calls: a consistent snapshot of jobs and types
(``inspect``), a screen of an index set's members and of job lists (``screen``), both
read-only, and the repairs (``repair``), each of which checks its finding again first. Their
replies are the named values of :mod:`kue_core.store.calls.replies`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...base.keys import Keys
from .call import Call, flat, ints
from .replies import Inspected, JobFields, JobSnapshot, Screened, TypeSnapshot


def _fields(f: Sequence[Any]) -> JobFields | None:
    if not f:
        return None
    *values, has_data, known_type, fans_out, held = f  # inspect.lua's order, as JobFields
    until = None if held is None else float(held)
    return JobFields._make((*values, bool(has_data), bool(known_type), bool(fans_out), until))


def _job(row: Sequence[Any]) -> JobSnapshot:
    job_id, kind, fields, sets = row
    scores = {str(sets[i]): float(sets[i + 1]) for i in range(0, len(sets), 2)}
    return JobSnapshot(int(job_id), str(kind), _fields(fields), scores)


def _inspected(reply: Any) -> Inspected:
    now, jobs, types = reply
    counts = [TypeSnapshot(int(inactive), int(tokens)) for inactive, tokens in types]
    return Inspected(int(now), [_job(row) for row in jobs], counts)


def inspect(
    keys: Keys, jobs: Sequence[tuple[str, Sequence[str]]], types: Sequence[str]
) -> Call[Inspected]:
    """A consistent snapshot of ``jobs`` (id, further set names to look in) and of the
    wake-up tokens of ``types``; writes nothing (see ``inspect.lua``)."""
    asked = [v for jid, names in jobs for v in (jid, len(names), *names)]
    return Call("inspect", keys.jobs, (len(jobs), len(types), *asked, *types), _inspected)


def _screened(reply: Any) -> Screened:
    suspects, orphans = reply
    it = iter(orphans)
    return Screened(list(suspects), [(int(i), str(part)) for i, part in zip(it, it, strict=True)])


def screen(
    keys: Keys, name: str, members: Sequence[str], lists: Sequence[tuple[int, str]]
) -> Call[Screened]:
    """The ``members`` of the index set ``name`` (its key without the prefix) whose job may
    not belong there, and the job ``lists`` (id, ``log`` or ``history``) that exist while
    their job does not; writes nothing (see ``screen.lua``)."""
    args = (name, len(members), *members, *flat(lists))
    return Call("screen", keys.jobs, args, _screened)


def repair(keys: Keys, actions: Sequence[tuple[str, str, str, str]]) -> Call[list[int]]:
    """Run repair actions (name and three values each, see ``repair.lua``); 1 for each that
    changed something, 0 for each that found nothing left to do."""
    return Call("repair", keys.jobs, (len(actions), *flat(actions)), ints)
