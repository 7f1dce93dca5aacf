"""Workers: ``queue.process(type, n, handler)`` runs handlers in this process.

One :class:`Workers` per queue holds the slots of a worker process and the event loop that
owns its Redis I/O (:mod:`kue_core.worker.loop`):

* ``n`` slots per ``process()`` call, each a task of the loop (:mod:`kue_core.worker.tasks`).
  A slot claims a job, runs the handler, then completes or fails the job and claims the next
  one in the same call; the calls the slots make while one is on its way go out together in
  the next (:mod:`kue_core.worker.dispatch`). An idle slot waits on its types' wake-up lists.
  ``async def`` handlers run on the loop itself, ``def`` ones in threads: quick ones in turns
  with the loop, and while one of them blocks, each ``def`` slot in a thread of its own with
  a connection of its own (:mod:`kue_core.worker.serving`). With ``isolation="process"``
  each slot runs its handler in a child process instead (:mod:`kue_core.worker.isolation`).
* the keeper, a task of the loop: registers the process under its worker id and renews its
  lease, which holds the jobs it runs (``heartbeat.lua``, :mod:`kue_core.worker.identity`),
  returns the jobs of workers whose lease expired to the queue (``recover.lua``), fails
  attempts that outlive their ``ttl``, and adds the slots' completions to the queue's
  counters (:mod:`kue_core.features.tally`).
* the promotion timer, a task of the loop (:mod:`kue_core.worker.promoter`): moves due
  delayed jobs to inactive.
* a control listener (:mod:`kue_core.features.control`), a task of the loop, on the process's
  own channel: a running job cancelled or moved by hand has its attempt ended at once, and a
  stop request shuts the workers down as SIGTERM would. ``queue.pause(type, local=True)``
  holds this process's slots of a type; ``queue.use(middleware)`` wraps every handler call
  (:mod:`kue_core.worker.slots`).

Each run of a handler is an :class:`~kue_core.worker.attempt.Attempt`, which decides once how it
ended. A coroutine is cancelled and a child process killed when their attempt ends early;
a thread cannot be killed, so a ``def`` handler still running then is left to finish on its
own (it sees ``job.stopping``, and ``Stopped`` from ``progress()``/``log()``) and its slot goes
on in a new task, up to ``defaults.ABANDONED_THREADS`` such threads per process.

:class:`Workers` composes the parts, each given what it uses when it is made: the state the
slots share (:class:`~kue_core.worker.state.WorkerState`, with the keeper's bell), what runs
the handlers (:class:`~kue_core.worker.slots.HandlerRunner`), the slots' serving
(:class:`~kue_core.worker.tasks.LoopServing`), the keeper
(:class:`~kue_core.worker.keeper.Keeper`, which calls the serving back to give a stuck slot a
new task), and what runs beside the slots and ends the process
(:class:`~kue_core.worker.closing.Closing`: the control listener, the keeper's and the
promoter's tasks, and ``shutdown``), each given the queue as the worker side sees it
(:class:`~kue_core.worker.state.Owner`); it answers the control listener's messages itself.
``Queue`` calls its public methods.
"""

from __future__ import annotations

import inspect
import json
import logging
import threading
from collections.abc import Sequence
from typing import Any, TypeVar

from .. import defaults
from ..base import checks
from ..base.errors import InvalidJob
from ..store import calls
from ..store.calls import Op, read
from . import burst, identity
from . import middleware as mw
from .attempt import Reason
from .closing import Closing
from .isolation import ISOLATIONS, Child, check_handler
from .keeper import Keeper
from .loop import EventLoop
from .promoter import Promoter
from .reserve import Reserver, job_types
from .slots import Handler, HandlerRunner, Slot
from .state import Owner, WorkerState
from .tasks import LoopServing

__all__ = ["Owner", "Workers"]

log = logging.getLogger(__name__)

T = TypeVar("T")


class Workers:
    """The worker side of one queue in this process (see the module docstring)."""

    def __init__(self, queue: Owner, lease_ms: int, stall_limit: int) -> None:
        self.queue = queue
        #: What the slots share.
        self.state = WorkerState(queue, lease_ms, stall_limit)
        self.id = self.state.id
        #: The event loop: the slots are its tasks, and its threads'.
        self.loop = EventLoop(queue)
        self._runner = HandlerRunner(self.state.bell.ring, self.loop.loop)
        #: The slots' tasks, and threads.
        self.serving = LoopServing(queue, self.state, self._runner, self.loop)
        self.state.bell.on(self.loop.loop)  # the keeper is a task of the loop
        #: The keeper, the promoter and the control listener, and the process's end.
        self.closing = Closing(queue, self.state, self.loop)
        #: Set once :meth:`shutdown` has finished.
        self.closed = self.closing.closed
        #: The keeper's work.
        self.keeper = Keeper(queue, self.state, self.serving.serve, self.closing.ending)

    # -- public ---------------------------------------------------------------------------
    def process(
        self, job_type: str | Sequence[str], n: int, handler: Handler, isolation: str, reserve: str
    ) -> None:
        """Start ``n`` slots serving ``job_type`` with ``handler`` (see ``Queue.process``);
        the first call also registers the worker id and starts the keeper and the promoter."""
        state = self.state
        types = job_types(job_type)
        reserver = Reserver(types, reserve)
        checks.integer(n, "concurrency", 1)
        if not callable(handler):
            raise InvalidJob(f"handler must be callable, got {handler!r}")
        if isolation not in ISOLATIONS:
            raise InvalidJob(f"isolation must be one of {', '.join(ISOLATIONS)}, got {isolation!r}")
        is_async = inspect.iscoroutinefunction(handler)
        if isolation == "process":
            check_handler(handler)
        for each in self.queue.middleware:
            self.check_middleware(each, is_async, isolation == "process")
        if state.stopping.is_set():
            raise InvalidJob("the workers of this queue are shutting down")
        first = not self.closing.started  # the first process() call of this queue
        label = "+".join(types)
        slots = [Slot(types, reserver, handler, is_async, f"kue-{label}-{i + 1}") for i in range(n)]
        for slot in slots:
            if isolation == "process":
                slot.child = Child(self.queue, handler, slot.name)
        if first:
            # Listening before it is listed: a stop sent once it shows in workers() reaches
            # it, and so does a cancel of the first job it claims.
            self.closing.listener(self.queue.keys.control(self.id), self._on_control)
            info = json.dumps(state.info(slots), separators=(",", ":"))
            try:  # before anything starts: WorkerIdTaken if a live process has the id
                self._drive(self._starting(info))
            except BaseException:
                self.closing.forget_listener()
                raise
        with state.lock:  # all at once: a heartbeat never tells of half of them
            state.slots.extend(slots)
            for slot in slots:
                self.serving.serve(slot)
        if first:  # keeper and promoter start once the slots are there to tell of
            closing, aio = self.closing, self.loop.transport
            promoter = Promoter(self.queue, closing.ending, state.report)
            closing.start_task(self.keeper.run_async(aio))  # the loop's tasks, on its connection
            closing.start_task(promoter.run_async(self.loop.client, aio))
        state.bell.ring(beat=True)  # register the new types now

    def check_middleware(self, each: mw.Middleware, is_async: bool, isolated: bool) -> None:
        """Refuse a middleware that could not wrap a handler: an ``async def`` one around a
        ``def`` handler, or one a child process could not import."""
        if mw.is_async(each) and not is_async:
            raise InvalidJob(
                f"the async def middleware {each!r} can only wrap async def handlers, and this "
                "queue has a def handler"
            )
        if isolated:
            check_handler(each)

    def use(self, each: mw.Middleware) -> None:
        """Check a middleware against the handlers there are (``Queue.use`` adds it)."""
        state = self.state
        with state.lock:
            slots = list(state.slots)
        for slot in slots:
            self.check_middleware(each, slot.is_async, slot.child is not None)

    def pause_here(self, job_type: str) -> bool:
        """Stop this process's slots of ``job_type`` from claiming; False if they were."""
        state = self.state
        with state.lock:
            if job_type in state.held:
                return False
            state.held[job_type] = threading.Event()
        self._wake_slots(job_type)  # an idle slot stops waiting for work, and waits here
        state.bell.ring(beat=True)
        return True

    def resume_here(self, job_type: str) -> bool:
        """Undo :meth:`pause_here`; False if the type was not paused here."""
        state = self.state
        with state.lock:
            held = state.held.pop(job_type, None)
        if held is None:
            return False
        held.set()
        state.bell.ring(beat=True)
        return True

    def work_left(self) -> str | None:
        """What a burst of these workers still waits for (``2 inactive, 1 active``), or None
        when their types' work has run out (see :mod:`kue_core.worker.burst`)."""
        state = self.state
        with state.lock:
            types = {t for slot in state.slots for t in slot.types}
            held, retrying, running = set(state.held), dict(state.retrying), len(state.attempts)
            notes = state.notes
        keys = self.queue.keys
        found, still = self._drive(
            burst.left(keys, types, held, self.id, retrying), defaults.SOCKET_TIMEOUT
        )
        with state.lock:  # forget the retries done with, unless noted again meanwhile
            for job_id, note in retrying.items():
                if job_id not in still and state.retrying.get(job_id) == note:
                    del state.retrying[job_id]
            if state.notes != notes:  # an attempt failed meanwhile: its job may be gone
                return "an attempt that failed meanwhile"  # from the sets read: look again
        if running or any(found.values()):
            return burst.describe(found) if any(found.values()) else f"{running} running here"
        return None

    def shutdown(self, timeout: float) -> None:
        """Stop claiming; let running handlers finish for ``timeout`` seconds; give back the
        jobs still running then (not counted as attempts); stop every thread (see
        :mod:`kue_core.worker.closing`)."""
        self.closing.shutdown(self.serving, timeout)

    def _starting(self, info: str) -> Op[None]:
        """What the first :meth:`process` call says to Redis before any slot starts: the
        registration (``WorkerIdTaken`` if a live process has the id), then the paused flag
        of every type paused before it, for the claims to read."""
        state, keys = self.state, self.queue.keys
        yield from identity.registering(keys, self.id, state.instance, state.lease_ms, info)
        (paused,) = yield read(("SMEMBERS", keys.paused))
        for job_type in sorted(paused):
            yield calls.pause(keys, job_type)

    def _drive(self, op: Op[T], timeout: float | None = None) -> T:
        """Run ``op`` on the workers' own connection, the event loop's (waited for
        ``timeout`` seconds at most: ``TimeoutError``)."""
        return self.loop.submit(self.loop.transport.drive(op)).result(timeout)

    def _on_control(self, message: dict[str, Any]) -> None:
        """A message on this process's control channel (see :mod:`kue_core.features.control`),
        on the listener's thread (or the event loop): a stop request, or a running job
        cancelled or moved by hand."""
        state = self.state
        if message["op"] == "stop":
            timeout = message["timeout"]
            state.stop(timeout, f"worker {self.id}: asked to stop; running jobs get {timeout:g} s")
            return
        with state.lock:
            attempt = state.attempts.get((message["id"], message["lease"]))
        if attempt is None:  # ended already, or claimed ahead and not begun
            state.end_early(message["id"], message["lease"])
            return
        if state.end(attempt, Reason.CANCELLED):  # Redis has it failed or moved already
            log.info("job %d (%s): %s", attempt.job_id, attempt.job.type, message["reason"])
            state.bell.ring()  # the keeper gives a stuck thread slot a new thread now

    # -- helpers --------------------------------------------------------------------------
    def _wake_slots(self, job_type: str) -> None:
        """End the waits for work of the idle slots of ``job_type``."""
        with self.state.lock:
            waiting = [s.blocked_on for s in self.state.slots if job_type in s.types]
        for client_id in waiting:
            if client_id is not None:
                self.closing.unblock(client_id)
