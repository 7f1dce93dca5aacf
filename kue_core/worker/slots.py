"""A worker slot, and how its handler runs: in the slot's own thread (``def``), on the worker
process's event loop (``async def``), or in the slot's child process (``isolation="process"``),
wrapped in the queue's middleware each time (:mod:`kue_core.worker.middleware`)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import itertools
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..jobs.job import Job
from . import middleware as mw
from .attempt import Attempt
from .isolation import Child
from .outcome import Outcome, run
from .reserve import Reserver

Handler = Callable[[Job], Any]

#: A ``def`` handler that returned within this long (s), or took longer without waiting (see
#: :func:`waits`), is brief. While the process's ``def`` handlers are brief, their slots are
#: served on the loop, their calls taking turns with it (:class:`kue_core.worker.loop.Handoff`);
#: once they are slow (see ``SLOW_AGAIN``), they go on in threads of their own, each with a
#: connection of its own (see :class:`kue_core.worker.tasks.LoopServing`). 16 slots of
#: handlers that sleep 2 ms: 2,800 jobs/s all taken as brief, 4,000 with a pool's thread for
#: each call, 4,400-4,700 with a hand-off thread woken for each.
BRIEF_S = 0.001


#: A slow ``def`` handler puts the process's ``def`` slots in threads of their own (see
#: :mod:`kue_core.worker.tasks`) when another was slow within this many calls before it:
#: once is a hiccup (a write the file system held up a few ms, say), which cost 5 s of
#: threads, and Redis twice the work a job, to 16 slots of a handler that appends a line to a
#: file (the benchmark's: one run in five fell from 14,500-18,500 jobs/s to 7,500). 16 slots
#: of no-op handlers of which one in 10,000 sleeps 3 ms: 17,200-19,600 jobs/s against
#: 12,700-17,400 at the first; one in 1,000: the same either way (3 interleaved pairs).
SLOW_AGAIN = 2000

try:
    from resource import RUSAGE_THREAD, getrusage

    _THREAD: int | None = RUSAGE_THREAD
except ImportError:  # not Linux (no RUSAGE_THREAD), not Unix (no resource)
    _THREAD = None


def _waits_rusage() -> int:
    """How many times the calling thread has waited (voluntary context switches: I/O, a
    sleep, a lock, the interpreter's lock); a thread preempted by the kernel has not waited."""
    assert _THREAD is not None
    return getrusage(_THREAD).ru_nvcsw


#: The count of :func:`_waits_rusage` where a thread's own is known (Linux); elsewhere one
#: that changes at every call, so that every call longer than ``BRIEF_S`` is taken as slow.
waits: Callable[[], int] = _waits_rusage if _THREAD is not None else itertools.count().__next__


@dataclass(eq=False)
class Slot:
    """One of the ``n`` places of a ``process()`` call, served by one thread at a time; it
    claims jobs of its ``types`` in the order its ``reserver`` gives."""

    types: tuple[str, ...]
    reserver: Reserver
    handler: Handler
    is_async: bool
    name: str
    child: Child | None = None  # isolation="process"
    thread: threading.Thread | None = None  # the thread serving the slot now
    #: The task or thread serving the slot now is the one of this turn; and the task's end.
    turn: int = 0
    done: concurrent.futures.Future[None] | None = None
    attempt: Attempt | None = None  # the attempt that thread runs
    blocked_on: int | None = None  # Redis client id while waiting for work
    held_back: bool = False  # a stuck handler holds the slot: too many threads left behind
    #: When the slot last asked for a job (monotonic and wall clock, s): see Serving._stale.
    asked: tuple[float, float] = (0.0, 0.0)
    #: Its last handler returned quickly, so it claims ahead (see kue_core.worker.ahead).
    quick: bool = False
    #: Its last handler returned within ``BRIEF_S`` (see kue_core.worker.loop.Handoff).
    brief: bool = True

    @property
    def in_thread(self) -> bool:
        """Whether the handler runs in the slot's own thread (which cannot be stopped)."""
        return self.child is None and not self.is_async


def clock() -> tuple[float, float]:
    """Now on both clocks: a process frozen then resumed shows on the monotonic one, a machine
    suspended then resumed on the wall clock."""
    return time.monotonic(), time.time()


class HandlerRunner:
    """Runs the handlers of one worker process's slots, in the thread it is called in: a
    ``def`` one there, an ``async def`` one wrapped in a plain middleware on the worker's event
    ``loop`` (waited for there), a process-isolated one in its child. ``child_started`` is
    called when a child process begins a job (the keeper then watches its ttl)."""

    def __init__(self, child_started: Callable[[], Any], loop: asyncio.AbstractEventLoop) -> None:
        self._child_started = child_started  # a child began a job: its ttl counts from now
        #: The worker's event loop, which ``async def`` handlers run on.
        self._loop = loop
        #: When a ``def`` handler was last slow, another before it (see SLOW_AGAIN)
        #: (monotonic, s).
        self.slow_at = -math.inf
        self._calls = 0  # the def handlers' calls so far, and the last slow one's number
        self._slow_call = -SLOW_AGAIN - 1

    def call(
        self,
        slot: Slot,
        attempt: Attempt,
        fields: dict[str, str],
        middleware: tuple[mw.Middleware, ...],
    ) -> Outcome:
        """Run the slot's handler on the attempt's job; registers with the attempt how to stop
        it early (cancel the coroutine, kill the child)."""
        if slot.child is not None:
            attempt.stop_with(slot.child.kill)

            def started() -> None:
                attempt.started()  # the ttl counts from the child's start of the job
                self._child_started()

            return slot.child.run(attempt.job_id, fields, started, middleware)
        if slot.is_async:
            if not middleware:
                return run(self._await, attempt, slot.handler)
            plain, awaited = mw.split(middleware)
            handler = mw.wrap_async(awaited, slot.handler)
            return run(mw.wrap(plain, lambda job: self._await(attempt, handler)), attempt.job)
        # Timed in the thread (the loop's turns left out). A call that took longer but never
        # waited was preempted by the kernel (a machine with more to run than CPUs): brief
        # still, not a handler that blocks. 4 processes of 16 slots on 2 CPUs saw one to
        # three such calls a process in 10,000, each of which put its slots in threads of
        # their own for THREADS_S, with Redis working 1.2-1.4x as much a job.
        self._calls += 1  # (not under a lock: a call missed at times matters little)
        began, waited = time.monotonic(), waits()
        try:
            if middleware:
                return run(mw.wrap(middleware, slot.handler), attempt.job)
            return run(slot.handler, attempt.job)
        finally:
            ended = time.monotonic()
            slot.brief = ended - began < BRIEF_S or waits() == waited
            if not slot.brief:
                if self._calls - self._slow_call <= SLOW_AGAIN:
                    self.slow_at = ended
                self._slow_call = self._calls

    def async_handler(
        self, slot: Slot, middleware: tuple[mw.Middleware, ...]
    ) -> Callable[[Job], Any]:
        """The slot's ``async def`` handler wrapped in ``middleware`` (all ``async def``)."""
        return mw.wrap_async(middleware, slot.handler) if middleware else slot.handler

    def _await(self, attempt: Attempt, handler: Handler) -> Any:
        future = asyncio.run_coroutine_threadsafe(handler(attempt.job), self._loop)
        attempt.stop_with(future.cancel)
        return future.result()
