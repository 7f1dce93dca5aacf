"""Builders of the worker's calls: its transitions (``claim``, ``complete``, ``fail``,
``release``), its registration and leases (``heartbeat``), and the sweeps its keeper and its
promotion timer run (``recover``, ``promote``, ``retain``, ``unblock``). Their replies are
the named values of :mod:`kue_core.store.calls.replies`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...base.keys import Keys
from .call import Call, flag, flat, integer, pair
from .replies import (
    Batch,
    Claim,
    Finished,
    Holder,
    Lease,
    Next,
    Promoted,
    Recovered,
    Reported,
    Retained,
    batch,
    beat,
    claimed,
    finished,
    reported,
    reported_tallied,
)


def next_args(claim: Next | None) -> list[Any]:
    """The ARGV tail of a finishing script's claim (see ``claim_after`` in lib/claims.lua)."""
    if claim is None:
        return ["", ""]
    worker_id, lease_ms, *types = claim
    return [worker_id, lease_ms, *(types[0] if types else ())]


def claim(keys: Keys, job_types: str | Sequence[str], worker_id: str, lease_ms: int) -> Call[Claim]:
    """The best inactive job of ``job_types`` (one, or several tried in order), now active
    under a lease. For one type: None when none is waiting, ``PAUSED`` when the type is
    paused, ``Held`` when its limits hold it back; for several, ``Waits``."""
    types = [job_types] if isinstance(job_types, str) else list(job_types)
    key = keys.type_state(types[0], "inactive")
    return Call("claim", key, (worker_id, lease_ms, *types), claimed)


def claim_batch(
    keys: Keys, job_types: str | Sequence[str], worker_id: str, lease_ms: int, n: int
) -> Call[Batch]:
    """Up to ``n`` (at least 1) of the best inactive jobs of ``job_types`` in one call, each
    active under its lease: the jobs ``n`` successive :func:`claim` calls would give, in their
    order, and, when fewer than ``n``, what the next :func:`claim` would give with no job."""
    types = [job_types] if isinstance(job_types, str) else list(job_types)
    key = keys.type_state(types[0], "inactive")
    return Call("claim_batch", key, (worker_id, lease_ms, n, *types), batch)


def complete(
    keys: Keys,
    job_id: int,
    token: str,
    result_json: str,
    claim: Next | None,
    tallied: bool = False,
) -> Call[Reported]:
    """Complete a job held under ``token``; with ``claim`` (worker id, lease ms, types: none
    for the job's own), also claim the next job in the same call. With ``tallied``, the
    caller counts the completion (see :mod:`kue_core.features.tally`): the script leaves the
    counters alone and the reply's ``tally`` says what to count (None: nothing)."""
    args = (job_id, token, result_json, flag(tallied), *next_args(claim))
    return Call("complete", keys.job(job_id), args, reported_tallied if tallied else reported)


def complete_batch(
    keys: Keys,
    done: Sequence[tuple[int, str, str]],
    claim: tuple[str, int, int, Sequence[str]] | None,
) -> Call[Finished]:
    """Complete the jobs of ``done`` (job id, token, result JSON each) in one call, the
    caller counting every completion (as :func:`complete` with ``tallied``); with ``claim``
    (worker id, lease ms, n, types in order), also claim up to n jobs of those types for the
    worker. The reply's ``reports`` are in the order of ``done``."""
    tail: tuple[Any, ...] = ("", "", 0)
    if claim is not None:
        worker_id, lease_ms, n, types = claim
        tail = (worker_id, lease_ms, n, *types)
    args = (len(done), *flat(done), *tail)
    return Call("complete_batch", keys.leases, args, finished(len(done)))


def fail(
    keys: Keys,
    job_id: int,
    token: str,
    message: str,
    text: str,
    retry_delay: int,
    claim: Next | None,
) -> Call[Reported]:
    """Fail an attempt (``retry_delay`` ms before the retry; -1 = never retry); like
    :func:`complete` for ``claim``."""
    args = (job_id, token, message, text, retry_delay, *next_args(claim))
    return Call("fail", keys.job(job_id), args, reported)


def release(keys: Keys, job_id: int, token: str, rate_limited_ms: int | None = None) -> Call[bool]:
    """Give an unfinished job back, no attempt counted: to inactive (worker shutdown), or
    delayed ``rate_limited_ms``, its type held back as long (``RateLimited``). False if not
    held under ``token``."""
    wait = "" if rate_limited_ms is None else rate_limited_ms
    return Call("release", keys.job(job_id), (job_id, token, wait), bool)


def suspend(
    keys: Keys, job_id: int, token: str, name: str, timeout_ms: int | None, on_timeout: str
) -> Call[str]:
    """End an attempt waiting for signal ``name`` (``WaitForSignal``): ``suspended``,
    ``resumed`` (the signal had come: the job waits for a worker again), or ``''`` if the job
    is not held under ``token``."""
    wait = "" if timeout_ms is None else timeout_ms
    return Call("suspend", keys.job(job_id), (job_id, token, name, wait, on_timeout), str)


def heartbeat(
    keys: Keys,
    worker_id: str,
    lease_ms: int,
    info_json: str,
    held: Sequence[tuple[int, str]],
    *,
    instance: str = "",
    mode: str = "beat",
) -> Call[list[Lease] | Holder]:
    """Register the worker as ``instance`` and renew its process's lease; of ``held`` (id,
    token), the pairs lost. ``mode`` ``start``, ``force`` or ``leave`` (deregister): see
    ``heartbeat.lua``. A :class:`Holder` when another instance holds the id: nothing was
    written."""
    pairs = [v for lease in held for v in lease]
    args = (worker_id, instance, mode, lease_ms, info_json, len(held), *pairs)
    return Call("heartbeat", keys.leases, args, beat)


def _recovered(reply: Any) -> Recovered:
    return Recovered(*pair(reply))


def recover(keys: Keys, stall_limit: int, limit: int) -> Call[Recovered]:
    """Requeue (or fail, past ``stall_limit``) jobs whose lease expired."""
    return Call("recover", keys.leases, (stall_limit, limit), _recovered)


def _promoted(reply: Any) -> Promoted:
    moved, next_due, now, schedule_due = reply
    return Promoted(int(moved), int(next_due), int(now), int(schedule_due))


def promote(keys: Keys, limit: int) -> Call[Promoted]:
    """Move due delayed jobs to inactive."""
    return Call("promote", keys.state("delayed"), (limit,), _promoted)


def _retained(reply: Any) -> Retained:
    return Retained(*pair(reply))


def retain(keys: Keys, limit: int) -> Call[Retained]:
    """The retention sweep."""
    return Call("retain", keys.finished_cursor, (limit,), _retained)


def unblock(keys: Keys, limit: int) -> Call[int]:
    """The dependencies sweep: how many awaited jobs it found ended (by Node Kue)."""
    return Call("unblock", keys.awaited, (limit,), integer)
