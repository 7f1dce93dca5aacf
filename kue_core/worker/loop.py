"""The worker process's event loop: one thread running one asyncio loop, which owns the
process's asyncio connection to Redis (:class:`kue_core.store.aio_transport.AsyncTransport`,
every call of it on one pipelined connection) and the thread pool its ``def`` handlers run in.

The slots are tasks on this loop (:mod:`kue_core.worker.tasks`): their claims and reports go
out on the one connection, those made while others are on their way together in one write,
and ``async def`` handlers are awaited on the loop itself, never crossing to another thread.
The keeper, the promotion timer and the control listener are its tasks too
(:mod:`kue_core.worker.keeper`); other threads (shutdown, say) hand it work with :meth:`submit`.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import contextlib
import contextvars
import threading
from collections.abc import Callable, Coroutine
from queue import SimpleQueue
from typing import Any, TypeVar

import redis.asyncio

from .. import connection
from ..base.errors import InvalidJob
from ..store.aio_transport import AsyncTransport
from .state import Owner

T = TypeVar("T")

#: The most threads the ``def`` handlers' pool may have: it makes one only when a job is
#: handed to it and none is free, so it holds as many as the slots running ``def`` handlers at
#: once, and those whose handler outlived its attempt (``defaults.ABANDONED_THREADS``).
_POOL_BOUND = 4096


class Handoff:
    """The threads ``def`` handlers run in, for the loop: :meth:`run` hands a call to one and
    gives back a future of the loop's. A thread that finishes a call wakes the loop only if
    no other has since the loop last looked, so many calls ending at once cost one wake-up
    (``ThreadPoolExecutor`` with ``run_in_executor`` costs two futures chained and a wake-up
    a call: a third of a worker's CPU per job with 16 slots of no-op handlers). A thread is
    made when a call comes and none is free; threads stay for the next calls."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._calls: SimpleQueue[Any] = SimpleQueue()
        self._free = threading.Semaphore(0)  # released by a thread as it waits for a call
        self._threads: list[threading.Thread] = []
        self._ended: collections.deque[tuple[asyncio.Future[Any], bool, Any]] = collections.deque()
        self._lock = threading.Lock()
        self._told = False  # the loop has been woken for the calls ended since it looked

    def run(self, fn: Callable[..., T], *args: Any) -> asyncio.Future[T]:
        """Call ``fn(*args)`` in a thread, in the caller's context (a trace's span, say)."""
        future: asyncio.Future[T] = self._loop.create_future()
        self._calls.put((future, contextvars.copy_context(), fn, args))
        if not self._free.acquire(blocking=False):
            name = f"kue-run-{len(self._threads) + 1}"
            thread = threading.Thread(target=self._serve, name=name, daemon=True)
            self._threads.append(thread)
            thread.start()
        return future

    def close(self) -> None:
        for _ in self._threads:
            self._calls.put(None)

    def _serve(self) -> None:
        while True:
            call = self._calls.get()
            if call is None:
                return
            future, context, fn, args = call
            try:
                ended = (future, True, context.run(fn, *args))
            except BaseException as e:
                ended = (future, False, e)
            self._ended.append(ended)
            with self._lock:
                tell, self._told = not self._told, True
            if tell:
                # A handler left running past shutdown ends after the loop closed: nobody
                # waits for its outcome any more.
                with contextlib.suppress(RuntimeError):
                    self._loop.call_soon_threadsafe(self._deliver)
            self._free.release()

    def _deliver(self) -> None:
        """On the loop: the calls ended since it last looked, to their futures."""
        with self._lock:
            self._told = False
        while self._ended:
            future, ok, value = self._ended.popleft()
            if future.cancelled():
                continue
            if ok:
                future.set_result(value)
            else:
                future.set_exception(value)


class EventLoop:
    """The event loop of the workers of one queue in this process (see the module doc)."""

    def __init__(self, queue: Owner) -> None:
        client = connection.async_twin(queue.client, queue.prefix)
        if client is None:
            raise InvalidJob(
                'runtime="loop" needs a client made from a URL, the embedded Redis, or a '
                "redis.Redis on a plain connection pool; this queue's client is none of them"
            )
        self.client: redis.asyncio.Redis = client
        self.transport = AsyncTransport(client, queue.keys, queue.scripts.replicas)
        self.loop = asyncio.new_event_loop()
        #: Where ``def`` handlers (and the calls that block: a child process's run) go.
        self.pool = concurrent.futures.ThreadPoolExecutor(_POOL_BOUND, thread_name_prefix="kue-run")
        self.loop.set_default_executor(self.pool)
        #: Where the ``def`` handlers run.
        self.handoff = Handoff(self.loop)
        self._thread = threading.Thread(target=self._run, name="kue-async", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Run ``coro`` on the loop, from any thread."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def soon(self, fn: Any, *args: Any) -> None:
        """Call ``fn(*args)`` on the loop, from any thread."""
        self.loop.call_soon_threadsafe(fn, *args)

    def close(self, timeout: float = 5.0) -> None:
        """Close the connection, stop the loop and its thread; the pool's threads still
        running a handler left behind finish on their own."""
        if not self.loop.is_running():
            return
        with contextlib.suppress(Exception):  # a connection that cannot close is dropped
            self.submit(self._close()).result(timeout)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout)
        if not self.loop.is_running():
            self.loop.close()
        self.pool.shutdown(wait=False, cancel_futures=True)
        self.handoff.close()

    async def _close(self) -> None:
        for task in asyncio.all_tasks():
            if task is not asyncio.current_task():
                task.cancel()
        await self.transport.close()
        await self.client.aclose()
