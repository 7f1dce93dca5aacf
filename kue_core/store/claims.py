"""What a worker's scripts answer: a claimed job, or why there is none (paused, pinned jobs
only, held back by limits), the claim a finishing script makes next, and the holder of a
worker id (see :mod:`kue_core.store.scripts`)."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

#: A claimed job: its id and its hash (see ``claim.lua``).
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


def claimed(reply: Sequence[Any]) -> Claim:
    """``{id, field, value, ...}`` -> (id, hash); ``{'paused'}`` -> ``PAUSED``; ``{'pins'}``
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
    it = iter(reply[1:])
    return int(reply[0]), dict(zip(it, it, strict=True))


def completed(reply: Sequence[Any], tally: Callable[[int, int], None] | None) -> tuple[str, Claim]:
    """``complete.lua``'s reply (the next job, with ``tally`` the time and duration to count,
    the outcome last) -> (outcome, next job), telling ``tally`` what to count."""
    if tally is None:
        return reply[-1], claimed(reply[:-1])
    if reply[-3] != "":
        tally(int(reply[-3]), int(reply[-2]))
    return reply[-1], claimed(reply[:-3])


def _wait(why: str) -> Literal["paused", "pins"] | Held | None:
    """One type's entry of a ``{'wait', ...}`` reply (see ``Waits``)."""
    if why == "":
        return None
    if why == PAUSED:
        return PAUSED
    if why == PINS:
        return PINS
    return Held(int(why))


def next_args(claim: Next | None) -> list[Any]:
    """The ARGV tail of a finishing script's claim (see ``claim_after`` in lib/claims.lua)."""
    if claim is None:
        return ["", ""]
    worker_id, lease_ms, *types = claim
    return [worker_id, lease_ms, *(types[0] if types else ())]


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
