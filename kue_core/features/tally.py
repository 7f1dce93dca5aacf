"""The completions a worker process counts itself, added to Redis in one pipeline at a time.

Every completed job adds to four counters (read by :mod:`kue_core.features.stats`): Kue's total work
time (``<prefix>:stats:work-time``), the minute's count of completions
(``<prefix>:stats:complete:<minute>``, kept ``MINUTE_COUNTER_TTL`` seconds), and in
``<prefix>:stats:totals`` the completions of the type (``complete:<type>``) and of the
duration's bucket (``le:<ms>``/``le:inf``). ``complete.lua`` adds them itself for any other
caller; a worker's own completions it leaves to the worker, which counts them here, in
memory, with the completion's time and duration as the script gives them back, and adds them
every ``TALLY_FLUSH`` seconds (its keeper) and at shutdown. That takes four increments
off the script of every completed job, in Redis's single thread, for a pipeline of a few
increments a second.

The counters lag a busy worker by ``TALLY_FLUSH`` at most, and a worker killed between two
flushes loses its last completions' counts, as it loses its last wait and run figures
(:mod:`kue_core.features.timings`): never a job, which is complete in Redis either way."""

from __future__ import annotations

from collections import Counter, deque
from itertools import repeat
from operator import floordiv
from typing import Any

import redis

from .. import defaults
from ..base.keys import Keys
from ..store.calls import Op, read
from ..store.transport import Transport
from . import timings


class Tally:
    """The completions of one worker process not yet counted in Redis. A slot's
    :meth:`add` only appends to a deque (thread-safe, no lock: it is on every job's path);
    :meth:`flush` sums what it takes off."""

    def __init__(self) -> None:
        self._done: deque[tuple[str, int, int]] = deque()

    def add(self, job_type: str, at_ms: int, duration_ms: int) -> None:
        """One job of ``job_type`` completed at ``at_ms`` (Redis's clock), after running
        ``duration_ms`` (as the job's ``duration`` says)."""
        self._done.append((job_type, at_ms, duration_ms))

    def flushing(self, keys: Keys) -> Op[None]:
        """Add the pending counts to Redis, an operation either transport runs (the keeper's
        round, see :mod:`kue_core.worker.keeper`); kept for the next flush if it fails."""
        done = self._done
        taken = [done.popleft() for _ in range(len(done))]  # others may append meanwhile
        if not taken:
            return
        try:
            yield read(*commands(keys, taken))
        except BaseException:
            # A pipeline that failed part-way may have added some: counting those twice is
            # the lesser harm than losing them all (these are statistics, not jobs).
            done.extend(taken)
            raise

    def flush(self, client: redis.Redis, keys: Keys) -> None:
        """:meth:`flushing` on ``client``."""
        Transport(client, keys).drive(self.flushing(keys))


def commands(keys: Keys, taken: list[tuple[str, int, int]]) -> list[tuple[Any, ...]]:
    """The increments that add the completions ``taken`` (type, at, duration) to Redis."""
    # Counted column by column, each in one C loop (about a tenth of the time of a Python loop
    # over the completions, which was 2% of a busy worker loop's time).
    job_types, ats, durations = zip(*taken, strict=True)
    minutes = Counter(map(floordiv, ats, repeat(60_000)))
    types = Counter(job_types)
    buckets: Counter[str] = Counter()
    for ms, n in Counter(durations).items():  # a few distinct durations
        buckets[timings.LABELS[timings.bucket(ms)]] += n  # as lib/attempts.lua's
    out: list[tuple[Any, ...]] = [("INCRBY", keys.work_time, sum(durations))]
    for minute, n in minutes.items():
        key = keys.minute("complete", minute)
        out += [("INCRBY", key, n), ("EXPIRE", key, defaults.MINUTE_COUNTER_TTL)]
    out += [("HINCRBY", keys.totals, f"complete:{t}", n) for t, n in types.items()]
    out += [("HINCRBY", keys.totals, f"le:{label}", n) for label, n in buckets.items()]
    return out
