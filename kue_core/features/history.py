"""The statistics' history: per type and for all types, jobs completed and failed, the backlog
(jobs waiting and delayed) and the wait and run times (p50, p95, p99), a point a minute for a
day, an hour for a week and a day for 30 days; and when the versions serving a type changed
(deploy markers). Read with ``Queue.stats_history()``, ``GET /api/history``, the dashboard's
charts and ``kue stats --history``.

No job pays for it. Once a minute one worker process (whichever keeper comes first: see
``sample.lua``) reads the counters the jobs already keep (``complete:<type>`` and
``failed:<type>`` in ``<p>:stats:totals``, the day's wait and run histograms of
:mod:`kue_core.features.timings`), the backlog of each type (two ``ZCARD``) and the versions
of the live workers, and writes the difference from the last sample as the point of the
minute that just ended; the point of its hour and of its day grow by it. Work done while no
worker ran shows in the first minute sampled after. A type with nothing to show that minute
writes nothing. The first sample ever counts the jobs a new queue has finished so far (the
minute counters, kept a day, add up to the totals: every job counted ended within the day);
on a deployment older than its history, whose totals hold months, it is where the next one
starts from, and shows the backlog alone.

A point is a short text, ``complete,failed,waiting,delayed;wait;run``, where each of ``wait``
and ``run`` is ``sum ms@first bucket:count,count,...`` (the counts of the buckets of
``DURATION_BUCKETS_MS`` from the first not empty to the last) or empty. Waiting and delayed
are the backlog when sampled, for a minute; the highest of its minutes for an hour or a day.
The points live in hashes (``Keys.series``) of 60 minutes, 24 hours or 30 days, each
expiring once the range it serves (a day, a week, 30 days) has passed: the history is bounded
by time, whatever the traffic. ``bench/history_memory.py`` measures it at its largest.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from .. import defaults
from ..base.errors import InvalidJob
from ..base.keys import Keys
from ..base.values import validate_type
from ..store import calls
from ..store.calls import Op, hash_reply, read
from . import stats
from .timings import LABELS, day_of

_BOUNDS = defaults.DURATION_BUCKETS_MS
_WIDTH = 2 + len(LABELS)  # a histogram: count, sum, then the buckets
_MINUTE, _HOUR, _DAY = 60_000, 3_600_000, 86_400_000


@dataclass(frozen=True)
class Step:
    """One resolution: its code in the keys, length (ms), points per hash and how long a
    hash is kept after its last write (s)."""

    code: str
    ms: int
    per_key: int
    keep_s: int


STEPS = {
    "m": Step("m", _MINUTE, 60, 86_400 + 2 * 3_600),
    "h": Step("h", _HOUR, 24, 8 * 86_400 + 3_600),
    "d": Step("d", _DAY, 30, 31 * 86_400),
}
#: The ranges one may ask for: (step, points).
RANGES = {"1h": ("m", 60), "24h": ("m", 1440), "7d": ("h", 168), "30d": ("d", 30)}
#: The name of all types' figures among a type's (no type's name has a control character).
ALL = "\x00all"
_QUANTILES = {"p50_ms": 0.5, "p95_ms": 0.95, "p99_ms": 0.99}


@dataclass
class Point:
    """The figures of one type (or all) over one step."""

    complete: int = 0
    failed: int = 0
    waiting: int | None = None
    delayed: int | None = None
    wait: list[int] = field(default_factory=lambda: [0] * _WIDTH)
    run: list[int] = field(default_factory=lambda: [0] * _WIDTH)

    def empty(self) -> bool:
        return not (self.complete or self.failed or self.waiting or self.delayed) and not (
            self.wait[0] or self.run[0]
        )

    def add(self, other: Point) -> None:
        """Grow by ``other``: counts add up, the backlog keeps the higher."""
        self.complete += other.complete
        self.failed += other.failed
        self.waiting = _higher(self.waiting, other.waiting)
        self.delayed = _higher(self.delayed, other.delayed)
        self.wait = _sum(self.wait, other.wait)
        self.run = _sum(self.run, other.run)

    def encode(self) -> str:
        backlog = ",".join("" if v is None else str(v) for v in (self.waiting, self.delayed))
        head = f"{self.complete},{self.failed},{backlog}"
        return f"{head};{_encode_hist(self.wait)};{_encode_hist(self.run)}"

    @classmethod
    def decode(cls, text: str) -> Point:
        """A point as :meth:`encode` wrote it; an empty one if it is not one."""
        try:
            head, wait, run = text.split(";")
            c, f, w, d = head.split(",")
            return cls(
                int(c), int(f), int(w) if w else None, int(d) if d else None,
                _decode_hist(wait), _decode_hist(run),
            )  # fmt: skip
        except (ValueError, IndexError):
            return cls()

    def as_dict(self, at: int | None) -> dict[str, Any]:
        out: dict[str, Any] = {} if at is None else {"at": at}
        out.update(complete=self.complete, failed=self.failed)
        out.update(waiting=self.waiting, delayed=self.delayed)
        out.update(wait=summary(self.wait), run=summary(self.run))
        return out


def _higher(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else max(a, b)


def _encode_hist(h: list[int]) -> str:
    """``sum@first:n,n,...``: the sum (ms), then the counts of the buckets from the first
    not empty to the last (the count is theirs: a histogram's count is its buckets' sum)."""
    filled = [i for i, n in enumerate(h[2:]) if n]
    if not filled:
        return ""
    counts = ",".join(str(n) for n in h[2 + filled[0] : 3 + filled[-1]])
    return f"{h[1]}@{filled[0]}:{counts}"


def _decode_hist(text: str) -> list[int]:
    h = [0] * _WIDTH
    if text:
        total, _, rest = text.partition("@")
        first, _, counts = rest.partition(":")
        for i, n in enumerate(counts.split(","), start=2 + int(first)):
            h[i] = int(n)
        h[0], h[1] = sum(h[2:]), int(total)
    return h


def quantile(h: list[int], q: float) -> float | None:
    """The ``q`` quantile (ms) of a histogram, interpolated inside its bucket as Prometheus's
    ``histogram_quantile`` does; past the last bound, that bound. None when it is empty."""
    count = sum(h[2:])
    if not count:
        return None
    rank, seen = q * count, 0
    for i, n in enumerate(h[2:]):
        if n and seen + n >= rank:
            if i == len(_BOUNDS):
                return float(_BOUNDS[-1])
            low = _BOUNDS[i - 1] if i else 0
            return round(low + (_BOUNDS[i] - low) * (rank - seen) / n, 1)
        seen += n
    return float(_BOUNDS[-1])


def summary(h: list[int]) -> dict[str, Any]:
    """count, mean and the three quantiles (ms) of a histogram."""
    out: dict[str, Any] = {"count": h[0], "mean_ms": round(h[1] / h[0], 1) if h[0] else None}
    out.update({name: quantile(h, q) for name, q in _QUANTILES.items()})
    return out


# -- sampling ---------------------------------------------------------------------------------
def _hist(raw: dict[str, str]) -> list[int]:
    """A day's wait or run hash of :mod:`~kue_core.features.timings` as a histogram."""
    h = [int(raw.get("count", 0)), int(float(raw.get("sum", 0)))]
    return h + [int(raw.get(f"le:{label}", 0)) for label in LABELS]


def _since(now: list[int], then: list[int]) -> list[int]:
    """What was added to cumulative figures since ``then``; all of ``now`` if they went down
    (the counters were reset or expired)."""
    diff = [a - b for a, b in zip(now, then, strict=True)]
    return now if any(d < 0 for d in diff) else diff


def _versions(infos: list[Any]) -> dict[str, list[str]]:
    """The versions of the live workers serving each type (and :data:`ALL`)."""
    found: dict[str, set[str]] = {ALL: set()}
    for raw in infos:
        try:
            info = json.loads(raw) if raw else {}
            version, types = info.get("version"), info.get("types") or {}
        except (ValueError, AttributeError):
            continue
        if not isinstance(version, str) or not version or not isinstance(types, dict):
            continue
        found[ALL].add(version)
        for t in types:
            found.setdefault(str(t), set()).add(version)
    return {t: sorted(v) for t, v in found.items()}


def sample(keys: Keys) -> Op[bool]:
    """Write the sample of the minute that just ended, unless another process did (see the
    module docstring): whether this one wrote it."""
    (seconds, micros), seen = yield read(("TIME",), ("GET", keys.series_minute))
    now, minute = int(seconds) * 1000 + int(micros) // 1000, int(seconds) // 60
    if seen is not None and int(seen) >= minute:
        return False
    found, totals, last_raw, worker_ids = yield read(
        ("SMEMBERS", keys.types),
        ("HGETALL", keys.totals),
        ("HGETALL", keys.series_last),
        ("ZRANGE", keys.workers, 0, -1),
    )
    totals, last = hash_reply(totals), _figures(hash_reply(last_raw))
    fresh = seen is None and not last and (yield from _new_queue(keys, totals))
    types, today = sorted(found), day_of(now)
    index = minute - 1  # the point of the minute that just ended
    hour, day = index * _MINUTE // _HOUR, index * _MINUTE // _DAY
    reads: list[tuple[Any, ...]] = [("HGET", keys.worker(w), "info") for w in worker_ids]
    for t in [*types, None]:
        reads += [("HGET", keys.series("h", hour // 24, t), hour % 24)]
        reads += [("HGET", keys.series("d", day // 30, t), day % 30)]
    # A type's histograms are the day's: when the day turned, the last day's are read too.
    ended = {t: f["day"] for t, f in last.items() if f.get("day") not in (None, today)}
    for t in types:
        reads += [("ZCARD", keys.type_state(t, s)) for s in ("inactive", "delayed")]
        days = [today, ended[t]] if t in ended else [today]
        reads += [("HGETALL", keys.timings(t, str(d), k)) for d in days for k in ("wait", "run")]
    replies = iter((yield read(*reads)))
    versions = _versions([next(replies) for _ in worker_ids])
    current = {t: (next(replies), next(replies)) for t in [*types, ALL]}
    points, figures, changes = [], {}, []
    everything, backlog = Point(), [0, 0]
    for t in types:
        waiting, delayed = int(next(replies)), int(next(replies))
        before = last.get(t, {})
        now_wait, now_run = _hist(hash_reply(next(replies))), _hist(hash_reply(next(replies)))
        added_wait = _since(now_wait, _fit(before.get("wait")))
        added_run = _since(now_run, _fit(before.get("run")))
        if t in ended:  # what the last day's histograms gained since, and all of today's
            ended_wait, ended_run = (
                _hist(hash_reply(next(replies))),
                _hist(hash_reply(next(replies))),
            )
            added_wait = _sum(_since(ended_wait, _fit(before.get("wait"))), now_wait)
            added_run = _sum(_since(ended_run, _fit(before.get("run"))), now_run)
        counts = [int(totals.get(f"complete:{t}", 0)), int(totals.get(f"failed:{t}", 0))]
        figures[t] = {"day": today, "counts": counts, "wait": now_wait, "run": now_run}
        figures[t].update(backlog=[waiting, delayed], v=before.get("v", []))
        backlog = [backlog[0] + waiting, backlog[1] + delayed]
        added = _since(counts, _fit(before.get("counts"), 2))
        if not before and seen is None and not fresh:  # counters older than the history
            added, added_wait, added_run = [0, 0], [0] * _WIDTH, [0] * _WIDTH
        point = Point(added[0], added[1], waiting, delayed, added_wait, added_run)
        everything.add(point)
        if point.empty() and not any(_fit(before.get("backlog"), 2)):
            continue  # nothing to show, now or the minute before
        points += _grown(keys, t, index, point, current[t])
    everything.waiting, everything.delayed = backlog
    points += _grown(keys, None, index, everything, current[ALL])
    for t, serving in versions.items():
        was = last.get(t, {}).get("v")
        was = was if isinstance(was, list) else []
        if serving and serving != was:
            change = {"at": now, "versions": serving, "was": was}
            changes.append((keys.deploys(None if t == ALL else t), now, json.dumps(change)))
        figures.setdefault(t, {})["v"] = serving or was
    for t in set(last) - set(figures):  # a type gone: its versions are kept
        if last[t].get("v"):
            figures[t] = {"v": last[t]["v"]}
    args = _arguments(keys, points, changes, figures, now)
    written: bool = yield calls.sample(keys, seen or "", minute, args)
    return written


def _new_queue(keys: Keys, totals: dict[str, str]) -> Op[bool]:
    """Whether every job the counters ever counted ended within the last day (the minute
    counters, kept a day, add up to the totals): a queue first used since, whose first jobs
    the first sample counts, rather than a deployment older than its history, whose counters
    are where the history starts from. Read once, by the first sample ever."""
    ever = {"complete": 0, "failed": 0}
    for name, value in totals.items():
        outcome, _, job_type = name.partition(":")
        if outcome in ever and job_type:
            ever[outcome] += int(value)
    if not any(ever.values()):
        return True
    minutes = yield from stats.throughput(keys, defaults.THROUGHPUT_MINUTES)
    return all(sum(m[outcome] for m in minutes) >= n for outcome, n in ever.items())


def _figures(raw: dict[str, str]) -> dict[str, dict[str, Any]]:
    """The cumulative figures of the last sample, by type (those that read as such)."""
    out = {}
    for name, text in raw.items():
        try:
            value = json.loads(text)
        except ValueError:
            continue
        if isinstance(value, dict):
            out[name] = value
    return out


def _sum(a: list[int], b: list[int]) -> list[int]:
    return [x + y for x, y in zip(a, b, strict=True)]


def _fit(value: Any, width: int = _WIDTH) -> list[int]:
    """Stored figures as a list of ``width`` integers (zeros when they are not)."""
    if isinstance(value, list) and len(value) == width:
        try:
            return [int(v) for v in value]
        except (TypeError, ValueError):
            pass
    return [0] * width


def _grown(
    keys: Keys, t: str | None, index: int, point: Point, current: tuple[Any, Any]
) -> list[tuple[str, int, str, int]]:
    """The minute's point, and the points of its hour and its day grown by it: (key, field,
    point, seconds kept) each."""
    out = [(keys.series("m", index // 60, t), index % 60, point.encode(), STEPS["m"].keep_s)]
    for code, at, now in (("h", index // 60, current[0]), ("d", index // 1440, current[1])):
        step = STEPS[code]
        grown = Point.decode(now) if now else Point()
        grown.add(point)
        out.append(
            (
                keys.series(code, at // step.per_key, t),
                at % step.per_key,
                grown.encode(),
                step.keep_s,
            )
        )
    return out


def _arguments(
    keys: Keys,
    points: list[tuple[str, int, str, int]],
    changes: list[tuple[str, int, str]],
    figures: dict[str, dict[str, Any]],
    now: int,
) -> list[Any]:
    args: list[Any] = [len(points)]
    for each in points:
        args += each
    oldest = now - 30 * _DAY
    args.append(len(changes))
    for key, at, change in changes:
        args += [key, at, change, oldest, defaults.HISTORY_DEPLOYS]
    args += [keys.series_last, len(figures)]
    for t, f in figures.items():
        args += [t, json.dumps(f, separators=(",", ":"))]
    return args


# -- reading ----------------------------------------------------------------------------------
def series(keys: Keys, job_type: str | None, span: str) -> Op[dict[str, Any]]:
    """See ``Queue.stats_history``."""
    if job_type is not None:
        validate_type(job_type)
    if span not in RANGES:
        raise InvalidJob(f"range must be one of {', '.join(RANGES)}, got {span!r}")
    code, n = RANGES[span]
    step = STEPS[code]
    ((seconds, _),) = yield read(("TIME",))
    now = int(seconds) * 1000
    last = now // step.ms - (1 if code == "m" else 0)  # a minute shows once sampled
    indexes = range(last - n + 1, last + 1)
    chunks = sorted({i // step.per_key for i in indexes})
    # The points of all types tell which were sampled: a type has none when idle.
    replies = yield read(
        *(("HGETALL", keys.series(code, c, job_type)) for c in chunks),
        *(("HGETALL", keys.series(code, c, None)) for c in chunks if job_type is not None),
        ("ZRANGE", keys.deploys(job_type), indexes[0] * step.ms, "+inf", "BYSCORE"),
    )
    stored: dict[int, str] = {}
    sampled: set[int] = set()
    for c, reply in zip(chunks, replies, strict=False):
        stored.update({c * step.per_key + int(f): text for f, text in hash_reply(reply).items()})
    for c, reply in zip(chunks, replies[len(chunks) : -1] or replies[: len(chunks)], strict=True):
        sampled.update(c * step.per_key + int(f) for f in hash_reply(reply))
    points, whole = [], Point()
    for i in indexes:
        point = Point.decode(stored[i]) if i in stored else Point()
        if i in sampled and point.waiting is None:
            point.waiting = point.delayed = 0  # sampled, with nothing waiting
        whole.add(point)
        points.append(point.as_dict(i * step.ms))
    deploys = []
    for member in replies[-1]:
        try:
            deploys.append(json.loads(member))
        except ValueError:
            continue
    return {
        "type": job_type,
        "range": span,
        "step_ms": step.ms,
        "points": points,
        "deploys": deploys,
        "total": whole.as_dict(None),
    }
