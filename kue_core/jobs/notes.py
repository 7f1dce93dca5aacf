"""Where a job's progress reports and log lines go while its ``async def`` handler runs on a
worker's event loop.

A blocking call there would hold up the whole process for a round trip: every other slot, the
heartbeats and the claims. So ``job.progress()`` and ``job.log()``, called on the loop, hand
their script call to the loop's own connection and return at once; ``await job.aprogress()``
and ``await job.alog()`` hand it over the same way and wait for Redis's reply.

A ``def`` handler's calls, made in its own thread, go on the loop's connection too, and wait
for their reply there (:meth:`Notes.wait_from_thread`): the process has one way into Redis.

The writes go out in the order they were made: each is a task of the loop, and the loop starts
its tasks in order, each writing to the one pipelined connection. (A write whose script Redis
has to load first goes out again once loaded, after those made meanwhile; an awaited write
waits for the replies of those made before it, so that it lands after them whatever.) The
worker waits for them (:meth:`Notes.sent`) before it reports how the attempt ended, so that
what a handler wrote before it returned is in Redis before its job completes or fails. A
write that fails and that nobody awaits is reported as the worker's other errors are (its
log, and the queue's ``error`` listeners); an awaited one raises in the handler.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Callable
from typing import Any

from .. import defaults
from ..base.errors import ConnectionFailed, JobNotFound, Stopped
from ..store.aio_transport import AsyncTransport
from ..store.calls import Call


class Notes:
    """The progress reports and log lines of one attempt on a worker's event loop (see the
    module doc). ``report`` is told of each write that failed with nobody awaiting it."""

    __slots__ = ("_loop", "_parts", "_pending", "_redis", "_report")

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        transport: AsyncTransport,
        report: Callable[[Exception], Any],
    ) -> None:
        self._loop = loop
        self._redis = transport
        self._report = report
        self._pending: set[asyncio.Task[Any]] = set()
        # Stream parts written while the last call of parts is away (None: none is away).
        self._parts: list[str] | None = None

    def here(self) -> bool:
        """Whether the caller runs on the loop (where a blocking call would hold it up)."""
        try:
            return asyncio.get_running_loop() is self._loop
        except RuntimeError:  # a thread with no loop: a def handler's, say
            return False

    def send(self, call: Call[Any]) -> None:
        """Write ``call`` without waiting (on the loop); a failure goes to ``report``."""
        task = self._loop.create_task(self._redis.call(call))
        self._pending.add(task)
        task.add_done_callback(self._sent)

    def send_part(self, build: Callable[[list[str]], Call[Any]], text: str) -> None:
        """Write a stream part without waiting (on the loop): at once when no call of parts is
        away, else with the others written meanwhile, in one call (``build(texts)``) once it is
        back. Parts keep their order; a failure goes to ``report``."""
        if self._parts is not None:
            self._parts.append(text)
        else:
            self._send_parts(build, [text])

    def _send_parts(self, build: Callable[[list[str]], Call[Any]], texts: list[str]) -> None:
        # A call of parts is away: those written meanwhile wait for it (the parts past one
        # call's share wait for the next).
        most = defaults.STREAM_PARTS_PER_CALL
        self._parts = texts[most:]
        task = self._loop.create_task(self._redis.call(build(texts[:most])))
        self._pending.add(task)

        def back(done: asyncio.Task[Any]) -> None:
            self._sent(done)
            waiting, self._parts = self._parts, None
            over = not done.cancelled() and isinstance(done.exception(), Stopped | JobNotFound)
            if waiting and not over:  # (the attempt is over, the job gone: refused likewise)
                self._send_parts(build, waiting)

        task.add_done_callback(back)

    async def wait(self, call: Call[Any]) -> Any:
        """Write ``call`` once the writes handed over before it have their replies, and wait
        for its own; its error raises here. A caller cancelled meanwhile (its attempt
        stopped) leaves the write to finish."""
        while self._pending:
            # Those went out first, but one whose script Redis had to load first went out
            # again after: this one lands after it all the same. (Parts waiting for a call
            # of parts to come back go out as it does: waited for too.)
            await asyncio.wait(list(self._pending))
        task = self._loop.create_task(self._redis.call(call))
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)
        return await asyncio.shield(task)

    def wait_from_thread(self, call: Call[Any]) -> Any:
        """Write ``call`` from another thread (a ``def`` handler's) on the loop's connection
        and wait for its reply, which raises here as it would on the blocking client. A loop
        that has stopped (the workers shut down meanwhile) is a ``ConnectionFailed``."""
        if self._loop.is_closed() or not self._loop.is_running():
            raise ConnectionFailed("the worker's event loop has stopped")
        future = asyncio.run_coroutine_threadsafe(self._redis.call(call), self._loop)
        try:
            return future.result(defaults.SOCKET_TIMEOUT)
        except (concurrent.futures.CancelledError, concurrent.futures.TimeoutError):
            future.cancel()
            raise ConnectionFailed("the worker's event loop stopped before the write") from None

    @property
    def pending(self) -> bool:
        """Whether some write handed over has not been answered yet."""
        return bool(self._pending)

    async def sent(self) -> None:
        """Wait until every write handed over so far has its reply (failures reported)."""
        while self._pending:
            await asyncio.wait(list(self._pending))

    def _sent(self, task: asyncio.Task[Any]) -> None:
        self._pending.discard(task)
        if task.cancelled():  # the loop is closing: the attempt's job comes back by its lease
            return
        error = task.exception()
        if isinstance(error, Exception):
            self._report(error)
