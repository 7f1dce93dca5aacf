"""Wait and run statistics per job type and UTC day, as qless keeps them per queue.

A worker process adds each job it runs: how long it waited (``waited`` in the claim's reply:
from its last change while waiting, that is saved, promoted, retried or released, to its
start) and how long the attempt ran (the handler's run, to its outcome). It keeps them in
memory and adds them to Redis with its heartbeat, a pipeline of increments per type, day and
kind: the job's own path costs Redis nothing. A worker killed between two heartbeats loses
its last seconds of figures, never a job. The day is that of the job's start on the Redis
server's clock (``started_at``).

Keys (``Keys.timings``): ``<prefix>:stats:<type>:<YYYY-MM-DD>:wait|run``, hashes of ``count``,
``sum`` and ``sumsq`` (ms, for the mean and the standard deviation) and ``le:<ms>``/``le:inf``
(counts per ``DURATION_BUCKETS_MS`` bucket), kept ``TIMINGS_DAYS`` days. Read with
``Queue.timings()``.
"""

from __future__ import annotations

import bisect
import threading
from datetime import UTC, datetime
from typing import Any

import redis

from .. import defaults
from ..base.keys import Keys
from ..store.calls import Op, read
from ..store.transport import Transport

_BOUNDS = defaults.DURATION_BUCKETS_MS
#: The buckets' labels, as Prometheus's ``le`` (and lib/attempts.lua's ``duration_bucket``).
LABELS = (*(str(b) for b in _BOUNDS), "inf")


def bucket(ms: int) -> int:
    """The index in :data:`LABELS` of the duration bucket of ``ms``."""
    return bisect.bisect_left(_BOUNDS, ms)


def day_of(ms: int) -> str:
    """The UTC day (``YYYY-MM-DD``) of a time in ms since the epoch."""
    return datetime.fromtimestamp(ms / 1000, UTC).date().isoformat()


class _Sums:
    __slots__ = ("buckets", "count", "squares", "total")

    def __init__(self) -> None:
        self.count = 0
        self.total = 0
        self.squares = 0.0
        self.buckets = [0] * len(LABELS)


class Recorder:
    """The figures of one worker process not yet added to Redis."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pending: dict[tuple[str, str, str], _Sums] = {}
        self._day_ms = -1  # the day of the last sample, cached: one date per day, not per job
        self._day = ""

    def add(self, job_type: str, kind: str, ms: int, started_at: int) -> None:
        """One wait or run (``kind``) of ``ms`` of a job that started at ``started_at`` (ms)."""
        with self._lock:
            self._add(self._day_of(started_at), job_type, kind, ms)

    def attempt(self, job_type: str, waited: int, ran: int, started_at: int) -> None:
        """The wait and the run (ms) of one attempt at a job that started at ``started_at``:
        :meth:`add` of both, in one go (every job's path)."""
        with self._lock:
            day = self._day_of(started_at)
            self._add(day, job_type, "wait", waited)
            self._add(day, job_type, "run", ran)

    def _day_of(self, started_at: int) -> str:
        if started_at // 86_400_000 != self._day_ms:
            self._day_ms, self._day = started_at // 86_400_000, day_of(started_at)
        return self._day

    def _add(self, day: str, job_type: str, kind: str, ms: int) -> None:
        sums = self._pending.get((job_type, day, kind))
        if sums is None:
            sums = self._pending[job_type, day, kind] = _Sums()
        ms = max(0, ms)
        sums.count += 1
        sums.total += ms
        sums.squares += float(ms) * ms
        sums.buckets[bucket(ms)] += 1

    def flushing(self, keys: Keys) -> Op[None]:
        """Add the pending figures to Redis, an operation either transport runs (the
        keeper's round); kept for the next flush if it fails."""
        with self._lock:
            pending, self._pending = self._pending, {}
        if not pending:
            return
        try:
            yield read(*commands(keys, pending))
        except BaseException:
            self._restore(pending)
            raise

    def flush(self, client: redis.Redis, keys: Keys) -> None:
        """:meth:`flushing` on ``client``."""
        Transport(client, keys).drive(self.flushing(keys))

    def _restore(self, pending: dict[tuple[str, str, str], _Sums]) -> None:
        # A pipeline that failed part-way may have added some: counting them twice is the
        # lesser harm than losing them all (these are statistics, not jobs).
        with self._lock:
            for key, sums in pending.items():
                mine = self._pending.setdefault(key, _Sums())
                mine.count += sums.count
                mine.total += sums.total
                mine.squares += sums.squares
                mine.buckets = [a + b for a, b in zip(mine.buckets, sums.buckets, strict=True)]


def commands(keys: Keys, pending: dict[tuple[str, str, str], _Sums]) -> list[tuple[Any, ...]]:
    """The increments that add the ``pending`` figures (by type, day, kind) to Redis."""
    out: list[tuple[Any, ...]] = []
    for (job_type, day, kind), sums in pending.items():
        key = keys.timings(job_type, day, kind)
        out += [
            ("HINCRBY", key, "count", sums.count),
            ("HINCRBY", key, "sum", sums.total),
            ("HINCRBYFLOAT", key, "sumsq", sums.squares),
        ]
        for label, n in zip(LABELS, sums.buckets, strict=True):
            if n:
                out.append(("HINCRBY", key, f"le:{label}", n))
        out.append(("EXPIRE", key, defaults.TIMINGS_TTL))
    return out
