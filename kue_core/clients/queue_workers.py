"""The worker side of a ``Queue``: ``process()`` hands handlers to this process's workers
(:class:`kue_core.worker.workers.Workers`, made at the first call), ``run()`` serves them until
a signal, ``shutdown()`` stops them; their middleware and worker id."""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Sequence
from typing import Any, Self, cast

import redis

from .. import defaults
from ..base import checks
from ..base.errors import InvalidJob, InvalidWorkerConfig
from ..features import pins
from ..worker import identity, signals
from ..worker import middleware as mw
from ..worker.slots import Handler
from ..worker.state import Owner
from ..worker.workers import Workers


class WorkerMethods:
    """Mixed into ``Queue``: its workers in this process."""

    runtime: str
    version: str
    lease_ms: int
    stall_limit: int
    stopped_remotely: threading.Event
    _worker_id: str
    _made_up_in: int | None
    _middleware: tuple[mw.Middleware, ...]
    _workers: Workers | None
    _workers_lock: threading.Lock
    _closing: Workers | None  # the last workers shut down

    def _set_up_workers(
        self,
        worker_id: str | None,
        version: str | None,
        lease_ms: int,
        stall_limit: int,
        runtime: str | None,
    ) -> None:
        """The worker side's settings, checked (``Queue``'s arguments of the same names); no
        worker is made before the first :meth:`process` (or local pause)."""
        runtime = runtime or os.environ.get(defaults.RUNTIME_ENV) or "loop"
        if runtime == "thread":
            raise InvalidJob(
                "runtime 'thread' was removed: every worker process runs its slots on one "
                "event loop, its def handlers in threads (see docs/deployment.md)"
            )
        if runtime not in defaults.RUNTIMES:
            raise InvalidJob(
                f"runtime must be one of {', '.join(defaults.RUNTIMES)}, got {runtime!r}"
            )
        #: How this process's workers run their slots (see kue_core.worker.loop): "loop".
        self.runtime = runtime
        #: The version this process's workers say they run (deploy markers in the history).
        self.version = identity.check_version(version)
        checks.integer(lease_ms, "lease_ms", 10)
        checks.integer(stall_limit, "stall_limit", 0)
        self._worker_id = (
            identity.generated_worker_id() if worker_id is None else pins.check_worker_id(worker_id)
        )
        self._made_up_in = os.getpid() if worker_id is None else None
        self.lease_ms = lease_ms
        self.stall_limit = stall_limit
        self._workers = None
        self._workers_lock = threading.Lock()
        self._closing = None
        self._middleware = ()
        #: Set once this process's workers have shut down on a remote request
        #: (``Queue.stop_worker`` from anywhere), or because another process took their worker
        #: id over while this one was silent past its lease: ``kue worker`` then exits.
        self.stopped_remotely = threading.Event()

    def _worker_side(self) -> Workers:
        """This process's workers, made at the first call."""
        with self._workers_lock:
            if self._workers is None:
                queue = cast(Owner, self)  # mixed into Queue: the workers are given the queue
                self._workers = Workers(queue, self.lease_ms, self.stall_limit)
            return self._workers

    def process(
        self,
        job_type: str | Sequence[str],
        n: int | Handler = 1,
        handler: Handler | None = None,
        *,
        isolation: str = "thread",
        reserve: str = "ordered",
    ) -> Self:
        """Run ``handler(job)`` on jobs of ``job_type``, ``n`` at a time, in the background.
        Given a list of types, the ``n`` slots serve them all, claiming in the order
        ``reserve`` says: ``ordered`` (the first type with a job waiting), ``round-robin`` or
        ``shuffled`` (see :mod:`kue_core.worker.reserve`).

        ``def`` handlers run in threads, ``async def`` ones on an event loop. The return value
        (JSON) is the job's result; an exception fails the attempt (``NoRetry``: for good).
        ``process(type, handler)`` means one at a time, as in Kue. With
        ``isolation="process"`` each of the ``n`` handlers runs in a child process of its own,
        which is killed when the job outlives its ttl (see :mod:`kue_core.worker.isolation`).
        """
        if handler is None and callable(n):
            handler, n = n, 1
        if handler is None or not isinstance(n, int):
            raise InvalidWorkerConfig("call process(type, n, handler) or process(type, handler)")
        self._worker_side().process(job_type, n, handler, isolation, reserve)
        return self

    def run(
        self,
        shutdown_timeout: float = defaults.SHUTDOWN_TIMEOUT,
        *,
        ready: Callable[[], Any] | None = None,
        burst: bool = False,
    ) -> str | None:
        """Serve the handlers given to :meth:`process` until SIGINT (Ctrl-C) or SIGTERM, then
        shut down as ``kue worker`` does: no more claims, running handlers get
        ``shutdown_timeout`` seconds, and the jobs still running then go back to the queue (a
        second signal ends the process at once). ``ready`` is called once the signals are
        caught (to say so: a line a supervisor waits for, a systemd notification); a signal
        before that meets Python's own handlers. Returns the signal's name, or None when the
        worker was stopped remotely (:meth:`kue_core.Queue.stop_worker`). From the main thread only.

        With ``burst=True``, return (None) as soon as no work is left for the types served:
        no job of theirs waiting, running (here or elsewhere), due, or waiting out the backoff
        of an attempt failed here; delayed jobs not yet due are not waited for (see
        :mod:`kue_core.worker.burst`). For tests and batch runs."""
        if self._workers is None:
            raise InvalidWorkerConfig(
                "run() serves the handlers given to process(type, n, handler): give one first"
            )
        if ready is not None and not callable(ready):
            raise InvalidWorkerConfig(f"ready must be callable, got {ready!r:.100}")
        if not isinstance(burst, bool):
            raise InvalidWorkerConfig(f"burst is True or False, got {burst!r:.100}")
        done = drained(self) if burst else None
        return signals.serve(self.stopped_remotely, self.shutdown, shutdown_timeout, ready, done)

    def shutdown(self, timeout: float = defaults.SHUTDOWN_TIMEOUT) -> None:
        """Stop this queue's workers: no more claims; running handlers get ``timeout``
        seconds; the jobs still running then go back to the queue at once."""
        with self._workers_lock:
            workers, self._workers = self._workers, None
            if workers is not None:
                self._closing = workers
            closing = self._closing
        if workers is not None:
            workers.shutdown(timeout)
        elif closing is not None:  # a shutdown under way (a remote stop): wait for its end
            closing.closed.wait(max(0.0, timeout) + defaults.SHUTDOWN_TIMEOUT)

    def use(self, middleware: mw.Middleware) -> Self:
        """Wrap every handler call of this queue's workers in this process in ``middleware``
        (``def mw(job, call_next)``, or ``async def`` for async handlers); see
        :mod:`kue_core.worker.middleware`. Middleware added first runs outermost."""
        mw.check(middleware)
        with self._workers_lock:
            if self._workers is not None:
                self._workers.use(middleware)
            self._middleware = (*self._middleware, middleware)
        return self

    @property
    def middleware(self) -> tuple[mw.Middleware, ...]:
        """The middleware added with :meth:`use`, in order."""
        return self._middleware

    @property
    def worker_id(self) -> str:
        """The id this process's workers register under, or will (see
        :mod:`kue_core.worker.identity`). A made-up one is made again in a child forked after it
        was:
        it names its process."""
        if self._made_up_in is not None and self._made_up_in != os.getpid():
            self._worker_id = identity.generated_worker_id()
            self._made_up_in = os.getpid()
        return self._worker_id


def drained(queue: WorkerMethods) -> Callable[[], bool]:
    """Whether a burst of ``queue``'s workers is over: their types' work has run out (see
    :mod:`kue_core.worker.burst`; ``kue worker --burst`` asks too). Redis not answering is not
    the end: the look is made again at the next poll."""
    log = logging.getLogger(__name__)
    last: list[str | None] = [None]

    def done() -> bool:
        workers = queue._workers
        if workers is None:  # shut down meanwhile
            return True
        try:
            left = workers.work_left()
        except (redis.RedisError, TimeoutError) as e:
            log.warning("burst: cannot tell the work left: %r", e)
            return False
        if left is not None and left != last[0]:
            log.debug("burst: waiting for %s", left)
        last[0] = left
        return left is None

    return done
