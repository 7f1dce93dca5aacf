"""The ``KueError`` hierarchy: every error kue_core raises on purpose is one of these."""

from __future__ import annotations

import math
import re
from datetime import timedelta

import redis

from ..defaults import MAX_LIMIT_MS, SIGNAL_NAME_MAX, SIGNAL_NAME_RULE, SIGNAL_TIMEOUT_MAX


class KueError(Exception):
    """Base class of every error raised by kue_core."""


class InvalidJob(KueError, ValueError):
    """A job option or argument is invalid; nothing was written to Redis."""


class InvalidWorkerConfig(InvalidJob):
    """A worker cannot run as asked: a wrong ``process()`` call, or ``run()`` without a
    handler or outside the main thread. Nothing was started."""


class InvalidSchedule(InvalidJob):
    """A schedule cannot be defined as asked: its key, interval, cron expression, time zone,
    start, end, limit, catch-up, or the job it makes. Nothing was written."""


class InvalidLimit(InvalidJob):
    """A type's limits cannot be set as asked: a rate that is not (max_jobs, per_ms), a
    concurrency below 1, a bad type name, or no limit given. Nothing was written."""


class InvalidEncryptionKeys(InvalidJob):
    """The encryption keys given are not ``<key id>:<32 bytes in base64>``, comma-separated,
    each id once (see :mod:`kue_core.base.sealing`)."""


class CannotDecrypt(KueError):
    """A job's payload is encrypted under a key this process cannot open it with: the key
    (``key_id``) is not among the queue's keys, or the stored text does not authenticate under
    it (another key of the same id, or a changed text)."""

    def __init__(self, key_id: str, what: str, missing: bool) -> None:
        self.key_id = key_id
        self.missing = missing
        self.field = what
        why = "which this process does not have" if missing else "and does not decrypt with it"
        super().__init__(f"the job's {what} is encrypted with key {key_id!r}, {why}")


class PayloadTooLarge(InvalidJob):
    """A job's data or result larger than the queue keeps: ``size`` and ``limit`` in bytes."""

    def __init__(self, field: str, size: int, limit: int, why: str) -> None:
        self.field = field
        self.size = size
        self.limit = limit
        super().__init__(f"the job's {field} is {size:,} bytes, above {why} of {limit:,} bytes")


class PayloadUnavailable(KueError):
    """A job's data or result is in the payload store, and cannot be read from it: the queue
    has no store (``missing``), or the store has no such value, or (``failure``: the store's
    own error, as text) the store failed to answer, which may pass (``transient``)."""

    def __init__(self, name: str, what: str, missing: bool, failure: str | None = None) -> None:
        self.name = name
        self.field = what
        self.missing = missing
        self.transient = failure is not None
        why = (
            "this process has no payload store"
            if missing
            else f"the store failed: {failure}"
            if failure is not None
            else "the store does not have it"
        )
        super().__init__(f"the job's {what} is in the payload store as {name!r}, but {why}")


class JobNotFound(KueError, LookupError):
    """No job with this id exists."""

    def __init__(self, job_id: object) -> None:
        super().__init__(f'job "{job_id}" doesnt exist')
        self.job_id = job_id


class ScheduleNotFound(KueError, LookupError):
    """No schedule has this key."""

    def __init__(self, key: object) -> None:
        super().__init__(f'schedule "{key}" does not exist')
        self.key = key


class WorkerNotFound(KueError, LookupError):
    """No live worker process has this id."""

    def __init__(self, worker_id: object) -> None:
        super().__init__(f'worker "{worker_id}" is not running')
        self.worker_id = worker_id


class BulkNotFound(KueError, LookupError):
    """No bulk action was recorded under this id (or it was more than a day ago)."""

    def __init__(self, run_id: str) -> None:
        super().__init__(f"no bulk action {run_id!r}")
        self.run_id = run_id


class BulkCountChanged(KueError):
    """A bulk action given the count an operator confirmed (``expect``) found the filter
    matching another number when it started: it did nothing. ``matched`` is the count now,
    ``expected`` the one confirmed; ask again with the new count."""

    def __init__(self, matched: int, expected: int) -> None:
        jobs = f"{matched:,} job{'' if matched == 1 else 's'}"
        super().__init__(
            f"the filter matches {jobs} now, not the {expected:,} confirmed: nothing was done"
        )
        self.matched = matched
        self.expected = expected


class WorkerIdTaken(KueError):
    """Another live process holds this worker id: it renewed its registration within its
    lease. ``holder`` is that process as ``host:pid``; ``ago_ms``, how long ago it renewed;
    ``lease_ms``, its lease (0: unknown)."""

    def __init__(self, worker_id: str, holder: str, ago_ms: int, lease_ms: int) -> None:
        free = (
            f"{lease_ms / 1000:g} s after its last heartbeat"
            if lease_ms
            else "once its registration expires"
        )
        super().__init__(
            f"worker id {worker_id!r} is in use by {holder} (last heartbeat "
            f"{ago_ms / 1000:.1f} s ago); it is free once that process stops, or {free}"
        )
        self.worker_id = worker_id
        self.holder = holder
        self.ago_ms = ago_ms
        self.lease_ms = lease_ms


class InvalidTransition(KueError):
    """The job cannot move to the requested state from the state it is in."""


class HasDependents(InvalidTransition):
    """A job that other jobs are blocked waiting for cannot be removed without ``cascade``,
    which removes them too; ``dependents`` lists their ids."""

    def __init__(self, job_id: object, dependents: list[int]) -> None:
        names = ", ".join(str(d) for d in dependents)
        super().__init__(f"job {job_id} cannot be removed: jobs {names} are waiting for it")
        self.job_id = job_id
        self.dependents = dependents


class ConnectionFailed(KueError, ConnectionError):
    """Redis could not be reached, or the embedded Redis could not be started."""


class Unreachable(redis.ConnectionError, ConnectionFailed):
    """Redis could not be reached, or could not be made to run a script (its function or
    script would not stay loaded). A ``ConnectionFailed``, and the ``redis.ConnectionError``
    the blocking client raised before it was one, which callers (and the worker's loops) may
    catch."""


class NotReplicated(ConnectionFailed):
    """Fewer replicas than asked for confirmed a save in time: the jobs are on the primary but
    not acknowledged, since a failover could lose them. Saving again may store them twice."""


class JobFailed(KueError):
    """The job waited for (``job.wait()``) failed for good; ``error`` is its error as stored
    (the message, then the traceback of a Python handler)."""

    def __init__(self, job_id: int, error: str | None) -> None:
        first = (error or "").split("\n", 1)[0]
        super().__init__(f"job {job_id} failed: {first}")
        self.job_id = job_id
        self.error = error


class WaitTimeout(KueError, TimeoutError):
    """The job waited for (``job.wait(timeout)``) had not ended when the time was up."""


class NoRetry(KueError):
    """Raise from a handler to fail the job at once, whatever attempts it has left."""


class NoCurrentJob(KueError, LookupError):
    """``current_job()`` was called outside a task's run on a worker."""


class RateLimited(KueError):
    """Raise from a handler when the remote side limits the rate (an HTTP 429, say): the job
    waits ``retry_in_ms`` and runs again, without counting an attempt, and no worker process
    starts a job of its type for as long (see :mod:`kue_core.features.limits`)."""

    def __init__(self, retry_in_ms: int | float | timedelta, message: str = "") -> None:
        if isinstance(retry_in_ms, timedelta):
            retry_in_ms = retry_in_ms.total_seconds() * 1000
        if (
            isinstance(retry_in_ms, bool)
            or not isinstance(retry_in_ms, int | float)
            or not math.isfinite(retry_in_ms)
            or not 1 <= retry_in_ms <= MAX_LIMIT_MS
        ):
            # As checks.number words it (checks is built on this module).
            raise InvalidJob(
                f"retry_in_ms must be a number from 1 to {MAX_LIMIT_MS}, got {retry_in_ms!r}"
            )
        self.retry_in_ms = int(retry_in_ms)
        super().__init__(message or f"rate limited: retry in {self.retry_in_ms} ms")


class Stopped(KueError):
    """Raised by ``job.progress()`` and ``job.log()`` in a handler whose attempt is over (past
    its ttl, lease lost, worker shutting down, cancelled): the handler should return, and
    whatever it returns or raises is dropped. ``job.stopping`` tells the same without raising.
    A handler in a thread cannot be killed, so this is how it learns to stop."""


def check_field_name(what: str, name: object) -> str:
    """The name of a signal or a step (``what``), checked: 1 to SIGNAL_NAME_MAX letters, digits
    or ``_.:-`` (it ends a hash field's name, ``signal:<name>``, ``step:<name>``)."""
    if not isinstance(name, str) or not re.fullmatch(SIGNAL_NAME_RULE, name):
        raise InvalidJob(
            f"a {what}'s name is 1 to {SIGNAL_NAME_MAX} letters, digits or _.:-, got {name!r:.120}"
        )
    return name


def check_signal_name(name: object) -> str:
    """A signal's name (``WaitForSignal``, ``queue.signal``), checked."""
    return check_field_name("signal", name)


class WaitForSignal(KueError):
    """Raise from a handler to end its attempt waiting for signal ``name``: the job leaves
    ``active`` for ``suspended``, holding no slot and no lease, until ``queue.signal(job_id,
    name, payload)`` resumes it (a signal sent before is kept, and resumes it at once); its
    next attempt reads the payload as ``job.signals[name]``. ``timeout`` (ms or a
    ``timedelta``; None: none): then the job is resumed without the signal
    (``job.resumed.by == "timeout"``), or fails for good with ``on_timeout="fail"``. No
    attempt is counted (see :mod:`kue_core.features.signals`)."""

    def __init__(
        self,
        name: str,
        timeout: int | float | timedelta | None = None,
        *,
        on_timeout: str = "resume",
    ) -> None:
        check_signal_name(name)
        if isinstance(timeout, timedelta):
            timeout = timeout.total_seconds() * 1000
        if timeout is not None and (
            isinstance(timeout, bool)
            or not isinstance(timeout, int | float)
            or not 1 <= timeout <= SIGNAL_TIMEOUT_MAX  # (false for a NaN; no float of 10**400)
        ):
            raise InvalidJob(
                f"timeout must be a number of ms from 1 to {SIGNAL_TIMEOUT_MAX}, "
                f"got {timeout!r:.60}"
            )
        if on_timeout not in ("resume", "fail"):
            raise InvalidJob(f"on_timeout is 'resume' or 'fail', got {on_timeout!r:.60}")
        self.name = name
        self.timeout_ms = None if timeout is None else int(timeout)
        self.on_timeout = on_timeout
        super().__init__(f"waiting for signal {name}")


#: Error codes returned by the Lua scripts (first word of the error reply) -> exception class.
SCRIPT_ERRORS: dict[str, type[KueError]] = {
    "KUE_NOT_FOUND": JobNotFound,
    "KUE_INVALID_TRANSITION": InvalidTransition,
    "KUE_HAS_DEPENDENTS": HasDependents,
    "KUE_INVALID": InvalidJob,
    "KUE_STOPPED": Stopped,
}
