"""Burst mode: ``queue.run(burst=True)`` and ``kue worker --burst`` serve until the work of
their types has run out, then shut down gracefully and return (as RQ's ``--burst`` and arq's
``burst=True``): for tests, and for batch runs started by cron.

The work a burst waits for, for each type its handlers serve:

* a job waiting (``inactive``), unless the type is paused (for the whole queue, or in this
  process only): nothing would take it; a type held back by its limits is waited for;
* a job running (``active``), on this worker or on any other: it may fail and be retried,
  and a job whose worker died comes back when its lease expires;
* a ``delayed`` job already due, of any type: the promotion timer of this worker moves it to
  inactive at once (then it counts, or not, as an inactive job);
* a job pinned to this worker and waiting for it;
* the retry of an attempt this process ran and failed: a job waiting out its backoff is
  part of the work (a job saved with a delay, or retried by another worker, is not).

Not waited for: delayed jobs not yet due, blocked jobs (until the jobs they depend on
complete, which makes them inactive), jobs pinned to other workers, jobs of other types,
and retries beyond the newest ``defaults.BURST_FOLLOW`` attempts failed here.
Everything is read in one ``MULTI`` (a job moving between two sets is seen in one of them).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..base.keys import Keys
from ..base.values import text
from ..store.calls import Op, read, server_now

#: The states of a job whose retries are over: it is no longer followed.
ENDED = ("complete", "failed")


def left(
    keys: Keys,
    types: Iterable[str],
    held: Iterable[str],
    worker_id: str,
    retrying: Iterable[int],
) -> Op[tuple[dict[str, int], set[int]]]:
    """The work left for a burst worker of ``types`` (paused in this process: ``held``),
    counted by kind (``inactive``, ``active``, ``due``, ``pinned``, ``retrying``: delayed
    among ``retrying``, the ids of jobs whose attempt this process failed; zero when none),
    and those of ``retrying`` still to follow (not ended, not removed). An operation (see
    :mod:`kue_core.jobs.ops`): two plain reads, the second one transaction."""
    types, retrying = sorted(set(types)), sorted(set(retrying))
    now = yield from server_now()
    commands: list[tuple[Any, ...]] = [
        ("SMEMBERS", keys.paused),
        ("ZCOUNT", keys.state("delayed"), "-inf", now),  # by due time (a type's: priority)
    ]
    for job_type in types:
        commands.append(("ZCARD", keys.type_state(job_type, "inactive")))
        commands.append(("ZCARD", keys.type_state(job_type, "active")))
        commands.append(("ZCARD", keys.places(job_type, worker_id)))
    commands.extend(("HGET", keys.job(job_id), "state") for job_id in retrying)
    replies: list[Any] = yield read(*commands, atomic=True)
    paused = {text(t) for t in replies[0]} | set(held)
    found = {"inactive": 0, "active": 0, "due": int(replies[1]), "pinned": 0, "retrying": 0}
    at = 2
    for job_type in types:
        inactive, active, pinned = (int(n) for n in replies[at : at + 3])
        at += 3
        if job_type not in paused:
            found["inactive"] += inactive
            found["pinned"] += pinned
        found["active"] += active
    states = {
        job_id: text(state)
        for job_id, state in zip(retrying, replies[at:], strict=True)
        if state is not None
    }
    found["retrying"] = sum(state == "delayed" for state in states.values())
    return found, {job_id for job_id, state in states.items() if state not in ENDED}


def describe(found: dict[str, int]) -> str:
    """``2 inactive, 1 active`` (the kinds with work left), or ``nothing``."""
    parts = [f"{n} {kind}" for kind, n in found.items() if n]
    return ", ".join(parts) or "nothing"
