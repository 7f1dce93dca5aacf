"""The state of the workers of one queue in this process, shared by their threads: its slots
and running attempts, the flags that stop them, the figures they gather, and what every thread
reports with. The threads are a slot's (:class:`kue_core.worker.serving.Serving`) and the
keeper's (:class:`kue_core.worker.keeper.Keeper`); :class:`kue_core.worker.workers.Workers`
makes one :class:`WorkerState`, hands it to both, and starts and stops them.

Each attribute of :class:`WorkerState` that a thread changes after the start changes under
:attr:`WorkerState.lock`, except the events, the keeper's :class:`Bell` and the figures
(:class:`~kue_core.features.timings.Recorder` and :class:`~kue_core.features.tally.Tally` are
thread-safe)."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import redis

from .. import defaults
from ..base.retry import Repeats
from ..features.tally import Tally
from ..features.timings import Recorder
from ..store import calls
from ..store.calls import Call, Holder, Lease
from . import isolation, promoter
from . import middleware as mw
from .attempt import Attempt, Reason
from .slots import Slot

if TYPE_CHECKING:
    from ..store.events import EventBus

log = logging.getLogger(__name__)

#: How many attempts ended by hand before they began a process remembers (see
#: ``WorkerState.ended_early``): more than a process has claimed ahead at once.
_ENDED_EARLY = 256


class Owner(isolation.Owner, promoter.Owner, Protocol):
    """What the worker side uses of its ``Queue``."""

    events: EventBus
    version: str
    #: How the workers run their slots: "thread" or "loop" (see kue_core.worker.loop).
    runtime: str
    #: Set once the workers stopped on another process's request (``stop_worker``).
    stopped_remotely: threading.Event

    @property
    def worker_id(self) -> str: ...
    @property
    def middleware(self) -> tuple[mw.Middleware, ...]: ...
    def paused(self) -> list[str]: ...
    def sweep_payloads(self, batch: int = ...) -> int: ...
    def shutdown(self, timeout: float = ...) -> None: ...


class Bell:
    """How the other threads and tasks wake the keeper, a task of the worker's event loop,
    before its next due time: to look now at a new ttl, a stuck slot or the end
    (:meth:`ring`), and to heartbeat now as well, because what this process tells of itself
    changed (``ring(beat=True)``). The keeper waits with :meth:`wait_async`, on the loop given
    to :meth:`on`; a ring comes from any thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()  # a ring never lost between a look and its reset
        self._beat = True  # register at once
        self._loop: asyncio.AbstractEventLoop | None = None
        self._woken = asyncio.Event()  # the loop's, once :meth:`on` gave it one

    def on(self, loop: asyncio.AbstractEventLoop) -> None:
        """Let the keeper on ``loop`` wait for the rings (:meth:`wait_async`)."""
        self._loop = loop

    def ring(self, beat: bool = False) -> None:
        if beat:
            with self._lock:
                self._beat = True
        loop = self._loop
        if loop is not None:
            if _running() is loop:
                self._woken.set()
            else:  # a handler's thread may ring after the loop closed: nobody waits then
                with contextlib.suppress(RuntimeError):
                    loop.call_soon_threadsafe(self._woken.set)

    def clear(self) -> None:
        """The keeper's, as it begins a round: a ring from now on wakes it again."""
        if self._loop is not None and _running() is self._loop:
            self._woken.clear()

    async def wait_async(self, timeout: float) -> None:
        """The keeper's, between two rounds: until a ring, or ``timeout`` seconds."""
        if self._woken.is_set():
            return
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                await self._woken.wait()

    def beat_asked(self) -> bool:
        """The keeper's: whether a heartbeat was asked for since it last looked (and the
        request is taken)."""
        with self._lock:
            asked, self._beat = self._beat, False
        return asked


def _running() -> asyncio.AbstractEventLoop | None:
    """The event loop running in this thread, if any."""
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


class WorkerState:
    """What the workers of one queue hold (see the module docstring)."""

    def __init__(self, queue: Owner, lease_ms: int, stall_limit: int) -> None:
        #: The queue served, as far as the worker side uses it.
        self.queue = queue
        self.scripts = queue.scripts
        self.lease_ms = lease_ms
        self.stall_limit = stall_limit
        self.id = queue.worker_id
        #: Tells this process from another with the same id (see kue_core.worker.identity).
        self.instance = uuid.uuid4().hex
        self.started_at = int(time.time() * 1000)
        #: Guards the slots, the attempts, the threads left behind, the types paused here
        #: and the retries followed.
        self.lock = threading.Lock()
        #: The slots of every ``process()`` call, in order.
        self.slots: list[Slot] = []
        #: The running attempts, by job id and token: a job cancelled or moved by hand may be
        #: claimed again by another slot while its first attempt is still winding down.
        self.attempts: dict[tuple[int, str], Attempt] = {}
        #: Threads whose handler outlived its attempt, still running.
        self.abandoned = 0
        #: Attempts ended by hand (cancelled, moved) before they began here, a job claimed
        #: ahead (see kue_core.worker.tasks) say: then not run. The latest ``_ENDED_EARLY``.
        self.ended_early: collections.OrderedDict[tuple[int, str], None] = collections.OrderedDict()
        #: Set once the workers shut down: no more claims.
        self.stopping = threading.Event()
        #: The types paused in this process only: each event is set on resume.
        self.held: dict[str, threading.Event] = {}
        #: The jobs whose attempt this process failed with a retry possible, noted before
        #: the report: a burst waits for their retries (see kue_core.worker.burst). Job id ->
        #: the number of the note, so that a look that began before a later note keeps it.
        self.retrying: dict[int, int] = {}
        #: How many notes :meth:`may_retry` took: a look at the work left compares it.
        self.notes = 0
        #: Wait and run figures, added to Redis with each heartbeat.
        self.timings = Recorder()
        #: Completions not yet in the counters, added every TALLY_FLUSH.
        self.tally = Tally()
        #: Wakes the keeper.
        self.bell = Bell()
        self._repeats = Repeats()  # the Redis errors logged, counted when they repeat
        #: When a call last failed for want of Redis (monotonic), until the keeper has looked
        #: for the jobs a lost reply left with this process (see kue_core.worker.strays).
        self.doubted: float | None = None
        self._stop_asked = False  # a stop request came, or another process took the id

    def end_early(self, job_id: int, token: str) -> None:
        """An attempt not running here was ended by hand: see ``ended_early``."""
        with self.lock:
            self.ended_early[job_id, token] = None
            if len(self.ended_early) > _ENDED_EARLY:
                self.ended_early.popitem(last=False)

    def ended_before(self, job_id: int, fields: dict[str, str]) -> bool:
        """Whether a claimed job's attempt was ended by hand before it began here: then it
        is not run (see ``ended_early``)."""
        if not self.ended_early:
            return False
        with self.lock:
            ended = self.ended_early.pop((job_id, fields.get("lease", "")), False) is None
        if ended:
            log.info("job %d: ended by hand before it began here: not run", job_id)
        return ended

    def info(self, adding: Sequence[Slot] = ()) -> dict[str, Any]:
        """What this process tells others about itself (see ``Queue.workers()``), with the
        slots about to be ``adding``."""
        types: dict[str, int] = {}
        with self.lock:
            for slot in [*self.slots, *adding]:
                for each in slot.types:
                    types[each] = types.get(each, 0) + 1
            abandoned = self.abandoned
        return {
            "id": self.id,
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "version": self.queue.version,
            "types": types,
            "started_at": self.started_at,
            "lease_ms": self.lease_ms,
            "runtime": self.queue.runtime,
            "abandoned_threads": abandoned,
            "paused": sorted(self.held),
            "stopping": self.stopping.is_set(),
        }

    def beat(self, held: Sequence[tuple[int, str]]) -> list[Lease] | Holder:
        """Register this process and renew its lease (``heartbeat.lua``), checking ``held``
        (job id, token): the pairs lost, or the ``Holder`` that took the worker id over."""
        return self.scripts.call(self.beat_call(held))

    def beat_call(self, held: Sequence[tuple[int, str]]) -> Call[list[Lease] | Holder]:
        """The call :meth:`beat` makes, for a caller on the event loop."""
        info = json.dumps(self.info(), separators=(",", ":"))
        return calls.heartbeat(
            self.queue.keys, self.id, self.lease_ms, info, held, instance=self.instance
        )

    def end(self, attempt: Attempt, reason: Reason) -> bool:
        """End ``attempt`` (see :meth:`Attempt.end`) and forget it; True for the caller that
        ended it, who alone reports it."""
        if not attempt.end(reason):
            return False
        with self.lock:
            self.attempts.pop((attempt.job_id, attempt.token), None)
        return True

    def may_retry(self, job_id: int) -> None:
        """Note that ``job_id``'s attempt failed here and the job may be retried later."""
        with self.lock:
            self.notes += 1
            self.retrying.pop(job_id, None)  # last in the order: the oldest are forgotten
            self.retrying[job_id] = self.notes
            if len(self.retrying) > defaults.BURST_FOLLOW:
                del self.retrying[next(iter(self.retrying))]

    def stop(self, timeout: float, why: str, level: int = logging.INFO) -> None:
        """Shut down, once, in a thread of its own, as on SIGTERM: on a stop request, or when
        another process took the id over (``why`` says which, in the log); then tell
        ``queue.stopped_remotely``. Asked again, it does nothing."""
        with self.lock:  # asked from the control listener or the keeper
            if self._stop_asked:
                return
            self._stop_asked = True
        log.log(level, why)
        threading.Thread(target=self._stop, args=(timeout,), name="kue-stop").start()

    def _stop(self, timeout: float) -> None:
        self.queue.shutdown(timeout)
        self.queue.stopped_remotely.set()

    # -- reporting ------------------------------------------------------------------------
    def safely(self, fn: Callable[..., Any], *args: Any) -> None:
        """``fn(*args)``, a Redis error reported rather than raised."""
        try:
            fn(*args)
        except redis.RedisError as e:
            self.report(e)

    def report(self, error: Exception) -> None:
        """Log an error of any thread (a Redis one once, then with its count) and send it to
        the queue's error listeners."""
        if isinstance(error, redis.RedisError):
            # Every thread retries on its own: during an outage, a line now and then with
            # the count (kue_core.base.retry.Repeats), not one a try.
            if isinstance(error, redis.ConnectionError | redis.TimeoutError):
                self.doubted = time.monotonic()
                line = self._repeats.note(f"Redis unreachable ({error}); retrying", "unreachable")
            else:
                line = self._repeats.note(str(error))
            if line is not None:
                log.warning("worker %s: %s", self.id, line)
        else:
            log.error("worker %s: unexpected error", self.id, exc_info=error)
        self.queue.events.report(error)

    def answered(self) -> None:
        """After an outage, once Redis answers the keeper again: one line that says so, at
        the level of the lines that said it was unreachable, so a log does not end on them."""
        line = self._repeats.over("unreachable", "Redis answers again")
        if line is not None:
            log.warning("worker %s: %s", self.id, line)
