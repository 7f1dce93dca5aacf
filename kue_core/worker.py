"""Workers: ``queue.process(type, n, handler)`` runs handlers in this process.

One :class:`Workers` per queue holds the threads and slots of a worker process:

* ``n`` slots per ``process()`` call, each served by a thread. A slot claims a job
  (``claim.lua``), runs the handler, then completes or fails the job and claims the next one in
  the same call, so a busy slot makes one round trip per job. An idle slot blocks on the
  type's wake-up list. ``async def`` handlers run on one event loop thread; their slot waits
  for the result. With ``isolation="process"`` each slot runs its handler in a child process
  instead (:mod:`kue_core.isolation`).
* a keeper thread: renews the leases of running jobs and registers the process under its
  worker id (``heartbeat.lua``, :mod:`kue_core.identity`), returns jobs whose lease expired
  to the queue (``recover.lua``), fails attempts that outlive their ``ttl``, and adds the
  slots' completions to the queue's counters (:mod:`kue_core.tally`).
* a promotion thread (:mod:`kue_core.promoter`): moves due delayed jobs to inactive.
* a control listener (:mod:`kue_core.control`) on the process's own channel: a running job
  cancelled or moved by hand has its attempt ended at once, and a stop request shuts the
  workers down as SIGTERM would. ``queue.pause(type, local=True)`` holds this process's slots
  of a type; ``queue.use(middleware)`` wraps every handler call (:mod:`kue_core.slots`).

Each run of a handler is an :class:`~kue_core.attempt.Attempt`, which decides once how it
ended. A coroutine is cancelled and a child process killed when their attempt ends early;
a thread cannot be killed, so a ``def`` handler still running then is left to finish on its
own (it sees ``job.stopping``, and ``Stopped`` from ``progress()``/``log()``) and its slot goes
on in a new thread, up to ``defaults.ABANDONED_THREADS`` such threads per process.
"""

from __future__ import annotations

import functools
import inspect
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

from . import backoff as backoff_policy
from . import checks, defaults, identity, isolation, promoter, tracing
from . import middleware as mw
from .attempt import Attempt, Reason
from .control import Listener
from .errors import InvalidJob
from .isolation import ISOLATIONS, Child, check_handler
from .job import Job
from .outcome import Done, Failed, Limited, Outcome
from .promoter import Promoter
from .reserve import Reserver, job_types
from .retry import Pauses
from .scripts import PAUSED, PINS, Claim, Held, Holder, Next, Waits
from .slots import Handler, Runner, Slot
from .tally import Tally
from .timings import Recorder

if TYPE_CHECKING:
    from opentelemetry.trace import Span

    from .events import EventBus
    from .keys import Keys


log = logging.getLogger("kue_core.worker")


class Owner(isolation.Owner, promoter.Owner, Protocol):
    """What the worker side uses of its ``Queue``."""

    events: EventBus
    #: Set once the workers stopped on another process's request (``stop_worker``).
    stopped_remotely: threading.Event

    @property
    def worker_id(self) -> str: ...
    @property
    def middleware(self) -> tuple[mw.Middleware, ...]: ...
    def paused(self) -> list[str]: ...
    def shutdown(self, timeout: float = ...) -> None: ...


def wake_lists(keys: Keys, job_type: str, why: Any, worker_id: str) -> list[tuple[str, bool]]:
    """The lists a slot with no job of ``job_type`` waits on, given why (a claim's answer for
    the type: None, ``PAUSED``, ``PINS`` or ``Held``), each with whether the wait leaves its
    token there: the type's tokens (left: claims take them), its resume list (left: every
    paused slot sees it), its limited list (taken: each wake-up lets one slot claim again),
    and for a type with pinned jobs this worker's own list of the type as well (taken)."""
    if why == PAUSED:
        return [(keys.resumed(job_type), True)]
    if isinstance(why, Held):
        return [(keys.limited(job_type), False)]
    if why == PINS:
        return [(keys.tokens(job_type), True), (keys.wake(job_type, worker_id), False)]
    return [(keys.tokens(job_type), True)]


def _failed(job: Job, result: str, delay: int) -> str:
    """What became of a job whose attempt failed, for the log: ``failed attempt 1 of 3,
    retrying (attempt 2 of 3) in 1.5 s``, or ``failed for good (attempt 3 of 3)``."""
    if job.fan_out() is not None:  # a run failed: the job's attempts do not count runs
        return "run failed" if result != "failed" else "failed for good (too many failed runs)"
    made, most = job.attempts_made + 1, job.attempts()
    if result in ("inactive", "delayed"):
        when = f"in {delay / 1000:g} s" if result == "delayed" else "now"
        return f"failed attempt {made} of {most}, retrying (attempt {made + 1} of {most}) {when}"
    if result == "failed":
        return f"failed for good (attempt {made} of {most}{', not retried' if delay < 0 else ''})"
    return "failed, but the job was no longer this worker's"


class Workers:
    """The worker side of one queue in this process (see the module docstring)."""

    def __init__(self, queue: Owner, lease_ms: int, stall_limit: int) -> None:
        self.queue = queue
        self.scripts = queue.scripts
        self.lease_ms = lease_ms
        self.stall_limit = stall_limit
        self.id = queue.worker_id
        #: Tells this process from another with the same id (see kue_core.identity).
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
        self._control: Listener | None = None  # this process's control channel
        self._stop_asked = False  # a stop request came on it
        self._held: dict[str, threading.Event] = {}  # types paused here: set on resume

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
            "types": types,
            "started_at": self.started_at,
            "lease_ms": self.lease_ms,
            "abandoned_threads": abandoned,
            "paused": sorted(self._held),
            "stopping": self._stopping.is_set(),
        }

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

    # -- slots ----------------------------------------------------------------------------
    def _serve(self, slot: Slot) -> None:
        """Start a thread serving ``slot`` (called under ``_lock``)."""
        slot.thread = threading.Thread(target=self._work, args=(slot,), name=slot.name, daemon=True)
        slot.thread.start()

    def _work(self, slot: Slot) -> None:
        """A slot's thread: claim, run, report, until shutdown, or until the slot goes on in
        a new thread because this one's handler outlived its attempt."""
        me = threading.current_thread()
        pauses = Pauses()
        if slot.child is not None:
            try:
                slot.child.start()
            except Exception as e:  # the first job will try again, and fail if it cannot
                self._report(e)
        nxt: Claim = None  # a job claimed by the last report, in the same call
        while not self._stopping.is_set() and slot.thread is me:
            order: list[str] = []
            if not isinstance(nxt, tuple):  # else a job claimed in the last report's call
                order = self._order(slot)
                if not order:  # paused in this process only
                    held = [self._held.get(t) for t in slot.types]
                    event = next((e for e in held if e is not None), self._stopping)
                    event.wait(defaults.IDLE_WAIT)
                    continue
            try:
                claimed = nxt if order == [] else self.scripts.claim(order, self.id, self.lease_ms)
                nxt = None
                if isinstance(claimed, tuple) and claimed[1].get("type") in self._held:
                    self._give_back(claimed)  # paused here while the claim was on its way
                elif isinstance(claimed, tuple):
                    nxt = self._run(slot, *claimed)
                else:
                    self._idle(slot, order, claimed)
                pauses.reset()
            except Exception as e:
                # Redis is down or restarting (or a bug): a job this slot held comes back
                # through its lease; the slot keeps trying until Redis answers again.
                self._report(e)
                self._stopping.wait(pauses.next())
        self._give_back(nxt)  # a job claimed as the slot stopped, if any
        if slot.thread is not me:
            with self._lock:
                self._abandoned -= 1
                left = self._abandoned
            log.info("a handler left running on %s returned (%d still running)", slot.name, left)
            self._beat_now = True
            self._tick.set()  # a stuck slot may get a new thread now

    def _give_back(self, claimed: Claim) -> None:
        """Release a job claimed but not run (not counted as an attempt)."""
        if isinstance(claimed, tuple):
            job_id, fields = claimed
            self._safely(self.scripts.release, job_id, fields.get("lease", ""))

    def _order(self, slot: Slot) -> list[str]:
        """The types the slot claims from next, in order, leaving out those paused here."""
        order = slot.reserver.order()
        if self._held:
            order = [t for t in order if t not in self._held]
        return order

    def _idle(self, slot: Slot, order: list[str], claimed: Claim) -> None:
        """No job for the slot: block until one of its types may have one, on each type's
        wake-up lists (see ``wake_lists``), the longest ``IDLE_WAIT``."""
        each = claimed.each if isinstance(claimed, Waits) else (claimed,)
        keys = self.queue.keys
        lists = [
            pair
            for t, w in zip(order, each, strict=True)
            for pair in wake_lists(keys, t, w, self.id)
        ]
        holds = [w.wait_ms / 1000 for w in each if isinstance(w, Held)]
        timeout = min([defaults.IDLE_WAIT, *holds])

        def blocked(client_id: int) -> None:
            slot.blocked_on = client_id

        try:
            self.scripts.wait_for_token(lists, timeout, blocked)
        finally:
            slot.blocked_on = None

    def _run(self, slot: Slot, job_id: int, fields: dict[str, str]) -> Claim:
        """Run the handler on one claimed job; report how it ended, unless the attempt was
        ended elsewhere first; return the next job claimed in the same call. Traced, when
        traces are on (see :mod:`kue_core.tracing`)."""
        if not tracing.enabled:
            return self._attempt(slot, job_id, fields, None)
        with tracing.consuming(job_id, fields.get("type", ""), fields) as span:
            return self._attempt(slot, job_id, fields, span)

    def _attempt(self, slot: Slot, job_id: int, fields: dict[str, str], span: Span | None) -> Claim:
        job = Job.from_hash(self.queue, job_id, fields)
        grace = defaults.CHILD_START_GRACE if slot.child is not None else 0.0
        attempt = Attempt(job, fields.get("lease", ""), job.ttl(), grace=grace)
        started_at = job.started_at or 0
        self._timings.add(job.type, "wait", int(fields.get("waited") or 0), started_at)
        with self._lock:
            self._attempts[job_id, attempt.token] = attempt
            slot.attempt = attempt
        if attempt.deadline is not None:
            self._tick.set()  # the keeper watches the deadline
        outcome = self._runner.call(slot, attempt, fields, self.queue.middleware)
        with self._lock:  # the handler returned: this thread is not stuck, and it is not running
            if slot.attempt is attempt:
                slot.attempt, slot.held_back = None, False
            self._attempts.pop((job_id, attempt.token), None)
        ours = attempt.end(Reason.DONE if isinstance(outcome, Done) else Reason.FAILED)
        if span is not None:
            _traced(span, attempt, outcome)
        if not ours:
            return None  # ttl exceeded, lease lost or released: reported by whoever ended it
        ran = round((time.monotonic() - attempt.began) * 1000)
        self._timings.add(job.type, "run", ran, started_at)
        if isinstance(outcome, Limited):  # back to wait, no attempt counted; the type waits
            log.info("job %d (%s): %s", job_id, job.type, outcome.message)
            self.scripts.release(job_id, attempt.token, outcome.retry_in_ms)
            return None
        order = [] if self._stopping.is_set() else self._order(slot)
        nxt: Next | None = None
        if order == [job.type]:
            nxt = (self.id, self.lease_ms)  # the finished job's type, as the script assumes
        elif order:
            nxt = (self.id, self.lease_ms, order)
        if isinstance(outcome, Done):
            log.debug("job %d (%s) complete", job_id, job.type)
            tally = functools.partial(self._tally.add, job.type)
            _, claimed = self.scripts.complete(job_id, attempt.token, outcome.result, nxt, tally)
        else:
            delay = self._retry_delay(job, outcome.no_retry)
            result, claimed = self.scripts.fail(
                job_id, attempt.token, outcome.message, outcome.text, delay, nxt
            )
            log.info(
                "job %d (%s) %s: %s", job_id, job.type, _failed(job, result, delay), outcome.message
            )
        return claimed

    def _end(self, attempt: Attempt, reason: Reason) -> bool:
        """End ``attempt`` (see :meth:`Attempt.end`) and forget it; True for the caller that
        ended it, who alone reports it."""
        if not attempt.end(reason):
            return False
        with self._lock:
            self._attempts.pop((attempt.job_id, attempt.token), None)
        return True

    def _on_control(self, message: dict[str, Any]) -> None:
        """A message on this process's control channel (see :mod:`kue_core.control`)."""
        if message["op"] == "stop":
            if self._stop_asked:
                return
            self._stop_asked = True  # messages come one at a time, on the listener's thread
            log.info("worker %s: asked to stop; running jobs get %g s", self.id, message["timeout"])
            threading.Thread(target=self._stop, args=(message["timeout"],), name="kue-stop").start()
            return
        with self._lock:
            attempt = self._attempts.get((message["id"], message["lease"]))
        if attempt is None:
            return  # ended already
        if self._end(attempt, Reason.CANCELLED):  # Redis has it failed or moved already
            log.info("job %d (%s): %s", attempt.job_id, attempt.job.type, message["reason"])
            self._tick.set()  # the keeper gives a stuck thread slot a new thread now

    def _stop(self, timeout: float) -> None:
        """Shut down on a stop request, as on SIGTERM, or when another process took the id
        over; then tell ``queue.stopped_remotely``."""
        self.queue.shutdown(timeout)
        self.queue.stopped_remotely.set()

    @staticmethod
    def _retry_delay(job: Job, no_retry: bool) -> int:
        if no_retry:
            return -1
        delay = backoff_policy.retry_delay(job.backoff(), job.attempts_made + 1, job.delay())
        return delay or 0

    # -- keeper: leases, registry, recovery, ttl ------------------------------------------
    def _keep(self) -> None:
        beat_every = self.lease_ms / 3000
        # After a Redis error, try again at least as often as a heartbeat is due, so that a
        # short lease does not expire while Redis is back.
        pauses = Pauses(last=min(defaults.RETRY_PAUSE[1], beat_every))
        sweep_every = min(self.lease_ms / 2000, 5.0)
        next_beat = next_sweep = next_retain = next_deps = next_tally = 0.0
        while not self._closed.is_set():
            try:
                now = time.monotonic()
                self._tick.clear()
                wake = self._expire(now)
                relieve = self._relieve(now)
                if relieve is not None:
                    wake = relieve if wake is None else min(wake, relieve)
                if now >= next_beat or self._beat_now:
                    self._beat_now = False
                    self._heartbeat()
                    next_beat = now + beat_every
                if now >= next_sweep:
                    self.scripts.recover(self.stall_limit, defaults.SWEEP_LIMIT)
                    next_sweep = now + sweep_every
                if now >= next_retain:  # see kue_core.retention
                    self.scripts.retain(defaults.SWEEP_LIMIT)
                    next_retain = now + defaults.RETENTION_SWEEP
                if now >= next_deps:  # see kue_core.flows
                    self.scripts.unblock(defaults.SWEEP_LIMIT)
                    next_deps = now + defaults.DEPS_SWEEP
                if now >= next_tally:
                    self._tally.flush(self.queue.client, self.queue.keys)
                    next_tally = now + defaults.TALLY_FLUSH
                pauses.reset()
            except redis.RedisError as e:
                self._report(e)
                self._closed.wait(pauses.next())
                continue
            until = min(next_beat, next_sweep, next_deps, next_tally)
            if wake is not None:
                until = min(until, wake)
            self._tick.wait(max(0.0, until - time.monotonic()))

    def _heartbeat(self) -> None:
        with self._lock:
            running = [a for a in self._attempts.values() if not a.over]
        info = json.dumps(self.info(), separators=(",", ":"))
        held = [(a.job_id, a.token) for a in running]
        reply = self.scripts.heartbeat(self.id, self.lease_ms, info, held, instance=self.instance)
        if isinstance(reply, Holder):  # another process has the id now
            if not self._stop_asked:
                self._stop_asked = True
                log.error(identity.taken_over(self.id, reply))
                threading.Thread(target=self._stop, args=(0,), name="kue-stop").start()
            return
        lost = set(reply)
        for attempt in running:
            if (attempt.job_id, attempt.token) in lost:
                # Recovered, moved or removed meanwhile: its result will be dropped.
                self._end(attempt, Reason.LEASE_LOST)
        self._timings.flush(self.queue.client, self.queue.keys)

    def _expire(self, now: float) -> float | None:
        """Fail attempts past their ttl; return the next deadline, if any."""
        with self._lock:
            timed = [a for a in self._attempts.values() if a.deadline is not None]
        upcoming = []
        for attempt in timed:
            deadline = attempt.deadline
            assert deadline is not None
            if deadline > now:
                upcoming.append(deadline)
            elif self._end(attempt, Reason.TTL):
                ran = round((now - attempt.began) * 1000)
                self._timings.add(attempt.job.type, "run", ran, attempt.job.started_at or 0)
                message = "TTL exceeded"
                text = f"{message}: the attempt ran longer than its ttl of {attempt.ttl_ms} ms"
                delay = self._retry_delay(attempt.job, False)
                self.scripts.fail(attempt.job_id, attempt.token, message, text, delay, None)
        return min(upcoming, default=None)

    def _relieve(self, now: float) -> float | None:
        """Give a new thread to each slot whose ``def`` handler still runs ``STOP_GRACE``
        after its attempt ended (a thread cannot be stopped), while fewer than
        ``ABANDONED_THREADS`` are left running so; past that, the slot waits for its handler to
        return. Returns when to look again for a handler still within its grace."""
        upcoming: list[float] = []
        with self._lock:
            if self._stopping.is_set():
                return None
            for slot in self._slots:
                attempt = slot.attempt
                if attempt is None or not attempt.stopped or not slot.in_thread:
                    continue
                assert attempt.ended_at is not None
                if now < attempt.ended_at + defaults.STOP_GRACE:
                    upcoming.append(attempt.ended_at + defaults.STOP_GRACE)
                    continue
                if self._abandoned >= defaults.ABANDONED_THREADS:
                    if not slot.held_back:
                        slot.held_back = True
                        log.warning(
                            "job %d (%s): the handler still runs after its attempt ended (%s);"
                            " %d threads are left running so already: %s waits for it",
                            attempt.job_id,
                            attempt.job.type,
                            attempt.reason,
                            self._abandoned,
                            slot.name,
                        )
                    continue
                self._abandoned += 1
                slot.attempt, slot.held_back = None, False
                self._serve(slot)
                self._beat_now = True
                log.warning(
                    "job %d (%s): the handler still runs after its attempt ended (%s); it is "
                    "left to finish and %s goes on in a new thread (%d left running)",
                    attempt.job_id,
                    attempt.job.type,
                    attempt.reason,
                    slot.name,
                    self._abandoned,
                )
        return min(upcoming, default=None)

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
            log.warning("worker %s: %s", self.id, error)
        else:
            log.error("worker %s: unexpected error", self.id, exc_info=error)
        self.queue.events.report(error)


def _traced(span: Span, attempt: Attempt, outcome: Outcome) -> None:
    """Tell the attempt's span how it ended (see :func:`kue_core.tracing.ended`)."""
    if isinstance(outcome, Limited) and attempt.reason == Reason.FAILED:
        tracing.ended(span, "limited")
    elif isinstance(outcome, Failed) and attempt.reason == Reason.FAILED:
        tracing.ended(span, str(attempt.reason), outcome.message, outcome.text)
    else:
        tracing.ended(span, str(attempt.reason))
