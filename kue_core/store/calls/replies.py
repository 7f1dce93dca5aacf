"""What the worker's and the doctor's scripts answer, read into named values: a claimed job,
or why there is none (paused, pinned jobs only, held back by limits), the claim a finishing
script makes next, what a finished attempt gives (outcome, next job, what to count), the
holder of a worker id, what the sweeps did, and the doctor's snapshots (see
:mod:`kue_core.store.calls.working` and :mod:`kue_core.store.calls.doctor`)."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal, NamedTuple

#: A claimed job: its id and its hash (see ``claim.lua``), with ``waited`` (not stored: ms it
#: waited), which the script gives as an integer.
Claimed = tuple[int, dict[str, str]]
#: What a claim gives when the type is paused (see ``pause.lua``).
PAUSED: Final = "paused"
#: What a claim gives when no job is waiting for this worker and the type has pinned jobs:
#: the worker also waits on its own wake-up list of the type (see :mod:`kue_core.features.pins`).
PINS: Final = "pins"


@dataclass(frozen=True)
class Held:
    """What a claim gives when the type's limits hold it back: try again in ``wait_ms``
    (sooner when woken on the type's ``limited`` list)."""

    wait_ms: int


@dataclass(frozen=True)
class Waits:
    """What a claim from several types gives when none had a job: per type, in the order
    asked, None (none waiting), ``PAUSED``, or ``Held``."""

    each: tuple[Literal["paused", "pins"] | Held | None, ...]


#: What a claim gives: a job, ``PAUSED``, ``PINS``, ``Held``, ``Waits`` (several types), or
#: None when no job is waiting.
Claim = Claimed | Literal["paused", "pins"] | Held | Waits | None
#: The claim a finishing script makes next: worker id, lease ms, and the types to claim from
#: in order (left out: the finished job's type).
Next = tuple[str, int] | tuple[str, int, Sequence[str]]


def claimed(reply: Sequence[Any] | None) -> Claim:
    """``{field, value, ..., id}`` -> (id, hash); ``{'paused'}`` -> ``PAUSED``; ``{'pins'}``
    -> ``PINS``; ``{'limited', ms}`` -> ``Held``; None for an empty reply."""
    if not reply:
        return None
    if reply[0] == PAUSED:
        return PAUSED
    if reply[0] == PINS:
        return PINS
    if reply[0] == "limited":
        return Held(int(reply[1]))
    if reply[0] == "wait":
        return Waits(tuple(_wait(w) for w in reply[1:]))
    it = iter(reply[:-1])  # no field of a job is named as one of those answers
    return int(reply[-1]), dict(zip(it, it, strict=True))


class Batch(NamedTuple):
    """What ``claim_batch.lua`` gives: the jobs claimed, in the order successive claims would
    have taken them, and, when fewer than asked, why no more (the :data:`Claim` a claim gives
    with no job: None, ``PAUSED``, ``PINS``, ``Held`` or ``Waits``); None when all were."""

    jobs: list[Claimed]
    why: Claim


def batch(reply: Sequence[Any]) -> Batch:
    """``{job, job, ..., why}`` -> :class:`Batch` (each part read as :func:`claimed` reads a
    claim's reply; ``why`` nil or empty: None)."""
    jobs: list[Claimed] = []
    for one in reply[:-1]:
        it = iter(one[:-1])
        jobs.append((int(one[-1]), dict(zip(it, it, strict=True))))
    return Batch(jobs, claimed(reply[-1]))


def _wait(why: str) -> Literal["paused", "pins"] | Held | None:
    """One type's entry of a ``{'wait', ...}`` reply (see ``Waits``)."""
    if why == "":
        return None
    if why == PAUSED:
        return PAUSED
    if why == PINS:
        return PINS
    return Held(int(why))


@dataclass(frozen=True)
class Holder:
    """Another process registered under the worker id asked for (``heartbeat.lua``'s reply
    ``taken``): its description (host, pid, ...), its last heartbeat, its lease (0: unknown)
    and the server's time, all in ms, and its instance."""

    info: dict[str, Any]
    heartbeat: int
    lease_ms: int
    now: int
    instance: str

    @classmethod
    def parse(cls, reply: Sequence[Any]) -> Holder:
        try:
            info = json.loads(reply[1])
        except ValueError:
            info = None
        heartbeat, lease_ms, now = (int(v) for v in reply[2:5])
        return cls(info if isinstance(info, dict) else {}, heartbeat, lease_ms, now, reply[5])


class Lease(NamedTuple):
    """A lease ``heartbeat.lua`` found lost: the job's id and the token it was held under."""

    job_id: int
    token: str


def beat(reply: Sequence[Any]) -> list[Lease] | Holder:
    """``heartbeat.lua``'s reply: the leases lost, or the ``Holder`` of the worker id."""
    if reply[0] == "taken":
        return Holder.parse(reply)
    it = iter(reply[1:])
    return [Lease(int(i), str(token)) for i, token in zip(it, it, strict=True)]


class Completion(NamedTuple):
    """What the caller counts for a completion it tallies itself (see
    :mod:`kue_core.features.tally`): when it finished and how long it ran, in ms."""

    at_ms: int
    duration_ms: int


class Reported(NamedTuple):
    """What ``complete.lua`` and ``fail.lua`` give: the outcome, the next job claimed in the
    same call (a :data:`Claim`), and, for a completion the caller tallies, what to count
    (None: nothing to)."""

    outcome: str
    next_job: Claim
    tally: Completion | None = None


def reported(reply: Sequence[Any]) -> Reported:
    """``{next job..., outcome}`` (``fail.lua``, and ``complete.lua`` counting itself)."""
    return Reported(reply[-1], claimed(reply[:-1]))


def reported_tallied(reply: Sequence[Any]) -> Reported:
    """``{next job..., at ms, duration ms, outcome}`` (``complete.lua`` when the caller
    counts; an empty time: nothing to count)."""
    tally = None if reply[-3] == "" else Completion(int(reply[-3]), int(reply[-2]))
    return Reported(reply[-1], claimed(reply[:-3]), tally)


class Finished(NamedTuple):
    """What ``complete_batch.lua`` gives: per completion, in the order sent, its
    :class:`Reported` (no next job: the claims are ``jobs``; ``tally`` what the caller counts,
    None when nothing); the jobs claimed for the worker; and, when fewer than asked were
    claimed, why (a :data:`Claim` without a job: None when none was waiting, or none was
    asked)."""

    reports: list[Reported]
    jobs: list[Claimed]
    why: Claim


def finished(k: int) -> Callable[[Sequence[Any]], Finished]:
    """The reader of a ``complete_batch.lua`` reply to ``k`` completions (one flat list):
    the jobs claimed, one after another; why no more; ``{at, duration, outcome}`` per
    completion; the length of why, the length of each job, and how many."""

    def read(reply: Sequence[Any]) -> Finished:
        count = int(reply[-1])
        widths = [int(w) for w in reply[len(reply) - 1 - count : len(reply) - 1]]
        why_len = int(reply[-2 - count])
        end = len(reply) - 2 - count  # where the reports end
        reports = []
        for i in range(end - 3 * k, end, 3):
            at, duration, outcome = reply[i : i + 3]
            tally = None if at == "" else Completion(int(at), int(duration))
            reports.append(Reported(outcome, None, tally))
        why_at = end - 3 * k - why_len
        jobs, start = [], 0
        for width in widths:
            end_at = start + width - 1  # the job's id, after its fields
            it = iter(reply[start:end_at])
            jobs.append((int(reply[end_at]), dict(zip(it, it, strict=True))))
            start += width
        return Finished(reports, jobs, claimed(reply[why_at : why_at + why_len]))

    return read


class Recovered(NamedTuple):
    """What ``recover.lua`` did with jobs whose lease expired."""

    requeued: int
    failed: int


class Promoted(NamedTuple):
    """What ``promote.lua`` did and saw: jobs moved from delayed to inactive, the next due
    time of a delayed job, the server's time and the next due time of a schedule (ms; -1:
    none)."""

    moved: int
    next_due: int
    now: int
    schedule_due: int


class Retained(NamedTuple):
    """What the retention sweep (``retain.lua``) did: finished jobs found ended by others
    (Node Kue), and jobs removed."""

    found: int
    removed: int


# -- the doctor's (see kue_core/doctor/) ------------------------------------------------------
class JobFields(NamedTuple):
    """A job hash as ``inspect.lua`` reads it: its fields (None: missing) and four facts."""

    type: str | None
    state: str | None
    priority: str | None
    promote_at: str | None
    ttl: str | None
    updated_at: str | None
    created_at: str | None
    delay: str | None
    worker_id: str | None
    stalls: str | None
    lease: str | None  #: its fencing token: a claim of ours wrote it (Kue's Node workers do not)
    has_data: bool  #: it has a ``data`` field
    known_type: bool  #: its type is in ``<p>:job:types``
    fans_out: bool  #: it has a ``fan_out`` field (its runs hold their own leases)
    #: the expiry (ms) of its worker's process lease (``<p>:worker-leases``); None: none
    worker_lease: float | None


class JobSnapshot(NamedTuple):
    """One job in ``inspect.lua``'s snapshot: its id, the Redis type of its key (``none``,
    ``hash`` or another), its fields (a hash only), and the sets its member is in among
    those looked in (name: the set's key without ``<p>:``) with its score there."""

    id: int
    kind: str
    fields: JobFields | None
    sets: dict[str, float]


class TypeSnapshot(NamedTuple):
    """One job type in ``inspect.lua``'s snapshot: members of its inactive set, and wake-up
    tokens in its list."""

    inactive: int
    tokens: int


class Inspected(NamedTuple):
    """``inspect.lua``'s consistent snapshot: the server's time (ms), the jobs and the types
    asked, in their order."""

    now: int
    jobs: list[JobSnapshot]
    types: list[TypeSnapshot]


class Screened(NamedTuple):
    """What ``screen.lua`` found: the members asked whose job may not belong in the set, and
    the job lists (id, ``log``, ``history``...) whose job does not exist."""

    suspects: list[str]
    orphans: list[tuple[int, str]]


class UniqueSaved(NamedTuple):
    """What ``save_unique.lua`` gives: the job's id (the new job's, or the holder's), the
    outcome (``saved``, or what the unique key's mode did with the holder), and the holder's
    state when it was not saved (else None)."""

    job_id: int
    outcome: str
    state: str | None


class Ticked(NamedTuple):
    """What ``tick.lua`` gives: ``made`` with the ids of each tick's job (new, or the holder of
    their unique key) and how many found a holder; or ``stale`` or ``gone``, with no ids."""

    outcome: str
    ids: list[int]
    held: int
