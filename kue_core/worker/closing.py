"""What runs beside a worker process's slots, and how the process ends.

:class:`Closing` holds the parts that start with a process's first ``process()`` call and
have to stop with it: the control listener, the keeper and the promoter, tasks of the event
loop on its connection.

:meth:`Closing.shutdown` ends a worker process in an order that leaves nothing behind: the
slots stop claiming; running handlers get the time given; the jobs still running then are
given back (released, not counted as attempts); the keeper and the promoter stop; and only
then are the last figures written and the registration removed, so that no heartbeat can
follow the removal (see :meth:`Closing._last_words`).
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from ..features.control import LoopListener
from ..store import calls
from ..store.calls import Call, Op
from . import identity
from .attempt import Attempt, Reason
from .loop import EventLoop
from .state import Owner, WorkerState
from .tasks import LoopServing

__all__ = ["Closing"]

log = logging.getLogger(__name__)

T = TypeVar("T")

#: How long shutdown waits for the keeper's last round, and then for its cancel.
_KEEPER_END_S = 5.0
#: How long shutdown waits for its last words on the event loop (see ``Closing._leave_async``).
_LAST_WORDS_S = 30.0


class Closing:
    """The background parts of one queue's workers in this process, and their end."""

    def __init__(self, queue: Owner, state: WorkerState, loop: EventLoop) -> None:
        self.queue = queue
        self.state = state
        self.loop = loop
        #: Set when the keeper and the promoter are to end.
        self.ending = threading.Event()
        #: Set once :meth:`shutdown` has finished.
        self.closed = threading.Event()
        #: This process's control channel's listener, once started.
        self.control: LoopListener | None = None
        self._tasks: list[asyncio.Task[None]] = []  # keeper, promoter

    @property
    def started(self) -> bool:
        """Whether the keeper and the promoter were started (by the first ``process()``)."""
        return bool(self._tasks)

    # -- starting -------------------------------------------------------------------------
    def listener(self, channel: str, on_message: Callable[[dict[str, Any]], None]) -> None:
        """Start listening on the control channel (a task of the loop)."""
        loop = self.loop
        self.control = LoopListener(
            loop.client, channel, on_message, self.state.report, loop.submit
        )
        self.control.start()

    def forget_listener(self) -> None:
        """Stop the listener of a first ``process()`` call that failed."""
        if self.control is not None:
            self.control.close()
            self.control = None

    def start_task(self, coro: Coroutine[Any, Any, None]) -> None:
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

    # -- ending ---------------------------------------------------------------------------
    def shutdown(self, serving: LoopServing, timeout: float) -> None:
        """Stop claiming; let running handlers finish for ``timeout`` seconds; give back the
        jobs still running then (not counted as attempts); stop every thread."""
        state = self.state
        state.stopping.set()
        serving.stop()
        state.bell.ring(beat=True)  # tell of it: "stopping" in Queue.workers()
        with state.lock:
            held = list(state.held.values())
        for event in held:
            event.set()
        deadline = time.monotonic() + max(0.0, timeout)
        while True:
            alive = serving.alive()
            for slot in alive:
                if slot.blocked_on is not None:
                    self.unblock(slot.blocked_on)
            left = deadline - time.monotonic()
            if not alive or left <= 0:
                break
            serving.join(alive[0], min(left, 0.05))
        with state.lock:
            running = list(state.attempts.values())
        released = [a for a in running if state.end(a, Reason.RELEASED)]
        self._close(self.loop, released)
        self.closed.set()

    def unblock(self, client_id: int) -> None:
        """End the wait for work of the slot blocked on connection ``client_id``."""
        self.state.safely(self.queue.client.client_unblock, client_id)

    def _close(self, loop: EventLoop, released: list[Attempt]) -> None:
        """The end of :meth:`shutdown`, on the loop's connection: the
        keeper's last round ends first, so no heartbeat can follow the registration's
        removal; then the jobs given back, the last figures, the removal; then the loop
        closes (the promoter's task is cancelled with it)."""
        self.ending.set()
        self.state.bell.ring()
        if self.control is not None:
            self.control.close()
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
        ops.append(identity.leaving(keys, state.id, state.instance, state.lease_ms))
        return ops


def _one(call: Call[T]) -> Op[T]:
    """One script call, as an operation."""
    reply: T = yield call
    return reply
