"""The job a task runs for: :func:`current_job` from anywhere inside a task.

A task's handler (:mod:`kue_core.clients.tasks`) sets it around the function's call, in a
context variable: each thread, each asyncio task and each child process of an isolated task
sees its own job.
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Any

from ..base.errors import NoCurrentJob

_current: ContextVar[Any] = ContextVar("kue_current_job")


def current_job() -> Any:
    """The job the running task works on (``Job``, or ``AsyncJob`` in an ``async def`` task
    served by ``AsyncQueue``): its ``progress()``, ``log()`` and ``stopping``. Raises
    ``NoCurrentJob`` outside a task."""
    job = _current.get(None)
    if job is None:
        raise NoCurrentJob(
            "current_job() is for code a task runs: this is not inside a task's call on a "
            "worker (a direct call of the function is an ordinary call, with no job)"
        )
    return job


def running(job: Any) -> Any:
    """Make ``job`` the current job; returns the token to give :func:`done`."""
    return _current.set(job)


def done(token: Any) -> None:
    _current.reset(token)
