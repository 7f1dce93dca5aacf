"""The slots' serving on the worker's event loop (:mod:`kue_core.worker.loop`): each slot is a
task that claims a job, runs its handler, reports how it ended and claims the next one in the
same call, and waits on its types' wake-up lists when there is none, as a slot's thread does
(:mod:`kue_core.worker.serving`), with every Redis exchange on the loop's one connection.

An ``async def`` handler runs on the loop, in the slot's task, which an attempt ended from
outside cancels; a brief ``def`` handler, and a process-isolated one's child, run in the
loop's threads (:class:`kue_core.worker.loop.Handoff`), so their Python stays off the loop.

The ``def`` slots of a process go on in threads of their own
(:class:`kue_core.worker.serving.Serving`), each claiming and reporting on a connection of its
own, while the process's ``def`` handlers were slow (see ``slots.SLOW_AGAIN``) within the
last ``THREADS_S`` (they block on I/O, or compute), and always for the only slot of a process,
which claims ahead there (:mod:`kue_core.worker.posting`): batching their calls with the
others' would gain little, and each job would wake the loop and a thread in turn. The loop
takes them back at a job's end once no handler took long for ``THREADS_S``. The choice is the
process's, not each slot's: a process whose slots are some on the loop and some in threads
drains slower than either. 16 slots, interleaved with the thread runtime of earlier
versions: handlers that sleep 2 ms, 6,290-6,330 jobs/s where 4,400-4,700 with the calls handed
to the loop's threads (threads: 6,370-6,400); no-op handlers of which one in 1,000 to one in
50 sleeps 3 ms, 18,300-19,400 where 8,800-14,600 (threads: 14,300-18,500)."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import time
from typing import TYPE_CHECKING

from .. import defaults, tracing
from ..base.payloads import PREFIX as STORED
from ..base.retry import Pauses
from ..jobs.job import Job
from ..jobs.notes import Notes
from ..store import calls
from ..store.calls import Claim, Held, Next, Waits
from . import ahead
from .ahead import Ahead, Line, Lines
from .attempt import Attempt, Reason
from .dispatch import Dispatcher
from .handling import handle
from .loop import EventLoop
from .outcome import (
    Done,
    Limited,
    Suspended,
    logged,
    reported,
    retry_delay,
    stored_failure,
    suspendable,
    unreadable,
)
from .posting import Posts
from .serving import Serving, failed_text, held_up, stale, suspended, traced, wake_lists
from .slots import HandlerRunner, Slot, clock
from .state import Owner, WorkerState
from .waiting import Waiting

if TYPE_CHECKING:
    from opentelemetry.trace import Span

log = logging.getLogger(__name__)

#: How long after the process's ``def`` handlers were slow (see ``slots.SLOW_AGAIN``) its
#: ``def`` slots go on in threads of their own (see the module).
THREADS_S = 5.0


class LoopServing:
    """The slots' tasks of :class:`kue_core.worker.workers.Workers`:
    :meth:`serve` starts one for a slot; each serves its slot until shutdown, or until the
    keeper gives the slot a new task because this one's ``def`` handler outlived its attempt
    (a thread cannot be stopped: the task waits for it, and the slot goes on without it)."""

    def __init__(
        self, queue: Owner, state: WorkerState, runner: HandlerRunner, loop: EventLoop
    ) -> None:
        self.queue = queue
        self._state = state
        self._runner = runner
        self._loop = loop
        self._redis = loop.transport
        #: Where claims and completions go, several in one call (see kue_core.worker.dispatch).
        self._dispatch = Dispatcher(loop.loop, loop.transport, queue.keys, state.id, state.lease_ms)
        self._waiting = Waiting(loop.transport)
        self._stopping = asyncio.Event()  # state.stopping, as the loop's tasks await it
        self._lines: dict[str, Line] = {}  # by slot name: see _work
        #: How the only async def slot claims ahead (see kue_core.worker.ahead).
        self._ahead = Lines(
            state, loop.loop, self._claim, self._order, self._give_back, self._alone
        )
        #: The threads of the slots served best by a thread of their own (see the module).
        posts = Posts(queue.scripts, state, self._alone, loop.loop, self._give_back)
        self._posts = posts
        self._threads = Serving(queue, state, runner, posts)
        self.id = state.id
        self.lease_ms = state.lease_ms

    # -- what Workers and the keeper call, from any thread ------------------------------------
    def serve(self, slot: Slot) -> None:
        """Start a task serving ``slot`` (called under ``state.lock``), or a thread when it
        is served best so; a task or a thread serving it already ends once its handler
        returns."""
        slot.turn += 1
        self._dispatch.company = len(self._state.slots)
        if self._threaded(slot):
            self._threads.start(slot, slot.turn, None, self.take_back)
        else:
            slot.done = self._loop.submit(self._work(slot, slot.turn))

    def take_back(self, slot: Slot, turn: int, nxt: Claim) -> bool:
        """Whether the loop serves on a slot a thread of its own serves now (called by the
        thread before each job, with the job claimed for it, if any): the slot has company,
        and no ``def`` handler of the process took long for ``THREADS_S``."""
        if self._threaded(slot):
            return False
        try:
            slot.done = self._loop.submit(self._work(slot, turn, nxt))
        except RuntimeError:  # the loop is closing: the thread sees the workers stop
            return False
        return True

    def _alone(self) -> bool:
        return self._dispatch.company == 1

    def _threaded(self, slot: Slot) -> bool:
        """Whether ``slot`` is served best by a thread of its own (see the module)."""
        if not slot.in_thread:
            return False
        slowed = time.monotonic() - self._runner.slow_at < THREADS_S
        return slowed or self._alone()

    def stop(self) -> None:
        """Tell the slots' tasks that the workers stop (``state.stopping`` is set): one
        pausing after an error goes on at once, to its end; the jobs claimed ahead go back
        now, whatever the handlers still running do (waited for a few seconds at most)."""
        done = self._loop.submit(self._stop())
        if not self._loop.here():
            with contextlib.suppress(Exception):  # reported; their leases give them back
                done.result(defaults.STOP_GIVE_BACK)

    async def _stop(self) -> None:
        self._stopping.set()
        held: collections.deque[Ahead] = collections.deque()
        for line in self._lines.values():
            held.extend(line)
            line.clear()
        await self._ahead.let_go(held)
        await self._posts.stop()

    def alive(self) -> list[Slot]:
        """The slots whose task or thread still runs."""
        with self._state.lock:
            return [s for s in self._state.slots if _running(s)]

    def join(self, slot: Slot, timeout: float) -> None:
        """Wait up to ``timeout`` seconds for the task or the thread of ``slot`` to end."""
        thread = slot.thread
        if thread is not None and thread.is_alive():
            thread.join(timeout)
        elif slot.done is not None:
            # Ended (cancelled, or failed: reported), or still running.
            with contextlib.suppress(BaseException):
                slot.done.result(timeout)

    # -- a slot's task -------------------------------------------------------------------------
    async def _work(self, slot: Slot, turn: int, nxt: Claim = None) -> None:
        """A slot's task: claim, run, report, until shutdown, until the slot goes on in a
        new task because this one's handler outlived its attempt, or until it goes on in a
        thread of its own (see the module). ``nxt``: a job claimed by the last report, in the
        same call."""
        state = self._state
        pauses = Pauses()
        if slot.child is not None and turn == 1:
            try:
                await asyncio.get_running_loop().run_in_executor(None, slot.child.start)
            except Exception as e:  # the first job will try again, and fail if it cannot
                state.report(e)
        line = Line()  # jobs claimed ahead, in turn
        self._lines[slot.name] = line
        while not state.stopping.is_set() and slot.turn == turn:
            order: list[str] = []
            if line and not isinstance(nxt, tuple):  # the next job claimed ahead
                nxt = await self._ahead.next(slot, line)
            if not isinstance(nxt, tuple):  # else a job claimed in the last report's call
                order = self._order(slot)
                if not order:  # paused in this process only
                    held = [state.held.get(t) for t in slot.types]
                    event = next((e for e in held if e is not None), state.stopping)
                    await asyncio.to_thread(event.wait, defaults.IDLE_WAIT)
                    continue
            try:
                if order:
                    slot.asked = clock()
                claimed = nxt if order == [] else await self._claim(order)
                if order == [] and isinstance(claimed, tuple):
                    line.more = True
                nxt = None
                if isinstance(claimed, tuple) and claimed[1].get("type") in state.held:
                    await self._give_back(claimed)  # paused here while the claim was on its way
                elif isinstance(claimed, tuple):
                    nxt = await self._run(slot, *claimed, line)
                    if self._threaded(slot) and slot.turn == turn:
                        await self._ahead.let_go(line)
                        if not state.stopping.is_set():
                            self._threads.start(slot, turn, nxt, self.take_back)
                            return
                else:
                    await self._idle(slot, order, claimed)
                pauses.reset()
            except Exception as e:
                # Redis is down or restarting (or a bug): a job this slot held comes back
                # through its lease; the slot keeps trying until Redis answers again.
                state.report(e)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stopping.wait(), pauses.next())
        await self._give_back(nxt)  # a job claimed as the slot stopped, if any
        await self._ahead.let_go(line)
        if slot.turn != turn:
            with state.lock:
                state.abandoned -= 1
                left = state.abandoned
            log.info("a handler left running on %s returned (%d still running)", slot.name, left)
            state.bell.ring(beat=True)  # a stuck slot may get a new task now

    async def _claim(self, order: list[str]) -> Claim:
        """The best waiting job of the types in ``order`` (see ``claim.lua``)."""
        return await self._dispatch.claim(order)

    async def _give_back(self, claimed: Claim) -> None:
        """Release a job claimed but not run (not counted as an attempt)."""
        if isinstance(claimed, tuple):
            job_id, fields = claimed
            release = calls.release(self.queue.keys, job_id, fields.get("lease", ""))
            try:
                await self._redis.call(release)
            except Exception as e:  # the lease gives it back later
                self._state.report(e)

    def _order(self, slot: Slot) -> list[str]:
        """The types the slot claims from next, in order, leaving out those paused here."""
        order = slot.reserver.order()
        if self._state.held:
            order = [t for t in order if t not in self._state.held]
        return order

    async def _idle(self, slot: Slot, order: list[str], claimed: Claim) -> None:
        """No job for the slot: wait until one of its types may have one, on each type's
        wake-up lists (see ``wake_lists``), the longest ``IDLE_WAIT``: one wait for all the
        slots waiting on the same lists (see kue_core.worker.waiting)."""
        each = claimed.each if isinstance(claimed, Waits) else (claimed,)
        keys = self.queue.keys
        lists = [
            pair
            for t, w in zip(order, each, strict=True)
            for pair in wake_lists(keys, t, w, self.id)
        ]
        holds = [w.wait_ms / 1000 for w in each if isinstance(w, Held)]
        timeout = min([defaults.IDLE_WAIT, *holds])

        def blocked(client_id: int | None) -> None:
            slot.blocked_on = client_id

        await self._waiting.wait(lists, timeout, blocked)

    async def _run(self, slot: Slot, job_id: int, fields: dict[str, str], line: Line) -> Claim:
        """Run the handler on one claimed job; report how it ended, unless the attempt was
        ended elsewhere first; return the next job claimed in the same call. Traced, when
        traces are on (see :mod:`kue_core.tracing`)."""
        if self._state.ended_before(job_id, fields):
            return None
        if await self._stale(slot, job_id, fields):
            return None
        if not tracing.enabled:
            return await self._attempt(slot, job_id, fields, line, None)
        with tracing.consuming(job_id, fields.get("type", ""), fields) as span:
            return await self._attempt(slot, job_id, fields, line, span)

    async def _stale(self, slot: Slot, job_id: int, fields: dict[str, str]) -> bool:
        """Whether a job claimed for ``slot`` is another worker's by now (see
        ``Serving._stale``): asked of Redis only when a third of the lease has passed."""
        away = held_up(slot, self.lease_ms)
        if away is None:
            return False
        lost = await self._redis.call(self._state.beat_call([(job_id, fields.get("lease", ""))]))
        return stale(lost, job_id, fields, away)

    async def _attempt(
        self,
        slot: Slot,
        job_id: int,
        fields: dict[str, str],
        line: Line,
        span: Span | None,
    ) -> Claim:
        state = self._state
        offload = self.queue.offload
        if (
            offload is not None
            and offload.slow
            and any(fields.get(name, "").startswith(STORED) for name in ("data", "result"))
        ):  # read from a payload store over the network: off the loop
            job = await self._loop.loop.run_in_executor(
                None, Job.from_hash, self.queue, job_id, fields
            )
        else:
            job = Job.from_hash(self.queue, job_id, fields)
        job._notes = Notes(self._loop.loop, self._redis, state.report)  # see kue_core.jobs.notes
        grace = defaults.CHILD_START_GRACE if slot.child is not None else 0.0
        attempt = Attempt(job, fields.get("lease", ""), job.ttl(), grace=grace)
        started_at = job.started_at or 0
        waited = int(fields.get("waited") or 0)
        with state.lock:
            state.attempts[job_id, attempt.token] = attempt
            slot.attempt = attempt
        if attempt.deadline is not None:
            state.bell.ring()  # the keeper watches the deadline
        self._ahead.claim(slot, line)
        hold = None
        if line:  # a job waits behind this one: given back if this one turns out slow
            hold = self._loop.loop.call_later(ahead.HOLD_S, self._ahead.slow, slot, line)
        middleware = self.queue.middleware
        outcome = unreadable(job) or await handle(
            self._loop, self._runner, slot, attempt, fields, middleware
        )
        took = time.monotonic() - attempt.began
        slot.quick = took < ahead.QUICK_S
        if hold is not None:
            hold.cancel()
        if job._notes.pending:  # what the handler wrote goes before how its attempt ended
            await job._notes.sent()
        with state.lock:  # the handler returned: this slot is not stuck, and it is not running
            if slot.attempt is attempt:
                slot.attempt, slot.held_back = None, False
            state.attempts.pop((job_id, attempt.token), None)
        ours = attempt.end(Reason.DONE if isinstance(outcome, Done) else Reason.FAILED)
        if span is not None:
            traced(span, attempt, outcome)
        if not ours:  # ttl exceeded, lease lost or released: reported by whoever ended it
            state.timings.add(job.type, "wait", waited, started_at)
            return None
        state.timings.attempt(job.type, waited, round(took * 1000), started_at)
        keys = self.queue.keys
        if isinstance(outcome, Limited):  # back to wait, no attempt counted; the type waits
            log.info("job %d (%s): %s", job_id, job.type, logged(job, outcome.message))
            state.may_retry(job_id)
            await self._redis.call(calls.release(keys, job_id, attempt.token, outcome.retry_in_ms))
            return None
        if isinstance(outcome, Suspended):
            outcome = suspendable(job, outcome)
        if isinstance(outcome, Suspended):  # waits for a signal, holding no slot
            await self._redis.call(suspended(keys, job_id, attempt.token, outcome))
            return None
        # The report claims the slot's next job in the same call, or, when the next is
        # claimed ahead already and the handler was quick, the one after it. The types'
        # order is asked only for a claim (a round-robin's turn is one a claim).
        outcome, result = await reported(self._loop.loop, job, outcome)
        quick = isinstance(outcome, Done) and slot.quick
        claims = not state.stopping.is_set() and (not line or quick)
        order = self._order(slot) if claims else []
        if isinstance(outcome, Done):
            log.debug("job %d (%s) complete", job_id, job.type)
            pipelined = bool(line and order)
            report = self._complete(job_id, job.type, attempt.token, result, order)
            if pipelined:  # the next job runs while this call is away
                self._ahead.append(line, report)
                return None
            slot.asked = clock()
            return await report
        slot.asked = clock()
        nxt: Next | None = (self.id, self.lease_ms, order) if order else None
        delay = retry_delay(job, outcome.no_retry)
        if delay >= 0:  # it may come back later: before the report, as a burst reads it
            state.may_retry(job_id)
        message, text = stored_failure(job, outcome)
        failed = calls.fail(keys, job_id, attempt.token, message, text, delay, nxt)
        ended = await self._redis.call(failed)
        told = failed_text(job, ended.outcome, delay)
        log.info("job %d (%s) %s: %s", job_id, job.type, told, logged(job, outcome.message))
        return ended.next_job

    async def _complete(
        self, job_id: int, job_type: str, token: str, result: str, order: list[str]
    ) -> Claim:
        """Report the attempt done; the next job claimed from ``order`` in the same call."""
        ended, claimed = await self._dispatch.complete(job_id, token, result, order)
        assert ended is not None
        if ended.tally is not None:  # see kue_core.features.tally
            self._state.tally.add(job_type, *ended.tally)
        return claimed


def _running(slot: Slot) -> bool:
    """Whether a task or a thread serves ``slot`` still."""
    if slot.done is not None and not slot.done.done():
        return True
    return slot.thread is not None and slot.thread.is_alive()
