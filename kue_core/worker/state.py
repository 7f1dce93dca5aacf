"""The state of the workers of one queue in this process, shared by their threads: its slots
and running attempts, the events that stop them, and what every thread reports with. The
threads are :mod:`kue_core.worker.serving` (a slot's loop) and :mod:`kue_core.worker.keeper`;
:class:`kue_core.worker.workers.Workers` starts and stops them."""

from __future__ import annotations

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
from ..features.control import Listener
from ..features.tally import Tally
from ..features.timings import Recorder
from ..jobs import backoff as backoff_policy
from ..jobs.job import Job
from ..store.claims import Holder
from . import identity, isolation, promoter
from . import middleware as mw
from .attempt import Attempt, Reason
from .slots import Runner, Slot

if TYPE_CHECKING:
    from ..store.events import EventBus

log = logging.getLogger(__name__)


class Owner(isolation.Owner, promoter.Owner, Protocol):
    """What the worker side uses of its ``Queue``."""

    events: EventBus
    version: str
    #: Set once the workers stopped on another process's request (``stop_worker``).
    stopped_remotely: threading.Event

    @property
    def worker_id(self) -> str: ...
    @property
    def middleware(self) -> tuple[mw.Middleware, ...]: ...
    def paused(self) -> list[str]: ...
    def shutdown(self, timeout: float = ...) -> None: ...


class WorkerState:
    """What the workers of one queue hold (see the module docstring)."""

    def __init__(self, queue: Owner, lease_ms: int, stall_limit: int) -> None:
        self.queue = queue
        self.scripts = queue.scripts
        self.lease_ms = lease_ms
        self.stall_limit = stall_limit
        self.id = queue.worker_id
        #: Tells this process from another with the same id (see kue_core.worker.identity).
        self.instance = uuid.uuid4().hex
        self.started_at = int(time.time() * 1000)
        self._lock = threading.Lock()
        self._slots: list[Slot] = []
        # The running attempts, by job id and token: a job cancelled or moved by hand may be
        # claimed again by another slot while its first attempt is still winding down.
        self._attempts: dict[tuple[int, str], Attempt] = {}
        self._abandoned = 0  # threads whose handler outlived its attempt, still running
        self._stopping = threading.Event()  # no more claims
        self._closed = threading.Event()  # keeper and promoter end
        #: Set once :meth:`shutdown` has finished.
        self.closed = threading.Event()
        self._tick = threading.Event()  # wakes the keeper early
        self._runner = Runner(self._tick.set)
        self._timings = Recorder()  # wait and run figures, added to Redis with each heartbeat
        self._tally = Tally()  # completions not yet in the counters, added every TALLY_FLUSH
        self._beat_now = True  # register at once (set again when types are added)
        self._threads: list[threading.Thread] = []  # keeper, promoter
        self._repeats = Repeats()  # the Redis errors logged, counted when they repeat
        self._control: Listener | None = None  # this process's control channel
        self._stop_asked = False  # a stop request came on it
        self._held: dict[str, threading.Event] = {}  # types paused here: set on resume
        #: The jobs whose attempt this process failed with a retry possible, noted before
        #: the report: a burst waits for their retries (see kue_core.worker.burst). Job id ->
        #: the number of the note, so that a look that began before a later note keeps it.
        self.retrying: dict[int, int] = {}
        self._notes = 0

    def info(self, adding: Sequence[Slot] = ()) -> dict[str, Any]:
        """What this process tells others about itself (see ``Queue.workers()``), with the
        slots about to be ``adding``."""
        types: dict[str, int] = {}
        with self._lock:
            for slot in [*self._slots, *adding]:
                for each in slot.types:
                    types[each] = types.get(each, 0) + 1
            abandoned = self._abandoned
        return {
            "id": self.id,
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "version": self.queue.version,
            "types": types,
            "started_at": self.started_at,
            "lease_ms": self.lease_ms,
            "abandoned_threads": abandoned,
            "paused": sorted(self._held),
            "stopping": self._stopping.is_set(),
        }

    def _beat(self, held: Sequence[tuple[int, str]]) -> list[tuple[int, str]] | Holder:
        """Register this process (``heartbeat.lua``) and renew the leases of ``held`` (job id,
        token): the pairs whose lease is lost, or the ``Holder`` that took the worker id over."""
        info = json.dumps(self.info(), separators=(",", ":"))
        return self.scripts.heartbeat(self.id, self.lease_ms, info, held, instance=self.instance)

    def _end(self, attempt: Attempt, reason: Reason) -> bool:
        """End ``attempt`` (see :meth:`Attempt.end`) and forget it; True for the caller that
        ended it, who alone reports it."""
        if not attempt.end(reason):
            return False
        with self._lock:
            self._attempts.pop((attempt.job_id, attempt.token), None)
        return True

    def _stop(self, timeout: float) -> None:
        """Shut down on a stop request, as on SIGTERM, or when another process took the id
        over; then tell ``queue.stopped_remotely``."""
        self.queue.shutdown(timeout)
        self.queue.stopped_remotely.set()

    def _may_retry(self, job_id: int) -> None:
        """Note that ``job_id``'s attempt failed here and the job may be retried later."""
        with self._lock:
            self._notes += 1
            self.retrying.pop(job_id, None)  # last in the order: the oldest are forgotten
            self.retrying[job_id] = self._notes
            if len(self.retrying) > defaults.BURST_FOLLOW:
                del self.retrying[next(iter(self.retrying))]

    @staticmethod
    def _retry_delay(job: Job, no_retry: bool) -> int:
        if no_retry:
            return -1
        delay = backoff_policy.retry_delay(job.backoff(), job.attempts_made + 1, job.delay())
        return delay or 0

    def _serve(self, slot: Slot) -> None:
        """Start a thread serving ``slot`` (see :class:`kue_core.worker.serving.Serving`)."""
        raise NotImplementedError

    # -- helpers --------------------------------------------------------------------------
    def _start_thread(self, target: Callable[[], Any], name: str) -> None:
        thread = threading.Thread(target=target, name=name, daemon=True)
        self._threads.append(thread)
        thread.start()

    def _wake_slots(self, job_type: str) -> None:
        """End the waits for work of the idle slots of ``job_type``."""
        with self._lock:
            waiting = [s.blocked_on for s in self._slots if job_type in s.types]
        for client_id in waiting:
            if client_id is not None:
                self._unblock(client_id)

    def _unblock(self, client_id: int) -> None:
        self._safely(self.queue.client.client_unblock, client_id)

    def _deregister(self) -> None:
        identity.leave(self.scripts, self.id, self.instance, self.lease_ms)

    def _safely(self, fn: Callable[..., Any], *args: Any) -> None:
        try:
            fn(*args)
        except redis.RedisError as e:
            self._report(e)

    def _report(self, error: Exception) -> None:
        if isinstance(error, redis.RedisError):
            # Every thread retries on its own: during an outage, a line now and then with
            # the count (kue_core.base.retry.Repeats), not one a try.
            if isinstance(error, redis.ConnectionError | redis.TimeoutError):
                line = self._repeats.note(f"Redis unreachable ({error}); retrying", "unreachable")
            else:
                line = self._repeats.note(str(error))
            if line is not None:
                log.warning("worker %s: %s", self.id, line)
        else:
            log.error("worker %s: unexpected error", self.id, exc_info=error)
        self.queue.events.report(error)

    def _answered(self) -> None:
        """After an outage, once Redis answers the keeper again: one line that says so, at
        the level of the lines that said it was unreachable, so a log does not end on them."""
        line = self._repeats.over("unreachable", "Redis answers again")
        if line is not None:
            log.warning("worker %s: %s", self.id, line)
