"""Workers: ``queue.process(type, n, handler)`` runs handlers in this process.

One :class:`Workers` per queue holds everything a worker process runs:

* ``n`` slot threads per ``process()`` call. A slot claims a job (``claim.lua``), runs the
  handler, then completes or fails the job and claims the next one in the same call, so a busy
  slot makes one round trip per job. An idle slot blocks on the type's wake-up list.
  ``async def`` handlers run on one event loop thread; their slot waits for the result.
  With ``isolation="process"`` each slot runs its handler in a child process instead
  (:mod:`kue_core.isolation`).
* a keeper thread: renews the leases of running jobs and registers the process
  (``heartbeat.lua``), returns jobs whose lease expired to the queue (``recover.lua``), and
  fails attempts that outlive their ``ttl``.
* a promotion thread: moves due delayed jobs to inactive (``promote.lua``). It sleeps until the
  next due time, and is woken at once when a job due sooner is saved.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
import os
import socket
import threading
import time
import traceback
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import redis

from . import backoff as backoff_policy
from . import defaults
from . import isolation as isolation_module
from .errors import InvalidJob, NoRetry
from .isolation import ISOLATIONS, Child, Done, Failed, Outcome, check_handler
from .job import Job, to_json, validate_type
from .scripts import PAUSED, Claim

if TYPE_CHECKING:
    from .queue import Queue

log = logging.getLogger("kue_core.worker")

_MACHINERY = frozenset({__file__, isolation_module.__file__})

Handler = Callable[[Job], Any]


@dataclass(eq=False)
class _Attempt:
    """One run of a handler on a claimed job."""

    job_id: int
    job: Job
    token: str
    deadline: float | None  # time.monotonic() past which the ttl is exceeded
    cancel: Callable[[], Any] | None = None  # stops the handler: cancels a coroutine, kills a child
    # Set once, under Workers._lock, by whoever ends the attempt first: the slot when the
    # handler returns, or the keeper (ttl exceeded, lease lost) or shutdown (job released).
    over: bool = False


@dataclass(eq=False)
class _Slot:
    job_type: str
    handler: Handler
    is_async: bool
    child: Child | None = None  # isolation="process"
    thread: threading.Thread | None = None
    blocked_on: int | None = None  # Redis client id while waiting for work


@dataclass
class _Pause:
    """Retry pauses after Redis errors: doubling, reset by a success."""

    first: float = defaults.RETRY_PAUSE[0]
    last: float = defaults.RETRY_PAUSE[1]
    current: float = defaults.RETRY_PAUSE[0]

    def next(self) -> float:
        pause, self.current = self.current, min(self.current * 2, self.last)
        return pause

    def reset(self) -> None:
        self.current = self.first


def describe(error: BaseException) -> tuple[str, str]:
    """(one-line message, text kept on the job): the text starts with the message, like
    a Kue stack, then the traceback from the handler down (the worker's frames left out)."""
    text = str(error).strip()
    message = f"{type(error).__name__}: {text.splitlines()[0]}" if text else type(error).__name__
    tb = error.__traceback__
    while tb is not None and tb.tb_next is not None and _ours(tb.tb_frame.f_code.co_filename):
        tb = tb.tb_next
    trace = "".join(traceback.format_exception(type(error), error, tb))
    return message, f"{message}\n{trace}"


def _ours(filename: str) -> bool:
    """Frames of the worker machinery (this module, futures, a child's loop) rather than of
    the handler."""
    return (
        filename in _MACHINERY
        or f"{os.sep}concurrent{os.sep}futures{os.sep}" in filename
        or f"{os.sep}asyncio{os.sep}" in filename
    )


class Workers:
    """The worker side of one queue in this process (see the module docstring)."""

    def __init__(self, queue: Queue, lease_ms: int, stall_limit: int) -> None:
        self.queue = queue
        self.scripts = queue.scripts
        self.lease_ms = lease_ms
        self.stall_limit = stall_limit
        self.id = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.started_at = int(time.time() * 1000)
        self._lock = threading.Lock()
        self._slots: list[_Slot] = []
        self._attempts: dict[int, _Attempt] = {}
        self._stopping = threading.Event()  # no more claims
        self._closed = threading.Event()  # keeper and promoter end
        self._tick = threading.Event()  # wakes the keeper early
        self._loop: asyncio.AbstractEventLoop | None = None
        self._beat_now = True  # register at once (set again when types are added)
        self._clock = (0, 0.0)  # (server ms, local monotonic) of the last promotion call
        self._threads: list[threading.Thread] = []  # keeper, promoter, event loop

    # -- public ---------------------------------------------------------------------------
    def process(self, job_type: str, n: int, handler: Handler, isolation: str) -> None:
        validate_type(job_type)
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise InvalidJob(f"concurrency must be an integer of at least 1, got {n!r}")
        if not callable(handler):
            raise InvalidJob(f"handler must be callable, got {handler!r}")
        if isolation not in ISOLATIONS:
            raise InvalidJob(f"isolation must be one of {', '.join(ISOLATIONS)}, got {isolation!r}")
        if isolation == "process":
            check_handler(handler)
        if self._stopping.is_set():
            raise InvalidJob("the workers of this queue are shutting down")
        if not self._threads:  # the first process() call of this queue
            self._start_thread(self._keep, "kue-keeper")
            self._start_thread(self._promote, "kue-promoter")
        is_async = inspect.iscoroutinefunction(handler)
        if is_async and isolation == "thread":
            self._event_loop()
        for i in range(n):
            name = f"kue-{job_type}-{i + 1}"
            slot = _Slot(job_type, handler, is_async)
            if isolation == "process":
                slot.child = Child(self.queue, handler, name)
            with self._lock:
                self._slots.append(slot)
            slot.thread = threading.Thread(target=self._work, args=(slot,), name=name, daemon=True)
            slot.thread.start()
        self._beat_now = True  # register the new types now
        self._tick.set()

    def info(self) -> dict[str, Any]:
        """What this process tells others about itself (see ``Queue.workers()``)."""
        types: dict[str, int] = {}
        with self._lock:
            for slot in self._slots:
                types[slot.job_type] = types.get(slot.job_type, 0) + 1
        return {
            "id": self.id,
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "types": types,
            "started_at": self.started_at,
            "lease_ms": self.lease_ms,
        }

    def shutdown(self, timeout: float) -> None:
        """Stop claiming; let running handlers finish for ``timeout`` seconds; give back the
        jobs still running then (not counted as attempts); stop every thread."""
        self._stopping.set()
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
            running = [a for a in self._attempts.values() if not a.over]
            for attempt in running:
                attempt.over = True
                if attempt.cancel is not None:
                    attempt.cancel()
            self._attempts.clear()
        for attempt in running:
            self._safely(self.scripts.release, attempt.job_id, attempt.token)
        self._closed.set()
        self._tick.set()
        self._safely(self.queue.client.publish, self.queue.keys.promote, "-1")  # wake promoter
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
        for thread in self._threads:
            thread.join(timeout=5)
        for slot in self._slots:
            if slot.child is not None:
                slot.child.close()
        if self._loop is not None and not self._loop.is_running():
            self._loop.close()
        self._safely(self._deregister)

    # -- slots ----------------------------------------------------------------------------
    def _work(self, slot: _Slot) -> None:
        pause = _Pause()
        claimed: Claim = None
        if slot.child is not None:
            try:
                slot.child.start()
            except Exception as e:  # the first job will try again, and fail if it cannot
                self._report(e)
        while not self._stopping.is_set():
            try:
                if claimed is None:
                    claimed = self.scripts.claim(slot.job_type, self.id, self.lease_ms)
                if claimed is None:
                    self._wait_for_work(slot, self.queue.keys.tokens(slot.job_type))
                elif claimed == PAUSED:
                    claimed = None
                    self._wait_for_work(slot, self.queue.keys.resumed(slot.job_type))
                else:
                    job_id, fields = claimed
                    claimed = None  # from here the job is this attempt's, whatever happens
                    claimed = self._run(slot, job_id, fields)
                pause.reset()
            except Exception as e:
                # Redis is down or restarting (or a bug): a job this slot held comes back
                # through its lease; the slot keeps trying until Redis answers again.
                self._report(e)
                self._stopping.wait(pause.next())

    def _wait_for_work(self, slot: _Slot, key: str) -> None:
        """Block on a wake-up list: the type's tokens, or its resume list while paused."""

        def blocked(client_id: int) -> None:
            slot.blocked_on = client_id

        try:
            self.scripts.wait_for_token(key, defaults.IDLE_WAIT, blocked)
        finally:
            slot.blocked_on = None

    def _run(self, slot: _Slot, job_id: int, fields: dict[str, str]) -> Claim:
        """Run the handler on one claimed job; finish it; return the next job claimed."""
        job = Job.from_hash(self.queue, job_id, fields)
        ttl = job.ttl()
        deadline = time.monotonic() + ttl / 1000 if ttl else None
        attempt = _Attempt(job_id, job, fields.get("lease", ""), deadline)
        if slot.child is not None:
            attempt.cancel = slot.child.kill
        with self._lock:
            self._attempts[job_id] = attempt
        if deadline is not None:
            self._tick.set()  # the keeper watches the deadline
        if slot.child is not None:
            outcome = slot.child.run(job_id, fields)
        else:
            outcome = self._call(slot, attempt)
        with self._lock:
            abandoned, attempt.over = attempt.over, True
            self._attempts.pop(job_id, None)
        nxt = None if self._stopping.is_set() else (self.id, self.lease_ms)
        if abandoned:  # ttl exceeded, lease lost or released: someone else ended it
            return self.scripts.claim(slot.job_type, *nxt) if nxt else None
        if isinstance(outcome, Done):
            log.debug("job %d (%s) complete", job_id, slot.job_type)
            _, claimed = self.scripts.complete(job_id, attempt.token, outcome.result, nxt)
        else:
            log.info("job %d (%s) failed: %s", job_id, slot.job_type, outcome.message)
            delay = self._retry_delay(job, outcome.no_retry)
            _, claimed = self.scripts.fail(
                job_id, attempt.token, outcome.message, outcome.text, delay, nxt
            )
        return claimed

    def _call(self, slot: _Slot, attempt: _Attempt) -> Outcome:
        """Run the handler in this process: in the slot's thread, or on the event loop."""
        try:
            result = self._await(slot, attempt) if slot.is_async else slot.handler(attempt.job)
            return Done(to_json(result, "result"))
        except BaseException as e:  # the handler's failure, whatever it is, fails the attempt
            return Failed(*describe(e), isinstance(e, NoRetry))

    def _await(self, slot: _Slot, attempt: _Attempt) -> Any:
        future = asyncio.run_coroutine_threadsafe(slot.handler(attempt.job), self._event_loop())
        with self._lock:
            attempt.cancel = future.cancel
        return future.result()

    @staticmethod
    def _retry_delay(job: Job, no_retry: bool) -> int:
        if no_retry:
            return -1
        delay = backoff_policy.retry_delay(job.backoff(), job.attempts_made + 1, job.delay())
        return delay or 0

    def _event_loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                loop = self._loop = asyncio.new_event_loop()
                self._start_thread(loop.run_forever, "kue-async")
            return self._loop

    # -- keeper: leases, registry, recovery, ttl ------------------------------------------
    def _keep(self) -> None:
        pause = _Pause()
        beat_every = self.lease_ms / 3000
        sweep_every = min(self.lease_ms / 2000, 5.0)
        next_beat = next_sweep = 0.0
        while not self._closed.is_set():
            try:
                now = time.monotonic()
                self._tick.clear()
                if now >= next_beat or self._beat_now:
                    self._beat_now = False
                    self._heartbeat()
                    next_beat = now + beat_every
                if now >= next_sweep:
                    self.scripts.recover(self.stall_limit, defaults.SWEEP_LIMIT)
                    next_sweep = now + sweep_every
                wake = self._expire(now)
                pause.reset()
            except redis.RedisError as e:
                self._report(e)
                self._closed.wait(pause.next())
                continue
            until = min(next_beat, next_sweep, wake if wake is not None else next_beat)
            self._tick.wait(max(0.0, until - time.monotonic()))

    def _heartbeat(self) -> None:
        with self._lock:
            held = [(jid, a.token) for jid, a in self._attempts.items() if not a.over]
        info = json.dumps(self.info(), separators=(",", ":"))
        lost = self.scripts.heartbeat(self.id, self.lease_ms, info, held)
        for job_id in lost:
            self._end(job_id)  # recovered or moved elsewhere: its result will be dropped

    def _expire(self, now: float) -> float | None:
        """Fail attempts past their ttl; return the next deadline, if any."""
        with self._lock:
            late = [a for a in self._attempts.values() if a.deadline and a.deadline <= now]
            upcoming = [a.deadline for a in self._attempts.values() if a.deadline]
        for attempt in late:
            if self._end(attempt.job_id):
                message = "TTL exceeded"
                text = f"{message}: the attempt ran longer than its ttl of {attempt.job.ttl()} ms"
                self.scripts.fail(
                    attempt.job_id,
                    attempt.token,
                    message,
                    text,
                    self._retry_delay(attempt.job, False),
                    None,
                )
        return min(upcoming, default=None)

    def _end(self, job_id: int) -> bool:
        """End an attempt on behalf of its slot (its eventual result is dropped)."""
        with self._lock:
            attempt = self._attempts.pop(job_id, None)
            if attempt is None or attempt.over:
                return False
            attempt.over = True
            if attempt.cancel is not None:
                attempt.cancel()
            return True

    # -- promotion timer ------------------------------------------------------------------
    def _promote(self) -> None:
        pause = _Pause()
        while not self._closed.is_set():
            pubsub = self.queue.client.pubsub(ignore_subscribe_messages=True)  # type: ignore[no-untyped-call]
            try:
                pubsub.subscribe(self.queue.keys.promote)
                while not self._closed.is_set():
                    wake = self._promote_due()
                    while not self._closed.is_set():
                        left = wake - time.monotonic()
                        if left <= 0:
                            break
                        msg = pubsub.get_message(timeout=left)
                        if msg is not None:
                            wake = min(wake, self._due_at(msg["data"]))
                    pause.reset()
            except redis.RedisError as e:
                self._report(e)
                self._closed.wait(pause.next())
            finally:
                pubsub.close()

    def _promote_due(self) -> float:
        """Promote what is due; return the monotonic time of the next due job."""
        while True:
            moved, next_due, now = self.scripts.promote(defaults.SWEEP_LIMIT)
            if moved < defaults.SWEEP_LIMIT:
                break
        self._clock = (now, time.monotonic())  # server ms <-> local monotonic, for _due_at
        if next_due < 0:
            return time.monotonic() + defaults.PROMOTE_MAX_WAIT
        return self._clock[1] + min(max(0, next_due - now) / 1000, defaults.PROMOTE_MAX_WAIT)

    def _due_at(self, data: str) -> float:
        """Local monotonic time of a due time (server ms) heard on the promote channel."""
        try:
            due = int(data)
        except (TypeError, ValueError):
            return time.monotonic()
        server_now, local_now = self._clock
        return local_now + max(0, due - server_now) / 1000

    # -- helpers --------------------------------------------------------------------------
    def _start_thread(self, target: Callable[[], Any], name: str) -> None:
        thread = threading.Thread(target=target, name=name, daemon=True)
        self._threads.append(thread)
        thread.start()

    def _unblock(self, client_id: int) -> None:
        self._safely(self.queue.client.client_unblock, client_id)

    def _deregister(self) -> None:
        pipe = self.queue.client.pipeline(transaction=False)
        pipe.zrem(self.queue.keys.workers, self.id)
        pipe.delete(self.queue.keys.worker(self.id))
        pipe.execute()

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
