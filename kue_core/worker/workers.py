"""Workers: ``queue.process(type, n, handler)`` runs handlers in this process.

One :class:`Workers` per queue holds the threads and slots of a worker process:

* ``n`` slots per ``process()`` call, each served by a thread. A slot claims a job
  (``claim.lua``), runs the handler, then completes or fails the job and claims the next one in
  the same call, so a busy slot makes one round trip per job. An idle slot blocks on the
  type's wake-up list. ``async def`` handlers run on one event loop thread; their slot waits
  for the result. With ``isolation="process"`` each slot runs its handler in a child process
  instead (:mod:`kue_core.worker.isolation`).
* a keeper thread: registers the process under its worker id and renews its lease, which
  holds the jobs it runs (``heartbeat.lua``, :mod:`kue_core.worker.identity`), returns the jobs
  of workers whose lease expired to the queue (``recover.lua``), fails attempts that outlive
  their ``ttl``, and adds the slots' completions to the queue's counters
  (:mod:`kue_core.features.tally`).
* a promotion thread (:mod:`kue_core.worker.promoter`): moves due delayed jobs to inactive.
* a control listener (:mod:`kue_core.features.control`) on the process's own channel: a running job
  cancelled or moved by hand has its attempt ended at once, and a stop request shuts the
  workers down as SIGTERM would. ``queue.pause(type, local=True)`` holds this process's slots
  of a type; ``queue.use(middleware)`` wraps every handler call (:mod:`kue_core.worker.slots`).

With ``runtime="loop"`` (:mod:`kue_core.worker.loop`) the slots, the keeper, the promotion
timer and the control listener are all tasks of one event loop, on its connection; the keeper
and the promoter run the same rounds (operations of Redis steps) on either transport.

Each run of a handler is an :class:`~kue_core.worker.attempt.Attempt`, which decides once how it
ended. A coroutine is cancelled and a child process killed when their attempt ends early;
a thread cannot be killed, so a ``def`` handler still running then is left to finish on its
own (it sees ``job.stopping``, and ``Stopped`` from ``progress()``/``log()``) and its slot goes
on in a new thread, up to ``defaults.ABANDONED_THREADS`` such threads per process.

:class:`Workers` composes the parts, each given what it uses when it is made: the state the
threads share (:class:`~kue_core.worker.state.WorkerState`, with the keeper's bell), what runs
the handlers (:class:`~kue_core.worker.slots.HandlerRunner`), the slots' serving
(:class:`~kue_core.worker.serving.Serving`), the keeper (:class:`~kue_core.worker.keeper.Keeper`,
which calls the serving back to give a stuck slot a new thread) and the promoter, each given
the queue as the worker side sees it (:class:`~kue_core.worker.state.Owner`); it answers the
control listener's messages itself. ``Queue`` calls its public methods.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
import threading
import time
from collections.abc import Callable, Coroutine, Sequence
from typing import Any, TypeVar

from .. import defaults
from ..base import checks
from ..base.errors import InvalidJob
from ..features.control import Listener, LoopListener
from ..store import calls
from ..store.calls import Call, Op, read
from . import burst, identity
from . import middleware as mw
from .attempt import Attempt, Reason
from .isolation import ISOLATIONS, Child, check_handler
from .keeper import Keeper
from .loop import EventLoop
from .promoter import Promoter
from .reserve import Reserver, job_types
from .serving import Serving
from .slots import Handler, HandlerRunner, Slot
from .state import Owner, WorkerState
from .tasks import LoopServing

__all__ = ["Owner", "Workers"]

log = logging.getLogger(__name__)

T = TypeVar("T")


class Workers:
    """The worker side of one queue in this process (see the module docstring)."""

    def __init__(
        self, queue: Owner, lease_ms: int, stall_limit: int, runtime: str = "thread"
    ) -> None:
        self.queue = queue
        #: What the threads share.
        self.state = WorkerState(queue, lease_ms, stall_limit)
        self.scripts = self.state.scripts
        self.id = self.state.id
        #: The event loop of runtime="loop": the slots are its tasks.
        self.loop: EventLoop | None = None
        #: The slots' threads, or tasks.
        self.serving: Serving | LoopServing
        if runtime == "loop":
            self.loop = EventLoop(queue)
            self._runner = HandlerRunner(self.state.bell.ring, self.loop.loop)
            self.serving = LoopServing(queue, self.state, self._runner, self.loop)
            self.state.bell.on(self.loop.loop)  # the keeper is a task of the loop
        else:
            self._runner = HandlerRunner(self.state.bell.ring)
            self.serving = Serving(queue, self.state, self._runner)
        self._closing = threading.Event()  # keeper and promoter end
        #: The keeper thread's work.
        self.keeper = Keeper(queue, self.state, self.serving.serve, self._closing)
        #: Set once :meth:`shutdown` has finished.
        self.closed = threading.Event()
        self._threads: list[threading.Thread] = []  # keeper, promoter
        self._tasks: list[asyncio.Task[None]] = []  # the same, as the loop's tasks
        self._control: Listener | LoopListener | None = None  # this process's control channel

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
        first = not self._threads and not self._tasks  # the first process() call of this queue
        label = "+".join(types)
        slots = [Slot(types, reserver, handler, is_async, f"kue-{label}-{i + 1}") for i in range(n)]
        for slot in slots:
            if isolation == "process":
                slot.child = Child(self.queue, handler, slot.name)
        if first:
            # Listening before it is listed: a stop sent once it shows in workers() reaches
            # it, and so does a cancel of the first job it claims.
            channel = self.queue.keys.control(self.id)
            self._control = self._listener(channel)
            self._control.start()
            info = json.dumps(state.info(slots), separators=(",", ":"))
            try:  # before anything starts: WorkerIdTaken if a live process has the id
                self._drive(self._starting(info))
            except BaseException:
                self._control.close()
                self._control = None
                raise
        if is_async and isolation == "thread" and self.loop is None:
            self._runner.loop()
        with state.lock:  # all at once: a heartbeat never tells of half of them
            state.slots.extend(slots)
            for slot in slots:
                self.serving.serve(slot)
        if first:  # keeper and promoter start once the slots are there to tell of
            promoter = Promoter(self.queue, self._closing, state.report)
            if self.loop is not None:  # the loop's tasks, on its connection
                aio = self.loop.transport
                self._start_task(self.keeper.run_async(aio))
                self._start_task(promoter.run_async(self.loop.client, aio))
            else:
                self._start_thread(self.keeper.run, "kue-keeper")
                self._start_thread(promoter.run, "kue-promoter")
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
        jobs still running then (not counted as attempts); stop every thread."""
        state = self.state
        state.stopping.set()
        self.serving.stop()
        state.bell.ring(beat=True)  # tell of it: "stopping" in Queue.workers()
        with state.lock:
            held = list(state.held.values())
        for event in held:
            event.set()
        deadline = time.monotonic() + max(0.0, timeout)
        while True:
            alive = self.serving.alive()
            for slot in alive:
                if slot.blocked_on is not None:
                    self._unblock(slot.blocked_on)
            left = deadline - time.monotonic()
            if not alive or left <= 0:
                break
            self.serving.join(alive[0], min(left, 0.05))
        with state.lock:
            running = list(state.attempts.values())
        released = [a for a in running if state.end(a, Reason.RELEASED)]
        if self.loop is None:
            self._close_threads(released)
        else:
            self._close_loop(self.loop, released)
        self.closed.set()

    def _close_threads(self, released: list[Attempt]) -> None:
        """The end of :meth:`shutdown` with threads: the jobs given back, the keeper and the
        promoter stopped, then the last figures and the registration's removal."""
        state = self.state
        last = self._last_words(released)
        for op in last[: len(released)]:
            state.safely(self.scripts.drive, op)
        self._closing.set()
        state.bell.ring()
        state.safely(self.queue.client.publish, self.queue.keys.promote, "-1")  # the promoter
        self._runner.close()
        for thread in self._threads:
            thread.join(timeout=5)
        if self._control is not None:
            self._control.close()
        self._close_children()
        for op in last[len(released) :]:
            state.safely(self.scripts.drive, op)

    def _close_loop(self, loop: EventLoop, released: list[Attempt]) -> None:
        """The end of :meth:`shutdown` with runtime="loop", on the loop's connection: the
        keeper's last round ends first, so no heartbeat can follow the registration's
        removal; then the jobs given back, the last figures, the removal; then the loop
        closes (the promoter's task is cancelled with it)."""
        self._closing.set()
        self.state.bell.ring()
        self._runner.close()
        if self._control is not None:
            self._control.close()
        self._close_children()
        if loop.loop.is_running():
            try:
                loop.submit(self._leave_async(loop, released)).result(_LAST_WORDS_S)
            except Exception as e:  # the loop is held (a handler blocks it), or a bug
                self.state.report(e)
        loop.close()

    def _close_children(self) -> None:
        for slot in self.state.slots:
            if slot.child is not None:
                slot.child.close()

    async def _leave_async(self, loop: EventLoop, released: list[Attempt]) -> None:
        if self._tasks:  # the keeper's last round (the promoter's task ends with the loop)
            keeper = self._tasks[0]
            if not (await asyncio.wait([keeper], timeout=_KEEPER_END_S))[0]:
                keeper.cancel()  # a round stuck on Redis: what it sent goes before the rest
                await asyncio.wait([keeper], timeout=_KEEPER_END_S)
        for op in self._last_words(released):
            try:  # one that fails (Redis is away) leaves the rest to be tried
                await loop.transport.drive(op)
            except Exception as e:
                self.state.report(e)

    def _last_words(self, released: list[Attempt]) -> list[Op[Any]]:
        """What a worker process says to Redis as it ends: each job it gave back released
        (not counted as an attempt), its last figures, and its registration removed."""
        state, keys = self.state, self.queue.keys
        ops: list[Op[Any]] = [_one(calls.release(keys, a.job_id, a.token)) for a in released]
        ops += [state.timings.flushing(keys), state.tally.flushing(keys)]
        ops.append(identity.leaving(keys, self.id, state.instance, state.lease_ms))
        return ops

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
        """Run ``op`` on the workers' own connection: the event loop's with runtime="loop"
        (waited for ``timeout`` seconds at most: ``TimeoutError``)."""
        if self.loop is None:
            return self.scripts.drive(op)
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
    def _start_thread(self, target: Callable[[], Any], name: str) -> None:
        thread = threading.Thread(target=target, name=name, daemon=True)
        thread.start()  # then listed: a shutdown under way joins only threads started
        self._threads.append(thread)

    def _listener(self, channel: str) -> Listener | LoopListener:
        """The control channel's listener: the loop's task with runtime="loop"."""
        if self.loop is None:
            return Listener(self.queue.client, channel, self._on_control, self.state.report)
        loop = self.loop
        return LoopListener(loop.client, channel, self._on_control, self.state.report, loop.submit)

    def _start_task(self, coro: Coroutine[Any, Any, None]) -> None:
        assert self.loop is not None

        async def start() -> asyncio.Task[None]:
            task = asyncio.get_running_loop().create_task(coro)
            task.add_done_callback(self._task_ended)
            return task

        self._tasks.append(self.loop.submit(start()).result())

    def _task_ended(self, future: asyncio.Future[None]) -> None:
        """A keeper's or promoter's task ended: on a bug, said (it ends with the loop else)."""
        error = None if future.cancelled() else future.exception()
        if isinstance(error, Exception):
            self.state.report(error)

    def _wake_slots(self, job_type: str) -> None:
        """End the waits for work of the idle slots of ``job_type``."""
        with self.state.lock:
            waiting = [s.blocked_on for s in self.state.slots if job_type in s.types]
        for client_id in waiting:
            if client_id is not None:
                self._unblock(client_id)

    def _unblock(self, client_id: int) -> None:
        self.state.safely(self.queue.client.client_unblock, client_id)


#: How long shutdown waits for the keeper's last round, and then for its cancel.
_KEEPER_END_S = 5.0
#: How long shutdown waits for its last words on the event loop (see ``Workers._leave_async``).
_LAST_WORDS_S = 30.0


def _one(call: Call[T]) -> Op[T]:
    """One script call, as an operation."""
    reply: T = yield call
    return reply
