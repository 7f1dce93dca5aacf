"""How a handler's run ended, as the worker reports it: :class:`Done`, :class:`Failed`,
:class:`Limited` (it raised ``RateLimited``) or :class:`Suspended` (``WaitForSignal``).

Shared by the worker's threads and by a process-isolated handler's child, which sends these
back over its pipe (they pickle). A leaf of the worker layer: it imports nothing above the
job model.
"""

from __future__ import annotations

import asyncio
import os
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..base.errors import NoRetry, PayloadTooLarge, RateLimited, WaitForSignal
from ..jobs import backoff, stored_fields
from ..jobs.job import Job, to_json

#: Source files of the worker machinery, whose frames a kept traceback leaves out.
_HERE = os.path.dirname(os.path.abspath(__file__))
_MACHINERY = frozenset(
    os.path.join(_HERE, name)
    for name in (
        "slots.py",
        "isolation.py",
        "attempt.py",
        "outcome.py",
        "middleware.py",
    )
)


@dataclass(frozen=True)
class Done:
    """A handler returned: its result, as JSON."""

    result: str


@dataclass(frozen=True)
class Failed:
    """A handler failed: the error's one-line message, the text kept on the job, and whether
    the error asked not to be retried (``NoRetry``)."""

    message: str
    text: str
    no_retry: bool


@dataclass(frozen=True)
class Limited:
    """A handler raised ``RateLimited``: the job waits ``retry_in_ms``, no attempt counted,
    and its type is held back as long."""

    retry_in_ms: int
    message: str


@dataclass(frozen=True)
class Suspended:
    """A handler raised ``WaitForSignal``: the job waits for signal ``name`` (``timeout_ms``
    at most, None: no bound; then ``on_timeout``), no attempt counted."""

    name: str
    timeout_ms: int | None
    on_timeout: str


Outcome = Done | Failed | Limited | Suspended


def run(call: Callable[..., Any], *args: Any) -> Outcome:
    """``call(*args)`` (a handler's run): its JSON result, or its failure, whatever it raised."""
    try:
        return Done(to_json(call(*args), "result"))
    except BaseException as e:  # the handler's failure, whatever it is, fails the attempt
        return failure(e)


def unreadable(job: Job) -> Failed | None:
    """The outcome of a job whose data, a signal's payload or a step's result this worker
    cannot decrypt (its key is not among the queue's, see kue_core.base.sealing) or read
    from the payload store: failed at once, naming the key id, its handler not run; None for
    any other job."""
    if job.unopened is None or not stored_fields.read_by_handler(job.unopened.field):
        return None  # (a result or an error it cannot read does not stop the handler)
    # Retried when the payload store failed to answer (it may answer next time); not when
    # the value or the key is not there.
    transient = getattr(job.unopened, "transient", False)
    return Failed(*describe(job.unopened), no_retry=not transient)


def stored_result(job: Job, result: str) -> str | Failed:
    """A handler's result (JSON) as stored: sealed when the job's queue has keys, in the
    payload store when it is larger than the queue keeps in Redis (see kue_core.base.payloads;
    but for a fan-out job's, or one others depend on, which they copy: those stay in Redis);
    or the failure, not retried, of a result larger than the queue takes."""
    ring = job.queue.keyring
    if ring is not None:
        result = ring.seal(result, "result")
    offload = job.queue.offload
    if offload is None:
        return result
    try:
        if job.has_dependents or job.fan_out() is not None:
            offload.check(result, "result")
            return result
        return offload.stored(result, "result")[0]
    except PayloadTooLarge as e:
        return Failed(*describe(e), no_retry=True)


async def reported(
    loop: asyncio.AbstractEventLoop, job: Job, outcome: Done | Failed
) -> tuple[Done | Failed, str]:
    """The outcome a loop's slot reports, and its result as stored ('' but for ``Done``): a
    result that may go to the payload store is written in a thread of the loop's pool; one
    larger than the queue takes fails the job (see :func:`stored_result`)."""
    if not isinstance(outcome, Done):
        return outcome, ""
    offload = job.queue.offload
    if offload is None or offload.keeps(len(outcome.result)):
        stored = stored_result(job, outcome.result)
    else:
        stored = await loop.run_in_executor(None, stored_result, job, outcome.result)
    return (stored, "") if isinstance(stored, Failed) else (outcome, stored)


def logged(job: Job, message: str) -> str:
    """A handler's error message as the worker's log shows it: not at all for a job of a
    queue with keys (its message may quote the data, which is never logged then)."""
    return message if job.queue.keyring is None else "(encrypted)"


def stored_failure(job: Job, failed: Failed) -> tuple[str, str]:
    """A failure's message and text as stored (and published): sealed when the job's queue
    has keys (an error's message may quote the data)."""
    ring = job.queue.keyring
    if ring is None:
        return failed.message, failed.text
    return ring.seal(failed.message, "error"), ring.seal(failed.text, "error")


def retry_delay(job: Job, no_retry: bool) -> int:
    """The delay (ms) before the retry of ``job``'s attempt failing now, as its backoff says
    (0: at once), or -1 when it is not to be retried (``NoRetry``)."""
    if no_retry:
        return -1
    delay = backoff.retry_delay(job.backoff(), job.attempts_made + 1, job.delay())
    return delay or 0


def suspendable(job: Job, outcome: Suspended) -> Suspended | Failed:
    """A ``WaitForSignal``'s outcome; or the failure (not retried) of a fan-out job's (its
    runs are not suspended), or of a wait for a signal the job has (it would be resumed at
    once, again and again)."""
    if job.fan_out() is not None:
        message = "InvalidJob: a fan-out job cannot wait for a signal"
    elif outcome.name in job.signals:
        message = (
            f"InvalidJob: the job waits for signal {outcome.name}, which it has "
            f"(job.signals[{outcome.name!r}]): test `name in job.signals` before waiting"
        )
    else:
        return outcome
    return Failed(message, message, no_retry=True)


def failure(error: BaseException) -> Failed | Limited | Suspended:
    if isinstance(error, RateLimited):
        return Limited(error.retry_in_ms, str(error))
    if isinstance(error, WaitForSignal):
        return Suspended(error.name, error.timeout_ms, error.on_timeout)
    return Failed(*describe(error), isinstance(error, NoRetry))


def describe(error: BaseException) -> tuple[str, str]:
    """(one-line message, text kept on the job): the text starts with the message, like
    a Kue stack, then the traceback from the handler down (the worker's frames left out)."""
    text = str(error).strip()
    message = f"{type(error).__name__}: {text.splitlines()[0]}" if text else type(error).__name__
    tb = error.__traceback__
    while tb is not None and tb.tb_next is not None and _ours(tb.tb_frame.f_code.co_filename):
        tb = tb.tb_next
    trace = "".join(traceback.format_exception(type(error), error, tb))
    return message, f"{message}\n{trace}"


def _ours(filename: str) -> bool:
    """Frames of the worker machinery (its modules, futures, a child's loop) rather than of
    the handler."""
    return (
        os.path.abspath(filename) in _MACHINERY
        or f"{os.sep}concurrent{os.sep}futures{os.sep}" in filename
        or f"{os.sep}asyncio{os.sep}" in filename
    )
