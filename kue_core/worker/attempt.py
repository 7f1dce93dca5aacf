"""One attempt: a handler's run on a claimed job, and the single decision of how it ended.

Several threads may want to end an attempt: the slot when its handler returns, the keeper
when the ttl passes or the lease is found lost, shutdown when it gives the job back, and an
operator's cancel. :meth:`Attempt.end` lets exactly one of them win, under the attempt's own
lock, and the winner alone reports to Redis (complete, fail or release). The losers' results
are dropped.

That choice only decides who *reports*: correctness rests on the fencing token in Lua. The
attempt carries the token its claim got; ``complete.lua``, ``fail.lua`` and ``release.lua``
refuse a token that is no longer the job's, so a report that is late, stale or from a worker
that lost its lease (a paused process, a partition) changes nothing, whatever this process
believes.
"""

from __future__ import annotations

import enum
import threading
import time
from collections.abc import Callable
from typing import Any

from ..jobs.job import Job


class Reason(str, enum.Enum):  # noqa: UP042 - StrEnum would change str() of a member
    """Why an attempt ended."""

    def __str__(self) -> str:
        return self.value

    DONE = "done"  # the handler returned
    FAILED = "failed"  # the handler raised
    TTL = "ttl"  # it ran past the job's ttl
    LEASE_LOST = "lease lost"  # the lease expired and the job went elsewhere, or was moved
    RELEASED = "released"  # the worker shut down and gave the job back
    CANCELLED = "cancelled"  # an operator cancelled the job


#: The reasons for which the handler is still running when the attempt ends: it is stopped.
_STOPS = frozenset({Reason.TTL, Reason.LEASE_LOST, Reason.RELEASED, Reason.CANCELLED})


class _Ending:
    """How an attempt ended, as its job sees it (``job.stopping``). Kept apart so that the job
    and its attempt do not refer to each other: the job of a finished attempt is then freed
    at once, not left to the garbage collector."""

    __slots__ = ("reason", "token")

    def __init__(self, token: str) -> None:
        self.reason: Reason | None = None
        #: The attempt's fencing token: what the job's stream writes under.
        self.token = token

    @property
    def over(self) -> bool:
        return self.reason is not None


class Attempt:
    """A handler's run on one claimed job (see the module docstring)."""

    __slots__ = (
        "_ending",
        "_lock",
        "_stop",
        "began",
        "deadline",
        "ended_at",
        "job",
        "token",
        "ttl_ms",
    )

    def __init__(self, job: Job, token: str, ttl_ms: int, *, grace: float = 0.0) -> None:
        self.job = job
        self.token = token
        self.ttl_ms = ttl_ms
        #: ``time.monotonic()`` past which the ttl is exceeded (None: no ttl). ``grace``
        #: seconds are added until :meth:`started` restarts the clock (a child starting up).
        self.deadline: float | None = None
        #: ``time.monotonic()`` when the attempt began (for the run statistics).
        self.began = time.monotonic()
        if ttl_ms:
            self.deadline = self.began + ttl_ms / 1000 + grace
        #: ``time.monotonic()`` when the attempt ended; None while it runs.
        self.ended_at: float | None = None
        self._lock = threading.Lock()
        self._ending = _Ending(token)
        self._stop: Callable[[], Any] | None = None
        job._attempt = self._ending  # job.stopping, and Stopped from progress() and log()

    @property
    def job_id(self) -> int:
        assert self.job.id is not None
        return self.job.id

    @property
    def reason(self) -> Reason | None:
        """Why the attempt ended; None while it runs."""
        return self._ending.reason

    @property
    def over(self) -> bool:
        return self._ending.reason is not None

    @property
    def stopped(self) -> bool:
        """Ended from outside while its handler ran (not by the handler returning)."""
        return self._ending.reason in _STOPS

    def started(self) -> None:
        """The handler starts now: the ttl counts from here."""
        if self.ttl_ms:
            self.deadline = time.monotonic() + self.ttl_ms / 1000

    def stop_with(self, stop: Callable[[], Any]) -> None:
        """How to stop the handler early (cancel its coroutine, kill its child process). If
        the attempt has ended already, ``stop`` is called at once."""
        with self._lock:
            if self._ending.reason is None:
                self._stop = stop
                return
            stopping = self._ending.reason in _STOPS
        if stopping:
            stop()

    def end(self, reason: Reason) -> bool:
        """End the attempt for ``reason``; True for the one caller that ended it (and must
        report it), False for everyone after. Stops the handler if it is still running."""
        with self._lock:
            if self._ending.reason is not None:
                return False
            self._ending.reason = reason
            self.ended_at = time.monotonic()
            stop, self._stop = self._stop, None
        if stop is not None and reason in _STOPS:
            stop()
        return True

    def __repr__(self) -> str:
        return f"<Attempt job={self.job.id} reason={self.reason}>"
