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
import select
import selectors
import threading
import time
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

import redis.asyncio

from .. import connection
from ..base.errors import InvalidJob
from ..store.aio_transport import AsyncTransport
from .cpus import Cpus
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

#: How long the loop may wait for the ``def`` handlers' calls handed over to end instead of
#: sleeping until any event (see :meth:`Handoff.before_sleep`).
PARK_S = 0.005

#: Whether the loop's selector is epoll's (Linux), whose waits count whole milliseconds, and
#: the descriptors ``select`` takes (see _Selector).
_EPOLL = selectors.DefaultSelector is getattr(selectors, "EpollSelector", None)
_FD_SETSIZE = 1024

#: How long a thread's wake-up for a call handed over may wait for the loop to be about to
#: sleep, while the loop has other work ready (see :meth:`Handoff.before_sleep`).
DEFER_S = 0.0002


class _Selector(selectors.DefaultSelector):
    """The loop's selector: before each look for events it lets the ``def`` handlers'
    threads hand over what ended (see :meth:`Handoff.before_sleep`); a look that finds
    something ended does not wait.

    A wait until a timer (the promoter's, say) is kept to the microsecond: ``epoll_wait``
    counts whole milliseconds and rounds a wait up, so a timer fired 0.5 ms late on average;
    ``select`` on the epoll descriptor itself (readable once any descriptor in it is) waits
    the time asked, and a look with no wait follows. (Not for a descriptor ``select`` cannot
    take: one past ``FD_SETSIZE``.)"""

    handoff: Handoff | None = None

    def select(self, timeout: float | None = None) -> Any:
        handoff = self.handoff
        if handoff is not None and handoff.before_sleep(timeout):
            timeout = 0
        try:
            if _EPOLL and timeout is not None and timeout > 0 and self.fileno() < _FD_SETSIZE:
                select.select([self.fileno()], [], [], timeout)
                timeout = 0
            return super().select(timeout)
        finally:
            if handoff is not None:
                handoff.sleeping = False


class _Sleeper:
    """A thread of :class:`Handoff` waiting to be woken, and the CPU it is kept on (-1: any)."""

    __slots__ = ("cpu", "event", "tid")

    def __init__(self) -> None:
        self.event = threading.Event()
        self.tid = threading.get_native_id()
        self.cpu = -1


class Handoff:
    """The threads ``def`` handlers run in, for the loop: :meth:`run` hands a call over and
    gives back a future of the loop's.

    Waking a thread is what a call costs here (two switches of the interpreter's lock), so
    the calls handed over at once are run one after another by one woken thread while they
    are quick, and a thread more is woken for each call that has waited ``STALE_S`` (the
    one before it blocks). Threads are made when none is free, and stay. A call that is not
    brief (its slot's last handler took longer than ``slots.BRIEF_S``) has a thread woken for it
    at once, and the loop does not wait for it.

    With the loop's selector (:class:`_Selector`) the two take turns: the thread is woken
    for the calls once the loop is about to sleep, the loop then waits for them (``PARK_S``
    at most) on a lock the thread lets go once it has run every call waiting, and a thread
    that ends a call while the loop is at work wakes nothing (the loop finds it before it
    next looks for events). The interpreter's lock then changes hands about once a batch of
    calls, where each thread took it from the other at every one of the loop's system calls:
    one slot, 10% less CPU a job; 16 slots of no-op handlers, 12,500 jobs/s before and about
    15,500 with turns (interleaved runs). The thread woken for a turn is woken on the loop's
    CPU (:mod:`kue_core.worker.cpus`), and may run anywhere again once it runs longer than the
    loop waits, or is woken for a call that is not brief."""

    def __init__(self, loop: asyncio.AbstractEventLoop, selector: _Selector | None = None) -> None:
        self._loop = loop
        self._lock = threading.Lock()
        if selector is not None:
            selector.handoff = self
        #: The loop sleeps, or is about to, looking for events (see _Selector).
        self.sleeping = False
        #: Turns: the loop waits for the calls (see before_sleep) on this lock, held but
        #: while a thread that ran them lets the loop go on.
        self._lend = selector is not None
        self._parked = threading.Lock()
        self._parked.acquire()
        self._is_parked = False
        self._running = 0  # calls handed over whose end the loop has not delivered
        #: When a thread's wake-up for calls handed over was put off (monotonic), or None.
        self._due: float | None = None
        #: Calls not yet taken by a thread: (handed at, future, context, fn, args, brief).
        self._calls: collections.deque[tuple[float, asyncio.Future[Any], Any, Any, Any, bool]] = (
            collections.deque()
        )
        self._idle: list[_Sleeper] = []  # threads waiting to be woken
        self._cpus = Cpus()
        #: The thread last woken for a turn, on the loop's CPU (see before_sleep).
        self._turn: _Sleeper | None = None
        self._awake = 0  # threads taking calls, or about to
        self._threads: list[threading.Thread] = []
        self._closing = False
        self._watching = False  # a look at the calls waiting is due on the loop
        #: The first calls waiting that had a thread woken for them (by a look, which wakes
        #: no other for them): threads take calls first in, first out.
        self._covered = 0
        #: Calls ended, for the loop to deliver: (future, ok, value or error, brief).
        self._ended: collections.deque[tuple[asyncio.Future[Any], bool, Any, bool]] = (
            collections.deque()
        )
        self._told = False  # the loop has been woken for the calls ended since it looked

    def run(self, fn: Callable[..., T], *args: Any, brief: bool = True) -> asyncio.Future[T]:
        """Call ``fn(*args)`` in a thread, in the caller's context (a trace's span, say); one
        not ``brief`` (its last call blocked) has a thread woken for it at once, and the
        loop does not wait for it."""
        future: asyncio.Future[T] = self._loop.create_future()
        call = (time.monotonic(), future, contextvars.copy_context(), fn, args, brief)
        with self._lock:
            self._calls.append(call)
            if not brief:
                self._wake()
            else:
                self._running += 1
            if brief and not self._awake:
                if not self._lend:
                    self._wake()
                elif self._due is None:
                    self._due = call[0]
        if not self._watching:
            self._watching = True
            self._loop.call_later(STALE_S, self._watch)
        return future

    def close(self) -> None:
        with self._lock:
            self._closing = True
            idle, self._idle = self._idle, []
        for sleeper in idle:
            sleeper.event.set()

    def _wake(self, turn: bool = False) -> None:
        """One thread more takes calls (under the lock): for the loop's ``turn``, on the
        loop's CPU."""
        self._awake += 1
        if self._idle:
            sleeper = self._idle.pop()
            if self._cpus.on:
                cpu = self._cpus.current() if turn else -1
                if sleeper.cpu != cpu and self._cpus.keep(sleeper.tid, cpu):
                    sleeper.cpu = cpu
                self._turn = sleeper if turn else None
            sleeper.event.set()
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
        me = _Sleeper()
        wake = me.event
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
                    self._idle.append(me)
            if call is None:
                wake.wait()
                continue
            _, future, context, fn, args, brief = call
            try:
                ended = (future, True, context.run(fn, *args), brief)
            except BaseException as e:
                ended = (future, False, e, brief)
            self._ended.append(ended)
            with self._lock:
                # A loop waiting for the calls is let go once this thread has run the brief
                # ones waiting (one not brief has a thread of its own, and may block).
                if self._is_parked and self._calls and self._calls[0][5]:
                    continue
                parked, self._is_parked = self._is_parked, False
                asleep = self.sleeping or not self._lend
                tell = not parked and asleep and not self._told
                self._told = self._told or tell
            if parked:
                self._parked.release()
            elif tell:
                # A handler left running past shutdown ends after the loop closed: nobody
                # waits for its outcome any more.
                with contextlib.suppress(RuntimeError):
                    self._loop.call_soon_threadsafe(self._deliver)

    def before_sleep(self, timeout: float | None) -> bool:
        """On the loop, before it looks for events for up to ``timeout`` seconds: the calls
        ended meanwhile to their futures (True: the loop then looks without waiting), or
        else the loop is marked asleep; with ``lend``, it first waits for its slot's call.
        A thread is woken for the calls handed over here, once the loop has run what it had
        ready (``DEFER_S`` at most), so that it does not wait for the loop to let go of the
        interpreter's lock (nor the loop for it) at each of the loop's system calls."""
        due = self._due
        if due is not None and (timeout != 0 or time.monotonic() - due >= DEFER_S):
            with self._lock:
                self._due = None
                if self._calls and not self._awake:
                    self._wake(turn=True)
        if self._lend and not self._ended and timeout != 0:
            with self._lock:
                idle = not self._ended
                park = idle and self._lend and self._running > 0
                self._is_parked = park
                self.sleeping = idle and not park
            if park:
                wait = PARK_S if timeout is None else min(timeout, PARK_S)
                if not self._parked.acquire(timeout=wait) and wait == PARK_S:
                    self._let_go()  # (not when a timer due sooner cut the wait short)
                with self._lock:
                    self._is_parked = False
                    self.sleeping = not self._ended
                self._parked.acquire(blocking=False)  # held again, whoever let it go
        if not self._ended:
            return False
        self._deliver()
        return True

    def _let_go(self) -> None:
        """The thread of the turn runs longer than the loop waits for it: it may run on any
        CPU again (a call that computes outside the interpreter's lock, say, beside the loop)."""
        turn, self._turn = self._turn, None
        if turn is not None and turn.cpu >= 0 and self._cpus.keep(turn.tid, -1):
            turn.cpu = -1

    def _deliver(self) -> None:
        """On the loop: the calls ended since it last looked, to their futures."""
        with self._lock:
            self._told = False
            self.sleeping = False
        while self._ended:
            future, ok, value, brief = self._ended.popleft()
            self._running -= brief
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
                "a worker needs a client made from a URL (a Sentinel or a cluster too: "
                "redis+sentinel://, redis+cluster://), the embedded Redis, or a redis.Redis on "
                "a plain or a blocking connection pool; this queue's client is none of them"
            )
        self.client: redis.asyncio.Redis = client
        self.transport = AsyncTransport(client, queue.keys, queue.scripts.replicas)
        selector = _Selector()
        self.loop: asyncio.AbstractEventLoop = asyncio.SelectorEventLoop(selector)
        #: Where ``def`` handlers (and the calls that block: a child process's run) go.
        self.pool = concurrent.futures.ThreadPoolExecutor(_POOL_BOUND, thread_name_prefix="kue-run")
        self.loop.set_default_executor(self.pool)
        #: Where the ``def`` handlers run.
        self.handoff = Handoff(self.loop, selector)
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
