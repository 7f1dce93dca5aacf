"""Workers: ``queue.process(type, n, handler)`` runs handlers in this process.

One :class:`Workers` per queue holds the threads and slots of a worker process:

* ``n`` slots per ``process()`` call, each served by a thread. A slot claims a job
  (``claim.lua``), runs the handler, then completes or fails the job and claims the next one in
  the same call, so a busy slot makes one round trip per job. An idle slot blocks on the
  type's wake-up list. ``async def`` handlers run on one event loop thread; their slot waits
  for the result. With ``isolation="process"`` each slot runs its handler in a child process
  instead (:mod:`kue_core.worker.isolation`).
* a keeper thread: renews the leases of running jobs and registers the process under its
  worker id (``heartbeat.lua``, :mod:`kue_core.worker.identity`), returns jobs whose lease expired
  to the queue (``recover.lua``), fails attempts that outlive their ``ttl``, and adds the
  slots' completions to the queue's counters (:mod:`kue_core.features.tally`).
* a promotion thread (:mod:`kue_core.worker.promoter`): moves due delayed jobs to inactive.
* a control listener (:mod:`kue_core.features.control`) on the process's own channel: a running job
  cancelled or moved by hand has its attempt ended at once, and a stop request shuts the
  workers down as SIGTERM would. ``queue.pause(type, local=True)`` holds this process's slots
  of a type; ``queue.use(middleware)`` wraps every handler call (:mod:`kue_core.worker.slots`).

Each run of a handler is an :class:`~kue_core.worker.attempt.Attempt`, which decides once how it
ended. A coroutine is cancelled and a child process killed when their attempt ends early;
a thread cannot be killed, so a ``def`` handler still running then is left to finish on its
own (it sees ``job.stopping``, and ``Stopped`` from ``progress()``/``log()``) and its slot goes
on in a new thread, up to ``defaults.ABANDONED_THREADS`` such threads per process.
"""

from __future__ import annotations

import inspect
import json
import threading
import time
from collections.abc import Sequence

from ..base import checks
from ..base.errors import InvalidJob
from ..features.control import Listener
from . import burst, identity
from . import middleware as mw
from .attempt import Reason
from .isolation import ISOLATIONS, Child, check_handler
from .keeper import Keeper
from .promoter import Promoter
from .reserve import Reserver, job_types
from .serving import Serving
from .slots import Handler, Slot
from .state import Owner

__all__ = ["Owner", "Workers"]


class Workers(Serving, Keeper):
    """The worker side of one queue in this process (see the module docstring)."""

    # -- public ---------------------------------------------------------------------------
    def process(
        self, job_type: str | Sequence[str], n: int, handler: Handler, isolation: str, reserve: str
    ) -> None:
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
        if self._stopping.is_set():
            raise InvalidJob("the workers of this queue are shutting down")
        first = not self._threads  # the first process() call of this queue
        label = "+".join(types)
        slots = [Slot(types, reserver, handler, is_async, f"kue-{label}-{i + 1}") for i in range(n)]
        for slot in slots:
            if isolation == "process":
                slot.child = Child(self.queue, handler, slot.name)
        if first:
            # Listening before it is listed: a stop sent once it shows in workers() reaches
            # it, and so does a cancel of the first job it claims.
            channel = self.queue.keys.control(self.id)
            self._control = Listener(self.queue.client, channel, self._on_control, self._report)
            self._control.start()
            info = json.dumps(self.info(slots), separators=(",", ":"))
            try:  # before anything starts: WorkerIdTaken if a live process has the id
                identity.register(self.scripts, self.id, self.instance, self.lease_ms, info)
            except BaseException:
                self._control.close()
                self._control = None
                raise
        if is_async and isolation == "thread":
            self._runner.loop()
        if first:  # a type paused before the claim read the paused flag gets the flag
            for paused in self.queue.paused():
                self.scripts.pause(paused)
        with self._lock:  # all at once: a heartbeat never tells of half of them
            self._slots.extend(slots)
            for slot in slots:
                self._serve(slot)
        if first:  # keeper and promoter start once the slots are there to tell of
            self._start_thread(self._keep, "kue-keeper")
            promoter = Promoter(self.queue, self._closed, self._report)
            self._start_thread(promoter.run, "kue-promoter")
        self._beat_now = True  # register the new types now
        self._tick.set()

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
        with self._lock:
            slots = list(self._slots)
        for slot in slots:
            self.check_middleware(each, slot.is_async, slot.child is not None)

    def pause_here(self, job_type: str) -> bool:
        """Stop this process's slots of ``job_type`` from claiming; False if they were."""
        with self._lock:
            if job_type in self._held:
                return False
            self._held[job_type] = threading.Event()
        self._wake_slots(job_type)  # an idle slot stops waiting for work, and waits here
        self._beat_now = True
        self._tick.set()
        return True

    def resume_here(self, job_type: str) -> bool:
        """Undo :meth:`pause_here`; False if the type was not paused here."""
        with self._lock:
            held = self._held.pop(job_type, None)
        if held is None:
            return False
        held.set()
        self._beat_now = True
        self._tick.set()
        return True

    def work_left(self) -> str | None:
        """What a burst of these workers still waits for (``2 inactive, 1 active``), or None
        when their types' work has run out (see :mod:`kue_core.worker.burst`)."""
        with self._lock:
            types = {t for slot in self._slots for t in slot.types}
            held, retrying, running = set(self._held), dict(self.retrying), len(self._attempts)
            notes = self._notes
        keys = self.queue.keys
        found, still = burst.left(self.queue.client, keys, types, held, self.id, retrying)
        with self._lock:  # forget the retries done with, unless noted again meanwhile
            for job_id, note in retrying.items():
                if job_id not in still and self.retrying.get(job_id) == note:
                    del self.retrying[job_id]
            if self._notes != notes:  # an attempt failed meanwhile: its job may be gone
                return "an attempt that failed meanwhile"  # from the sets read: look again
        if running or any(found.values()):
            return burst.describe(found) if any(found.values()) else f"{running} running here"
        return None

    def shutdown(self, timeout: float) -> None:
        """Stop claiming; let running handlers finish for ``timeout`` seconds; give back the
        jobs still running then (not counted as attempts); stop every thread."""
        self._stopping.set()
        self._beat_now = True  # tell of it: "stopping" in Queue.workers()
        self._tick.set()
        with self._lock:
            held = list(self._held.values())
        for event in held:
            event.set()
        deadline = time.monotonic() + max(0.0, timeout)
        while True:
            with self._lock:
                alive = [s for s in self._slots if s.thread and s.thread.is_alive()]
            for slot in alive:
                if slot.blocked_on is not None:
                    self._unblock(slot.blocked_on)
            left = deadline - time.monotonic()
            if not alive or left <= 0:
                break
            alive[0].thread.join(min(left, 0.05))  # type: ignore[union-attr]
        with self._lock:
            running = list(self._attempts.values())
        for attempt in running:
            if self._end(attempt, Reason.RELEASED):
                self._safely(self.scripts.release, attempt.job_id, attempt.token)
        self._closed.set()
        self._tick.set()
        self._safely(self.queue.client.publish, self.queue.keys.promote, "-1")  # wake promoter
        self._runner.close()
        for thread in self._threads:
            thread.join(timeout=5)
        if self._control is not None:
            self._control.close()
        for slot in self._slots:
            if slot.child is not None:
                slot.child.close()
        self._safely(self._timings.flush, self.queue.client, self.queue.keys)
        self._safely(self._tally.flush, self.queue.client, self.queue.keys)
        self._safely(self._deregister)
        self.closed.set()
