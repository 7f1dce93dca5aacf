"""When a schedule's jobs are due (see :mod:`kue_core.jobs.schedules`): its rule (every N ms from an
anchor, or a five-field cron expression in an IANA time zone), checked when defined, and the
plan of one firing: which ticks get a job under the catch-up policy, and the next due time.

Pure: times are milliseconds since the epoch on the Redis server's clock, given by the caller.
Cron expressions are evaluated by ``cronsim``, which follows Debian's cron across daylight
saving changes: a time skipped when clocks go forward runs at the first minute after the jump,
and a time repeated when they go back runs once.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

from .. import defaults
from ..base import checks
from ..base.errors import InvalidJob

#: The latest start or end a schedule takes (3000-01-01, in ms): dates stay within what
#: datetime and the cron evaluator handle.
LATEST = 32_503_680_000_000

#: What a schedule does with the ticks it missed while no worker ran (or Redis was down).
CATCH_UP = ("one", "all", "none")

#: Cron's names for common expressions.
NAMES = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}


def interval_ms(value: object, name: str, minimum: int) -> int:
    """Milliseconds from an int or a timedelta, at least ``minimum``."""
    if isinstance(value, timedelta):
        value = int(value.total_seconds() * 1000)
    return checks.integer(value, name, minimum, 2**53)


def time_ms(value: object, name: str) -> int | None:
    """A moment as ms since the epoch, from an int (ms) or an aware datetime; None stays."""
    if value is None:
        return None
    if isinstance(value, datetime):
        if value.tzinfo is None:
            raise InvalidJob(
                f"{name} needs a time zone: a naive datetime means another time on each machine"
            )
        value = int(value.timestamp() * 1000)
    return checks.integer(value, name, 0, LATEST)


def zone(name: object) -> ZoneInfo:
    if not isinstance(name, str) or not name or name.startswith(("/", ".")) or ".." in name:
        raise InvalidJob(f"tz must be an IANA time zone name, got {name!r:.100}")
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise InvalidJob(f"unknown time zone {name!r:.100}") from None


class Rule:
    """When ticks fall: :meth:`after` gives the first tick strictly after a moment."""

    def after(self, ms: int) -> int:
        raise NotImplementedError

    def at_or_after(self, ms: int) -> int:
        return self.after(ms - 1)


@dataclass(frozen=True)
class Every(Rule):
    """A tick every ``interval`` ms: ``anchor``, ``anchor + interval``, ..."""

    interval: int
    anchor: int

    def after(self, ms: int) -> int:
        if ms < self.anchor:
            return self.anchor
        return self.anchor + ((ms - self.anchor) // self.interval + 1) * self.interval


@dataclass(frozen=True)
class Cron(Rule):
    """Ticks where a five-field cron expression matches, in time zone ``tz``."""

    expression: str
    tz: str

    def after(self, ms: int) -> int:
        # cronsim counts in whole minutes: from the start of this second, strictly after.
        at = datetime.fromtimestamp(ms // 1000, UTC).astimezone(ZoneInfo(self.tz))
        return int(next(CronSim(self.expression, at)).timestamp() * 1000)


def cron_expression(text: object) -> str:
    """A checked five-field expression (a name such as ``@hourly`` becomes its fields)."""
    if not isinstance(text, str) or not text.strip() or len(text) > 200:
        raise InvalidJob(f"a cron expression is five fields or a name, got {text!r:.100}")
    expression = NAMES.get(text.strip().lower(), " ".join(text.split()))
    try:
        next(CronSim(expression, datetime.now(UTC)))
    except (CronSimError, StopIteration, ValueError) as e:
        raise InvalidJob(f"bad cron expression {text!r:.100}: {e}") from None
    return expression


def rule_of(definition: dict[str, Any]) -> Rule:
    """The rule of a stored definition (see ``schedules.define``)."""
    if definition["kind"] == "every":
        return Every(int(definition["every"]), int(definition["anchor"]))
    return Cron(definition["cron"], definition["tz"])


@dataclass(frozen=True)
class Plan:
    """One firing: a job for each of ``ticks``, then due again at ``next`` (None: ended)."""

    ticks: list[int]
    next: int | None


def plan(definition: dict[str, Any], due: int, now: int, runs: int) -> Plan:
    """What to do at server time ``now`` for a schedule due at ``due`` that made ``runs`` jobs: the
    ticks from ``due`` to ``now`` are the ones it reaches now (after a long outage, the first
    ``defaults.CATCH_UP_SCAN`` of them); ``catch_up`` decides which get a job (``one``: the latest;
    ``all``: each, the latest ``defaults.CATCH_UP_MAX`` of them; ``none``: the latest, only if it is
    at most ``defaults.SCHEDULE_GRACE`` ms old and nearer to its time than to the next tick).
    ``end`` and ``limit`` bound them, and end the schedule."""
    rule = rule_of(definition)
    end, limit = definition.get("end"), definition.get("limit")
    reached: collections.deque[int] = collections.deque([due], maxlen=defaults.CATCH_UP_MAX)
    nxt = rule.after(due)
    for _ in range(defaults.CATCH_UP_SCAN):
        if nxt > now:
            break
        reached.append(nxt)
        nxt = rule.after(nxt)
    else:  # a long outage: the ticks past the scan are skipped
        nxt = rule.after(now)
    ticks = [t for t in reached if end is None or t <= end]
    mode = definition.get("catch_up", "one")
    if mode == "one":
        ticks = ticks[-1:]
    elif mode == "none":  # on time: within the grace, and nearer its tick than the next
        grace = min(defaults.SCHEDULE_GRACE, (nxt - reached[-1]) // 2)
        ticks = [t for t in ticks[-1:] if now - t <= grace]
    if limit is not None:
        ticks = ticks[: max(0, limit - runs)]
    ended = (end is not None and nxt > end) or (limit is not None and runs + len(ticks) >= limit)
    return Plan(ticks, None if ended else nxt)


def upcoming(definition: dict[str, Any], due: int | None, count: int) -> list[int]:
    """The next ``count`` ticks from ``due`` (none once ended), within ``end``."""
    if due is None:
        return []
    rule, end = rule_of(definition), definition.get("end")
    out = [due]
    while len(out) < count:
        out.append(rule.after(out[-1]))
    return [t for t in out if end is None or t <= end]
