"""A slot served by a thread of its own: the thread claims a job, runs its handler, reports how it
ended and claims the next one in the same call, on a connection of its own; it waits on the
type's wake-up lists when there is none.
:class:`Serving` is given the queue (what the worker side uses of it), the workers' shared state
(:mod:`kue_core.worker.state`) and what runs the handlers
(:class:`kue_core.worker.slots.HandlerRunner`)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .. import defaults, tracing
from ..base.retry import Pauses
from ..jobs.job import Job
from ..store import calls
from ..store.calls import PAUSED, PINS, Call, Claim, Held, Holder, Lease, Next, Waits
from . import ahead
from .attempt import Attempt, Reason
from .outcome import (
    Done,
    Failed,
    Limited,
    Outcome,
    Suspended,
    logged,
    retry_delay,
    stored_failure,
    stored_result,
    suspendable,
    unreadable,
)
from .posting import Posts, Streak
from .slots import HandlerRunner, Slot, clock
from .state import Owner, WorkerState

if TYPE_CHECKING:
    from opentelemetry.trace import Span

    from ..base.keys import Keys

log = logging.getLogger(__name__)


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


def failed_text(job: Job, result: str, delay: int) -> str:
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


#: Called by a slot's thread before each job, with the slot, its turn and the job claimed
#: by the last report (if any): whether the event loop serves the slot on from here (see
#: :meth:`kue_core.worker.tasks.LoopServing.take_back`), and the thread ends.
TakeBack = Callable[[Slot, int, Claim], bool]


class Serving:
    """The threads of the ``def`` slots served best by a thread of their own (see
    :mod:`kue_core.worker.tasks`): :meth:`start` starts one for a slot, which serves it until
    shutdown (``state.stopping``), until the keeper gives the slot a new task or thread
    because this one's handler outlived its attempt (the slot's ``turn`` moves on), or until
    the event loop takes the slot back."""

    def __init__(self, queue: Owner, state: WorkerState, runner: HandlerRunner, posts: Posts):
        self.queue = queue
        self.scripts = queue.scripts
        self._state = state
        self._runner = runner
        self._posts = posts  # how the only slot claims ahead
        self.id = state.id
        self.lease_ms = state.lease_ms

    def start(self, slot: Slot, turn: int, nxt: Claim, back: TakeBack) -> None:
        """Start a thread serving ``slot`` in its ``turn``, from the job ``nxt`` if one was
        claimed for it, until ``back`` says the loop takes the slot back (see ``TakeBack``)."""
        args = (slot, turn, nxt, back)
        slot.thread = threading.Thread(target=self._work, args=args, name=slot.name, daemon=True)
        slot.thread.start()

    def _work(self, slot: Slot, turn: int, nxt: Claim, back: TakeBack) -> None:
        """A slot's thread: claim, run, report, until shutdown, until the slot goes on in a
        new task or thread because this one's handler outlived its attempt, or until the event
        loop takes it back. ``nxt``: a job claimed by the last report, in the same call."""
        state = self._state
        pauses = Pauses()
        if slot.child is not None:
            try:
                slot.child.start()
            except Exception as e:  # the first job will try again, and fail if it cannot
                state.report(e)
        streak = Streak()
        while not state.stopping.is_set() and slot.turn == turn:
            if streak.posting is not None and not isinstance(nxt, tuple):
                # The job a call posted claimed, unless the loop took the call over.
                nxt = self._posts.next(slot, streak, self._posts.taken(streak))
            if streak.posting is None and back(slot, turn, nxt):
                return  # the loop serves the slot on, from nxt
            order: list[str] = []
            if not isinstance(nxt, tuple):  # else a job claimed in the last report's call
                order = self._order(slot)
                if not order:  # paused in this process only
                    held = [state.held.get(t) for t in slot.types]
                    event = next((e for e in held if e is not None), state.stopping)
                    event.wait(defaults.IDLE_WAIT)
                    continue
            try:
                if order:
                    slot.asked = clock()
                claimed = nxt if order == [] else self._claim(order)
                nxt = None
                if isinstance(claimed, tuple) and claimed[1].get("type") in state.held:
                    self._give_back(claimed)  # paused here while the claim was on its way
                elif isinstance(claimed, tuple):
                    # Others were waiting when it came in a report's call: claim ahead.
                    nxt = self._run(slot, *claimed, streak, order == [])
                else:
                    self._idle(slot, order, claimed)
                pauses.reset()
            except Exception as e:
                # Redis is down or restarting (or a bug): a job this slot held comes back
                # through its lease; the slot keeps trying until Redis answers again.
                state.report(e)
                state.stopping.wait(pauses.next())
        self._give_back(nxt)  # a job claimed as the slot stopped, if any
        posting = self._posts.taken(streak)
        if posting is not None:
            self._give_back(self._posts.take(streak, posting))
        if slot.turn != turn:
            with state.lock:
                state.abandoned -= 1
                left = state.abandoned
            log.info("a handler left running on %s returned (%d still running)", slot.name, left)
            state.bell.ring(beat=True)  # a stuck slot may get a new thread now

    def _claim(self, order: list[str]) -> Claim:
        """The best waiting job of the types in ``order`` (see ``claim.lua``)."""
        return self.scripts.call(calls.claim(self.queue.keys, order, self.id, self.lease_ms))

    def _give_back(self, claimed: Claim) -> None:
        """Release a job claimed but not run (not counted as an attempt)."""
        if isinstance(claimed, tuple):
            job_id, fields = claimed
            release = calls.release(self.queue.keys, job_id, fields.get("lease", ""))
            self._state.safely(self.scripts.call, release)

    def _order(self, slot: Slot) -> list[str]:
        """The types the slot claims from next, in order, leaving out those paused here."""
        order = slot.reserver.order()
        if self._state.held:
            order = [t for t in order if t not in self._state.held]
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

    def _run(
        self, slot: Slot, job_id: int, fields: dict[str, str], streak: Streak, more: bool
    ) -> Claim:
        """Run the handler on one claimed job; report how it ended, unless the attempt was
        ended elsewhere first; return the next job, claimed in the same call or ahead (see
        :mod:`kue_core.worker.posting`; ``more``: the job came with others waiting). Traced,
        when traces are on (see :mod:`kue_core.tracing`)."""
        if self._state.ended_before(job_id, fields) or self._stale(slot, job_id, fields):
            return None
        if not tracing.enabled:
            return self._attempt(slot, job_id, fields, None, streak, more)
        with tracing.consuming(job_id, fields.get("type", ""), fields) as span:
            return self._attempt(slot, job_id, fields, span, streak, more)

    def _stale(self, slot: Slot, job_id: int, fields: dict[str, str]) -> bool:
        """Whether a job claimed for ``slot`` is another worker's by now: this process was held
        up (SIGSTOP, a long pause, a suspended machine) between the claim and now, past the
        lease, and the job was recovered meanwhile; its handler must not start here. Redis is
        asked only when that long has passed (a third of the lease, as the heartbeat's
        period): a heartbeat of this job alone, which renews the process's lease and says
        whether the job is still ours."""
        away = held_up(slot, self.lease_ms)
        if away is None:
            return False
        lost = self._state.beat([(job_id, fields.get("lease", ""))])
        return stale(lost, job_id, fields, away)

    def _attempt(
        self,
        slot: Slot,
        job_id: int,
        fields: dict[str, str],
        span: Span | None,
        streak: Streak,
        more: bool,
    ) -> Claim:
        state = self._state
        keys = self.queue.keys
        posts = self._posts
        if streak.posting is None and more and posts.ok(slot):
            order = self._order(slot)
            if order:  # the job after this one, claimed while this one runs
                posts.post(slot, streak, calls.claim(keys, order, self.id, self.lease_ms))
        job = Job.from_hash(self.queue, job_id, fields)
        grace = defaults.CHILD_START_GRACE if slot.child is not None else 0.0
        attempt = Attempt(job, fields.get("lease", ""), job.ttl(), grace=grace)
        started_at = job.started_at or 0
        waited = int(fields.get("waited") or 0)
        with state.lock:
            state.attempts[job_id, attempt.token] = attempt
            slot.attempt = attempt
        if attempt.deadline is not None:
            state.bell.ring()  # the keeper watches the deadline
        outcome = unreadable(job) or self._runner.call(slot, attempt, fields, self.queue.middleware)
        took = time.monotonic() - attempt.began
        slot.quick = took < ahead.QUICK_S
        with state.lock:  # the handler returned: this thread is not stuck, and it is not running
            if slot.attempt is attempt:
                slot.attempt, slot.held_back = None, False
            state.attempts.pop((job_id, attempt.token), None)
        # The call claiming the next job, unless the loop took it behind a slow handler.
        claiming = posts.taken(streak)
        ours = attempt.end(Reason.DONE if isinstance(outcome, Done) else Reason.FAILED)
        if span is not None:
            traced(span, attempt, outcome)
        if not ours:  # ended elsewhere: reported by whoever ended it
            state.timings.add(job.type, "wait", waited, started_at)
            return posts.next(slot, streak, claiming)
        state.timings.attempt(job.type, waited, round(took * 1000), started_at)
        if isinstance(outcome, Limited):  # back to wait, no attempt counted; the type waits
            log.info("job %d (%s): %s", job_id, job.type, logged(job, outcome.message))
            state.may_retry(job_id)
            self.scripts.call(calls.release(keys, job_id, attempt.token, outcome.retry_in_ms))
            self._give_back(posts.next(slot, streak, claiming))
            return None
        if isinstance(outcome, Suspended):
            outcome = suspendable(job, outcome)
        if isinstance(outcome, Suspended):  # waits for a signal, holding no slot
            self.scripts.call(suspended(keys, job_id, attempt.token, outcome))
            self._give_back(posts.next(slot, streak, claiming))
            return None
        # The report claims the slot's next job in the same call; or, when the next one is
        # claimed already, the one after it, posted while the next one runs (a quick handler,
        # the only slot), or none.
        stored = stored_result(job, outcome.result) if isinstance(outcome, Done) else None
        if isinstance(stored, Failed):  # a result larger than the queue takes
            outcome = stored
        order = [] if state.stopping.is_set() else self._order(slot)
        posting = claiming is not None and isinstance(outcome, Done) and posts.ok(slot)
        nxt: Next | None = None
        if claiming is not None and not posting:
            pass  # the next job is claimed already
        elif order == [job.type]:
            nxt = (self.id, self.lease_ms)  # the finished job's type, as the script assumes
        elif order:
            nxt = (self.id, self.lease_ms, order)
        if isinstance(outcome, Done):
            log.debug("job %d (%s) complete", job_id, job.type)
            result = stored if isinstance(stored, str) else ""
            done = calls.complete(keys, job_id, attempt.token, result, nxt, tallied=True)
            if posting:
                assert claiming is not None
                return posts.post_behind(slot, streak, done, job.type, claiming)
            slot.asked = clock()
            ended = self.scripts.call(done)
            if ended.tally is not None:  # see kue_core.features.tally
                state.tally.add(job.type, *ended.tally)
        else:
            slot.asked = clock()
            delay = retry_delay(job, outcome.no_retry)
            if delay >= 0:  # it may come back later: before the report, as a burst reads it
                state.may_retry(job_id)
            message, text = stored_failure(job, outcome)
            failed = calls.fail(keys, job_id, attempt.token, message, text, delay, nxt)
            ended = self.scripts.call(failed)
            told = failed_text(job, ended.outcome, delay)
            log.info("job %d (%s) %s: %s", job_id, job.type, told, logged(job, outcome.message))
        return ended.next_job if claiming is None else posts.next(slot, streak, claiming)


def suspended(keys: Keys, job_id: int, token: str, outcome: Suspended) -> Call[str]:
    """The call that ends an attempt waiting for a signal (``WaitForSignal``)."""
    log.debug("job %d waits for signal %s", job_id, outcome.name)
    return calls.suspend(keys, job_id, token, outcome.name, outcome.timeout_ms, outcome.on_timeout)


def held_up(slot: Slot, lease_ms: int) -> float | None:
    """How long ago ``slot`` asked for the job it got (s), when that is a third of the lease
    or more (see ``Serving._stale``); else None."""
    mono, wall = slot.asked
    away = max(time.monotonic() - mono, time.time() - wall)
    return away if away * 1000 >= lease_ms / 3 else None


def stale(lost: list[Lease] | Holder, job_id: int, fields: dict[str, str], away: float) -> bool:
    """Whether a heartbeat's answer ``lost`` says the job is another worker's by now (said
    in the log)."""
    if not isinstance(lost, Holder) and (job_id, fields.get("lease", "")) not in lost:
        return False
    log.warning(
        "job %d (%s): claimed %.1f s ago, and this process was held up past its lease "
        "since; another worker has the job now: not run here",
        job_id,
        fields.get("type", ""),
        away,
    )
    return True


def traced(span: Span, attempt: Attempt, outcome: Outcome) -> None:
    """Tell the attempt's span how it ended (see :func:`kue_core.tracing.ended`)."""
    if isinstance(outcome, Limited) and attempt.reason == Reason.FAILED:
        tracing.ended(span, "limited")
    elif isinstance(outcome, Suspended) and attempt.reason == Reason.FAILED:
        tracing.ended(span, "suspended")
    elif isinstance(outcome, Failed) and attempt.reason == Reason.FAILED:
        tracing.ended(span, str(attempt.reason), outcome.message, outcome.text)
    elif attempt.reason == Reason.DONE:
        tracing.ended(span, "complete")  # the job's state word, as "failed" is
    else:
        tracing.ended(span, str(attempt.reason))
