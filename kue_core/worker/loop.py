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
import itertools
import threading
import time
from collections.abc import Callable, Coroutine
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


#: How long a call handed to the ``def`` handlers' threads may wait before another thread is
#: woken for it: the handler before it in the same thread blocks (I/O, a sleep), so it runs
#: beside it rather than after it.
STALE_S = 0.002


class Handoff:
    """The threads ``def`` handlers run in, for the loop: :meth:`run` hands a call over and
    gives back a future of the loop's.

    Waking a thread is what a call costs here (two switches of the interpreter's lock), so
    the calls handed over at once are run one after another by one woken thread while they
    are quick, and a thread more is woken for each call that has waited ``STALE_S`` (the
    one before it blocks): quick handlers cost one wake-up for many, slow ones run side by
    side as in a pool of the slots' size. A thread that finishes calls wakes the loop only if
    no other has since the loop last looked. Threads are made when none is free, and stay."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._lock = threading.Lock()
        #: Calls not yet taken by a thread: (handed at, future, context, fn, args).
        self._calls: collections.deque[tuple[float, asyncio.Future[Any], Any, Any, Any]] = (
            collections.deque()
        )
        self._idle: list[threading.Event] = []  # threads waiting to be woken
        self._awake = 0  # threads taking calls, or about to
        self._threads: list[threading.Thread] = []
        self._closing = False
        self._watching = False  # a look at the calls waiting is due on the loop
        #: The first calls waiting that had a thread woken for them (by a look, which wakes
        #: no other for them): threads take calls first in, first out.
        self._covered = 0
        self._ended: collections.deque[tuple[asyncio.Future[Any], bool, Any]] = collections.deque()
        self._told = False  # the loop has been woken for the calls ended since it looked

    def run(self, fn: Callable[..., T], *args: Any) -> asyncio.Future[T]:
        """Call ``fn(*args)`` in a thread, in the caller's context (a trace's span, say)."""
        future: asyncio.Future[T] = self._loop.create_future()
        call = (time.monotonic(), future, contextvars.copy_context(), fn, args)
        with self._lock:
            self._calls.append(call)
            if not self._awake:
                self._wake()
        if not self._watching:
            self._watching = True
            self._loop.call_later(STALE_S, self._watch)
        return future

    def close(self) -> None:
        with self._lock:
            self._closing = True
            idle, self._idle = self._idle, []
        for event in idle:
            event.set()

    def _wake(self) -> None:
        """One thread more takes calls (under the lock)."""
        self._awake += 1
        if self._idle:
            self._idle.pop().set()
            return
        name = f"kue-run-{len(self._threads) + 1}"
        thread = threading.Thread(target=self._serve, name=name, daemon=True)
        self._threads.append(thread)
        thread.start()

    def _watch(self) -> None:
        """On the loop: a thread more for each call that has waited too long; the next look
        when the oldest call with no thread woken for it will have, none if there is none
        (the next :meth:`run` makes one)."""
        with self._lock:
            now = time.monotonic()
            stale = now - STALE_S
            nxt = None
            for handed_at, *_ in itertools.islice(self._calls, self._covered, None):
                if handed_at > stale:
                    nxt = handed_at + STALE_S - now
                    break
                self._wake()
                self._covered += 1
        if nxt is not None:
            self._loop.call_later(nxt, self._watch)
        else:
            self._watching = False

    def _serve(self) -> None:
        wake = threading.Event()
        while True:
            with self._lock:
                call = self._calls.popleft() if self._calls else None
                if call is not None and self._covered:
                    self._covered -= 1
                if call is None:
                    if self._closing:
                        return
                    self._awake -= 1
                    wake.clear()
                    self._idle.append(wake)
            if call is None:
                wake.wait()
                continue
            _, future, context, fn, args = call
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

    def here(self) -> bool:
        """Whether the caller runs on the loop's thread."""
        return threading.current_thread() is self._thread

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
        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in tasks:
            task.cancel()
        if tasks:  # their cleanup (a subscription's close) runs while the loop still does
            await asyncio.wait(tasks, timeout=1.0)
        await self.transport.close()
        await self.client.aclose()
