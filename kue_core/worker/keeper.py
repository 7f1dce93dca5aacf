"""The keeper of a worker process, a task of its event loop: registers the process under its
worker id and renews its lease, which holds its running jobs, learning which of them it lost
(``heartbeat.lua``, :mod:`kue_core.worker.identity`), returns the jobs of workers whose lease
expired to the queue (``recover.lua``), applies retention and unblocks dependents (their
sweeps), fails attempts that outlive their ``ttl``, gives a new task or thread to a slot whose
handler outlived its attempt, adds the slots' completions, waits and runs to the statistics
once a second, and samples the statistics' history once a minute (whichever keeper of the
queue comes first). :class:`Keeper` is given the queue, the workers' shared state
(:mod:`kue_core.worker.state`), how to give a slot a new task or thread, and the event that
ends it."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable

import redis

from .. import defaults
from ..base.retry import Pauses
from ..features import history
from ..store import calls
from ..store.aio_transport import AsyncTransport
from ..store.calls import Holder, Op
from . import identity
from .attempt import Reason
from .outcome import retry_delay
from .slots import Slot
from .state import Owner, WorkerState
from .strays import strays

log = logging.getLogger(__name__)


class Keeper:
    """The keeper of :class:`kue_core.worker.workers.Workers`: :meth:`run_async`, a task of
    the worker's event loop, until ``closing`` is set, woken early by ``state.bell``;
    ``serve`` gives a slot a new task or thread (``LoopServing.serve``). Its :meth:`round` is
    an operation of Redis steps (see :mod:`kue_core.store.calls`), which the loop's transport
    drives."""

    def __init__(
        self,
        queue: Owner,
        state: WorkerState,
        serve: Callable[[Slot], None],
        closing: threading.Event,
    ) -> None:
        self.queue = queue
        self._state = state
        self._serve = serve
        self._closing = closing
        self._bell = state.bell
        self.id = state.id
        self.lease_ms = state.lease_ms
        self.stall_limit = state.stall_limit
        self._relieved = False  # a slot got a new thread: tell of it (abandoned_threads)
        self._beat_every = self.lease_ms / 3000
        self._sweep_every = min(self.lease_ms / 2000, 5.0)
        # When each part of the round is due next (monotonic seconds): all at once at first.
        self._next = dict.fromkeys(("beat", "sweep", "retain", "deps", "tally", "sample"), 0.0)
        offload = queue.offload
        if offload is not None and offload.store is not None:  # its trash to empty
            self._next["payloads"] = 0.0

    def _pauses(self) -> Pauses:
        # After a Redis error, try again at least as often as a heartbeat is due, so that a
        # short lease does not expire while Redis is back.
        return Pauses(last=min(defaults.RETRY_PAUSE[1], self._beat_every))

    async def run_async(self, transport: AsyncTransport) -> None:
        """The keeper's task on the worker's event loop, its steps on ``transport``: a
        :meth:`round` of what is due, then a wait until the next due time, a ttl or a stuck
        slot's grace, or a ring of the bell, until ``closing`` is set. A Redis error is
        reported, and the round tried again after a pause. It only awaits, so the slots'
        tasks never hold a heartbeat back (an ``async def`` handler that blocks the loop
        does, as it blocks every other task)."""
        pauses = self._pauses()
        while not self._closing.is_set():
            try:
                self._bell.clear()
                wake = await transport.drive(self.round(time.monotonic()))
                pauses.reset()
                self._state.answered()
            except redis.RedisError as e:
                self._state.report(e)
                await self._bell.wait_async(pauses.next())  # rung at the end, too
                continue
            except Exception as e:  # a bug: reported, and the keeper goes on
                self._state.report(e)
                await self._bell.wait_async(pauses.next())
                continue
            if "payloads" in self._next:
                await self._sweep_payloads(time.monotonic())
            await self._bell.wait_async(self._until(wake))

    async def _sweep_payloads(self, now: float) -> None:
        """Delete from the payload store what no job holds any more, when due (the store's
        calls block: in a thread of the loop's pool). A failure is logged; the names wait in
        the trash for the next sweep (see kue_core.features.offloads)."""
        if now < self._next["payloads"]:
            return
        self._next["payloads"] = now + defaults.PAYLOAD_SWEEP_EVERY
        try:
            while (
                await asyncio.get_running_loop().run_in_executor(None, self.queue.sweep_payloads)
                == defaults.PAYLOAD_SWEEP_BATCH
                and not self._closing.is_set()
            ):
                pass  # a full batch: more may wait
        except Exception:
            log.exception("worker %s: the payload store's trash could not be emptied", self.id)

    def _until(self, wake: float | None) -> float:
        """Seconds until the next round is due: the earliest of the parts' due times and
        ``wake`` (a ttl, or a stuck slot's grace)."""
        until = min(self._next.values())
        if wake is not None:
            until = min(until, wake)
        return max(0.0, until - time.monotonic())

    def round(self, now: float) -> Op[float | None]:
        """One round of what is due at ``now`` (an operation either transport drives): the
        attempts past their ttl failed, stuck slots relieved, then each of the heartbeat, the
        sweeps, the figures' flush and the history's sample that is due. Returns when to look
        again for a ttl or a stuck slot, if any. Each part's next due time moves on once it
        is done, so a round that fails part-way does the rest in the next."""
        keys, due = self.queue.keys, self._next
        wake = yield from self._expire(now)
        relieve = self.relieve(now)
        if relieve is not None:
            wake = relieve if wake is None else min(wake, relieve)
        asked = self._bell.beat_asked() or self._relieved
        if now >= due["beat"] or asked:
            self._relieved = False
            yield from self._heartbeat()
            due["beat"] = now + self._beat_every
        doubted = self._state.doubted
        if doubted is not None and now >= doubted + self.lease_ms / 1000:
            yield from self._strays()
            if self._state.doubted == doubted:  # no call failed since: nothing more to doubt
                self._state.doubted = None
        if now >= due["sweep"]:
            yield calls.recover(keys, self.stall_limit, defaults.SWEEP_LIMIT)
            due["sweep"] = now + self._sweep_every
        if now >= due["retain"]:  # see kue_core.features.retention
            yield calls.retain(keys, defaults.SWEEP_LIMIT)
            due["retain"] = now + defaults.RETENTION_SWEEP
        if now >= due["deps"]:  # see kue_core.features.flows
            yield calls.unblock(keys, defaults.SWEEP_LIMIT)
            due["deps"] = now + defaults.DEPS_SWEEP
        if now >= due["tally"]:  # the slots' completions, waits and runs
            yield from self._state.tally.flushing(keys)
            yield from self._state.timings.flushing(keys)
            due["tally"] = now + defaults.TALLY_FLUSH
        if now >= due["sample"]:
            yield from self._sample()
            due["sample"] = now + defaults.HISTORY_CHECK
        return wake

    def _sample(self) -> Op[None]:
        """The history's sample of the minute, if due (see kue_core.features.history): a
        failure other than Redis's is logged, never let stop the keeper's other work."""
        try:
            yield from history.sample(self.queue.keys)
        except redis.RedisError:
            raise
        except Exception:
            log.exception("worker %s: the statistics' history could not be sampled", self.id)

    def _heartbeat(self) -> Op[None]:
        with self._state.lock:
            running = [a for a in self._state.attempts.values() if not a.over]
        reply = yield self._state.beat_call([(a.job_id, a.token) for a in running])
        if isinstance(reply, Holder):  # another process has the id now
            self._state.stop(0, identity.taken_over(self.id, reply), logging.ERROR)
            return
        lost = set(reply)
        for attempt in running:
            if (attempt.job_id, attempt.token) in lost:
                # Recovered, moved or removed meanwhile: its result will be dropped.
                self._state.end(attempt, Reason.LEASE_LOST)

    def _strays(self) -> Op[None]:
        """Give back the jobs claimed for this process whose claim's reply was lost (see
        :mod:`kue_core.worker.strays`)."""
        with self._state.lock:
            running = {job_id for job_id, _ in self._state.attempts}
        for job_id, token in (yield from strays(self.queue.keys, self.id, running, self.lease_ms)):
            given = yield calls.release(self.queue.keys, job_id, token)
            if given:
                log.warning(
                    "worker %s: job %d was claimed for this process, but the reply was lost "
                    "(Redis was cut off): given back to wait",
                    self.id,
                    job_id,
                )

    def _expire(self, now: float) -> Op[float | None]:
        """Fail attempts past their ttl; return the next deadline, if any."""
        with self._state.lock:
            timed = [a for a in self._state.attempts.values() if a.deadline is not None]
        upcoming = []
        for attempt in timed:
            deadline = attempt.deadline
            assert deadline is not None
            if deadline > now:
                upcoming.append(deadline)
            elif self._state.end(attempt, Reason.TTL):
                ran = round((now - attempt.began) * 1000)
                self._state.timings.add(attempt.job.type, "run", ran, attempt.job.started_at or 0)
                message = "TTL exceeded"
                text = f"{message}: the attempt ran longer than its ttl of {attempt.ttl_ms} ms"
                delay = retry_delay(attempt.job, False)
                yield calls.fail(
                    self.queue.keys, attempt.job_id, attempt.token, message, text, delay, None
                )
        return min(upcoming, default=None)

    def relieve(self, now: float) -> float | None:
        """Give a new thread to each slot whose ``def`` handler still runs ``STOP_GRACE``
        after its attempt ended (a thread cannot be stopped), while fewer than
        ``ABANDONED_THREADS`` are left running so; past that, the slot waits for its handler to
        return. Returns when to look again for a handler still within its grace. The keeper's
        round calls it; it may be called at any moment."""
        upcoming: list[float] = []
        state = self._state
        with state.lock:
            if state.stopping.is_set():
                return None
            for slot in state.slots:
                attempt = slot.attempt
                if attempt is None or not attempt.stopped or not slot.in_thread:
                    continue
                assert attempt.ended_at is not None
                if now < attempt.ended_at + defaults.STOP_GRACE:
                    upcoming.append(attempt.ended_at + defaults.STOP_GRACE)
                    continue
                if state.abandoned >= defaults.ABANDONED_THREADS:
                    if not slot.held_back:
                        slot.held_back = True
                        log.warning(
                            "job %d (%s): the handler still runs after its attempt ended (%s);"
                            " %d threads are left running so already: %s waits for it",
                            attempt.job_id,
                            attempt.job.type,
                            attempt.reason,
                            state.abandoned,
                            slot.name,
                        )
                    continue
                state.abandoned += 1
                slot.attempt, slot.held_back = None, False
                self._serve(slot)
                self._relieved = True
                log.warning(
                    "job %d (%s): the handler still runs after its attempt ended (%s); it is "
                    "left to finish and %s goes on in a new thread (%d left running)",
                    attempt.job_id,
                    attempt.job.type,
                    attempt.reason,
                    slot.name,
                    state.abandoned,
                )
        return min(upcoming, default=None)
