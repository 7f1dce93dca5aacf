"""The completions a worker process counts itself, added to Redis in one pipeline at a time.

Every completed job adds to four counters (read by :mod:`kue_core.stats`): Kue's total work
time (``<prefix>:stats:work-time``), the minute's count of completions
(``<prefix>:stats:complete:<minute>``, kept ``MINUTE_COUNTER_TTL`` seconds), and in
``<prefix>:stats:totals`` the completions of the type (``complete:<type>``) and of the
duration's bucket (``le:<ms>``/``le:inf``). ``complete.lua`` adds them itself when asked to
by anyone else; a worker's own completions it leaves to the worker, which counts them here,
in memory, with the completion's time and duration as the script gives them back, and adds
them with its heartbeat, when a slot runs out of work and at shutdown. That takes four
increments off the script of every completed job, in Redis's single thread, for a pipeline
of a few increments now and then.

The counters lag a busy worker by a heartbeat at most (a third of its lease), and a worker
killed between two flushes loses its last completions' counts, as it loses its last wait and
run figures (:mod:`kue_core.timings`): never a job, which is complete in Redis either way.
"""

from __future__ import annotations

import bisect
import threading
from collections import Counter

import redis

from . import defaults
from .keys import Keys

_BOUNDS = defaults.DURATION_BUCKETS_MS
_LABELS = (*(str(b) for b in _BOUNDS), "inf")


class _Counts:
    __slots__ = ("buckets", "minutes", "types", "work_time")

    def __init__(self) -> None:
        self.work_time = 0
        self.minutes: Counter[int] = Counter()
        self.types: Counter[str] = Counter()
        self.buckets: Counter[str] = Counter()

    def __bool__(self) -> bool:
        return bool(self.types)

    def merge(self, other: _Counts) -> None:
        self.work_time += other.work_time
        self.minutes.update(other.minutes)
        self.types.update(other.types)
        self.buckets.update(other.buckets)


class Tally:
    """The completions of one worker process not yet counted in Redis."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pending = _Counts()

    def add(self, job_type: str, at_ms: int, duration_ms: int) -> None:
        """One job of ``job_type`` completed at ``at_ms`` (Redis's clock), after running
        ``duration_ms`` (as the job's ``duration`` says)."""
        label = _LABELS[bisect.bisect_left(_BOUNDS, duration_ms)]  # as lib.lua's bucket()
        with self._lock:
            pending = self._pending
            pending.work_time += duration_ms
            pending.minutes[at_ms // 60_000] += 1
            pending.types[job_type] += 1
            pending.buckets[label] += 1

    def flush(self, client: redis.Redis, keys: Keys) -> None:
        """Add the pending counts to Redis; kept for the next flush if Redis fails."""
        with self._lock:
            if not self._pending:
                return
            pending, self._pending = self._pending, _Counts()
        pipe = client.pipeline(transaction=False)
        pipe.incrby(keys.work_time, pending.work_time)
        for minute, n in pending.minutes.items():
            key = keys.minute("complete", minute)
            pipe.incrby(key, n)
            pipe.expire(key, defaults.MINUTE_COUNTER_TTL)
        for job_type, n in pending.types.items():
            pipe.hincrby(keys.totals, f"complete:{job_type}", n)
        for label, n in pending.buckets.items():
            pipe.hincrby(keys.totals, f"le:{label}", n)
        try:
            pipe.execute()
        except redis.RedisError:
            # A pipeline that failed part-way may have added some: counting those twice is
            # the lesser harm than losing them all (these are statistics, not jobs).
            with self._lock:
                pending.merge(self._pending)
                self._pending = pending
            raise
