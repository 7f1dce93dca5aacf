"""The keeper thread of a worker process: renews the leases of its running jobs and registers
the process under its worker id (``heartbeat.lua``, :mod:`kue_core.worker.identity`), returns jobs
whose lease expired to the queue (``recover.lua``), applies retention and unblocks dependents
(their sweeps), fails attempts that outlive their ``ttl``, gives a new thread to a slot whose
handler outlived its attempt, adds the slots' completions, waits and runs to the
statistics once a second, and samples the statistics' history once a minute (whichever
keeper of the queue comes first)."""

from __future__ import annotations

import logging
import threading
import time

import redis

from .. import defaults
from ..base.retry import Pauses
from ..features import history
from ..store.claims import Holder
from . import identity
from .attempt import Reason
from .state import WorkerState

log = logging.getLogger(__name__)


class Keeper(WorkerState):
    """The keeper thread of :class:`kue_core.worker.workers.Workers`."""

    def _keep(self) -> None:
        beat_every = self.lease_ms / 3000
        # After a Redis error, try again at least as often as a heartbeat is due, so that a
        # short lease does not expire while Redis is back.
        pauses = Pauses(last=min(defaults.RETRY_PAUSE[1], beat_every))
        sweep_every = min(self.lease_ms / 2000, 5.0)
        next_beat = next_sweep = next_retain = next_deps = next_tally = next_sample = 0.0
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
                if now >= next_retain:  # see kue_core.features.retention
                    self.scripts.retain(defaults.SWEEP_LIMIT)
                    next_retain = now + defaults.RETENTION_SWEEP
                if now >= next_deps:  # see kue_core.features.flows
                    self.scripts.unblock(defaults.SWEEP_LIMIT)
                    next_deps = now + defaults.DEPS_SWEEP
                if now >= next_tally:  # the slots' completions, waits and runs
                    self._tally.flush(self.queue.client, self.queue.keys)
                    self._timings.flush(self.queue.client, self.queue.keys)
                    next_tally = now + defaults.TALLY_FLUSH
                if now >= next_sample:
                    self._sample()
                    next_sample = now + defaults.HISTORY_CHECK
                pauses.reset()
                self._answered()
            except redis.RedisError as e:
                self._report(e)
                self._closed.wait(pauses.next())
                continue
            until = min(next_beat, next_sweep, next_deps, next_tally, next_sample)
            if wake is not None:
                until = min(until, wake)
            self._tick.wait(max(0.0, until - time.monotonic()))

    def _sample(self) -> None:
        """The history's sample of the minute, if due (see kue_core.features.history): a
        failure other than Redis's is logged, never let stop the keeper's other work."""
        try:
            self.scripts.drive(history.sample(self.queue.keys))
        except redis.RedisError:
            raise
        except Exception:
            log.exception("worker %s: the statistics' history could not be sampled", self.id)

    def _heartbeat(self) -> None:
        with self._lock:
            running = [a for a in self._attempts.values() if not a.over]
        reply = self._beat([(a.job_id, a.token) for a in running])
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
