"""Worker middleware: ``queue.use(mw)`` wraps every handler call of the queue's workers in
this process, in the order added (the first one added is the outermost).

A middleware is ``def mw(job, call_next)`` or ``async def mw(job, call_next)``. It runs what it
likes before and after ``call_next()``, which runs the next middleware and finally the handler,
and it returns the job's result (usually what ``call_next()`` returned). It is where set-up and
tear-down around every job go: a database session, a tracing span, a logging context. Raising
fails the attempt like a failing handler (``NoRetry``: for good), so a middleware can also
refuse a job without calling ``call_next()``.

* A ``def`` middleware wraps every handler. Around an ``async def`` handler it runs in the
  slot's thread, around the whole run of the coroutine.
* An ``async def`` middleware awaits ``call_next()`` on the event loop: it wraps ``async def``
  handlers only, and a queue refuses to have both it and ``def`` handlers.
* With ``isolation="process"`` middleware runs in the child, around the handler, so it must be
  importable by name, like the handler.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from typing import Any

from ..base.errors import InvalidJob
from ..jobs.job import Job

Middleware = Callable[[Job, Callable[[], Any]], Any]
Call = Callable[[Job], Any]


def is_async(mw: Middleware) -> bool:
    return inspect.iscoroutinefunction(mw)


def check(mw: object) -> None:
    """Refuse what cannot be a middleware: not callable, or not taking (job, call_next)."""
    if not callable(mw):
        raise InvalidJob(f"a middleware must be callable, got {mw!r}")
    try:
        inspect.signature(mw).bind(None, None)
    except TypeError:
        raise InvalidJob(f"a middleware takes (job, call_next): {mw!r} does not") from None
    except ValueError:
        pass  # no signature to read (some built-ins): it will show when called


def split(middleware: Sequence[Middleware]) -> tuple[tuple[Middleware, ...], ...]:
    """(the ``def`` middleware, the ``async def`` middleware), each in the order added."""
    plain = tuple(mw for mw in middleware if not is_async(mw))
    awaited = tuple(mw for mw in middleware if is_async(mw))
    return plain, awaited


def wrap(middleware: Sequence[Middleware], call: Call) -> Call:
    """``call(job)`` wrapped in ``def`` middleware (the first outermost)."""
    for mw in reversed(middleware):
        call = partial(_step, mw, call)
    return call


def wrap_async(middleware: Sequence[Middleware], call: Callable[[Job], Awaitable[Any]]) -> Call:
    """An ``async def`` handler wrapped in ``async def`` middleware (the first outermost)."""
    for mw in reversed(middleware):
        call = partial(_step_async, mw, call)
    return call


def _step(mw: Middleware, call: Call, job: Job) -> Any:
    return mw(job, partial(call, job))


async def _step_async(mw: Middleware, call: Callable[[Job], Awaitable[Any]], job: Job) -> Any:
    return await mw(job, partial(call, job))
