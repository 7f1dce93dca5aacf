"""Waiting for a job to end (``job.wait(timeout)``), on either client: what tells that a job
has ended, read from the job or from its event, and the blocking wait.

A wait subscribes to the queue's events first, then reads the job: an end that comes between
the two is heard, one that came before is read.
"""

from __future__ import annotations

import contextlib
import json
import time
from dataclasses import dataclass
from typing import Any, Protocol

from .. import defaults
from ..base import checks, payloads, sealing
from ..base.errors import JobFailed, JobNotFound, PayloadUnavailable, WaitTimeout
from ..base.payloads import Offload
from ..base.sealing import Keyring
from ..store.events import Event, EventStream


class WaitedJob(Protocol):
    """What a wait reads of a job (of either client)."""

    @property
    def state(self) -> str | None: ...
    @property
    def result(self) -> Any: ...
    @property
    def error(self) -> str | None: ...


class Source(Protocol):
    """What a blocking wait needs of its queue: its events, and its jobs."""

    def event_stream(self) -> EventStream: ...
    def get_job(self, job_id: int) -> WaitedJob: ...


#: The events after which a job has no more: what a wait listens for.
FINAL = ("complete", "failed", "remove")


@dataclass(frozen=True)
class Ended:
    """How a job ended: ``complete`` (with its ``result``), ``failed`` (with its ``error``)
    or ``removed``."""

    job_id: int
    how: str
    result: Any = None
    error: str | None = None

    def value(self) -> Any:
        """The result of a completed job; raises for a failed or removed one."""
        if self.how == "complete":
            return self.result
        if self.how == "failed":
            raise JobFailed(self.job_id, self.error)
        raise JobNotFound(self.job_id)


def by_job(job: WaitedJob | None, job_id: int) -> Ended | None:
    """The end of a job as read (None: not found), or None while it has not ended."""
    if job is None:
        return Ended(job_id, "removed")
    if job.state == "complete":
        return Ended(job_id, "complete", result=job.result)
    if job.state == "failed":
        return Ended(job_id, "failed", error=job.error)
    return None


def by_event(
    event: Event, ring: Keyring | None = None, offload: Offload | None = None
) -> Ended | None:
    """The end a job's event tells, or None for an event that is not one; a result in the
    payload store read from it (``offload``), one sealed under the queue's keys (``ring``)
    opened."""
    if event.name == "complete":
        result = event.args[0]
        if isinstance(result, dict) and payloads.STORED in result:
            text = json.dumps(result, separators=(",", ":"))
            if offload is None:
                raise PayloadUnavailable(str(result[payloads.STORED]), "result", missing=True)
            result = json.loads(offload.loaded(text, "result"))
            if isinstance(result, dict) and sealing.SEALED in result and ring is not None:
                result = sealing.opened_value(ring, result, "result")
            return Ended(event.id, "complete", result=result)
        result = sealing.opened_value(ring, result, "result")
        return Ended(event.id, "complete", result=result)
    if event.name == "failed":
        message = event.args[0]
        return Ended(event.id, "failed", error=None if message is None else str(message))
    if event.name == "remove":
        return Ended(event.id, "removed")
    return None


def as_stored(ended: Ended, job: WaitedJob | None) -> Ended:
    """A failure heard from its event, told as the job keeps it: the event carries the
    message alone, the job its whole error (the message, then the traceback), which
    ``JobFailed.error`` gives whichever way the wait learnt of the end."""
    if ended.how == "failed" and job is not None and job.state == "failed":
        return Ended(ended.job_id, "failed", error=job.error)
    return ended


def seconds(timeout: object) -> float | None:
    """A wait's ``timeout`` checked: seconds, or None for no bound."""
    if timeout is None:
        return None
    return checks.number(timeout, "timeout", 0, defaults.MAX_MS / 1000, " s")


def timed_out(job_id: int, timeout: float | None) -> WaitTimeout:
    return WaitTimeout(f"job {job_id} had not ended after {timeout} s")


def wait(queue: Source, job_id: int, timeout: object) -> Any:
    """``Job.wait`` of the blocking client."""
    limit = seconds(timeout)
    deadline = None if limit is None else time.monotonic() + limit
    stream = queue.event_stream()
    try:
        try:
            ended = by_job(queue.get_job(job_id), job_id)
        except JobNotFound:
            ended = by_job(None, job_id)
        while ended is None:
            left = defaults.SUBSCRIBE_TIMEOUT
            if deadline is not None:
                left = min(left, deadline - time.monotonic())
                if left <= 0:
                    raise timed_out(job_id, limit)
            event = stream.next_event(left)
            if event is not None and event.id == job_id:
                ended = by_event(event, sealing.of(queue), getattr(queue, "offload", None))
                if ended is not None and ended.how == "failed":
                    with contextlib.suppress(JobNotFound):  # removed since: the event tells all
                        ended = as_stored(ended, queue.get_job(job_id))
    finally:
        stream.close()
    return ended.value()
