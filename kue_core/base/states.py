"""Job states and priorities: Kue's names and values."""

from __future__ import annotations

from enum import Enum


class JobState(str, Enum):  # noqa: UP042 - StrEnum would change str() of a member
    """A job's state; the value is the lowercase string stored in Redis."""

    INACTIVE = "inactive"
    ACTIVE = "active"
    COMPLETE = "complete"
    FAILED = "failed"
    DELAYED = "delayed"
    #: Ours: waiting for the jobs it depends on to complete (see kue_core.features.flows).
    BLOCKED = "blocked"
    #: Ours: waiting for one of the workers it is pinned to (see kue_core.features.pins).
    PINNED = "pinned"
    #: Ours: its handler waits for a signal, holding no slot (see kue_core.features.signals).
    SUSPENDED = "suspended"

    def __str__(self) -> str:
        return self.value


STATES: tuple[str, ...] = tuple(s.value for s in JobState)

#: What a retry and a promotion take a job from (``Queue.retry``, ``Queue.promote``).
RETRYABLE = ("failed", "complete")
PROMOTABLE = ("delayed",)

#: Kue's priority names; a lower score runs sooner.
PRIORITIES: dict[str, int] = {"low": 10, "normal": 0, "medium": -5, "high": -10, "critical": -15}

#: Priorities are stored as zset scores (doubles); keep them well inside exact integers.
PRIORITY_LIMIT = 2**31


def priority_name(value: int) -> str | None:
    """The name of a canonical priority value, or None for any other integer."""
    for name, v in PRIORITIES.items():
        if v == value:
            return name
    return None
