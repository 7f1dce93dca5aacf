"""Flow control: limits on how fast and how many jobs of a type start, enforced in Redis across
every worker process, and groups (tenants) served in turn.

* ``queue.limit(type, rate=(max_jobs, per_ms))``: at most ``max_jobs`` start in any window of
  ``per_ms`` (a log of starts in ``<p>:rate:<type>``, trimmed to the window by each claim).
* ``queue.limit(type, concurrency=n)``: at most ``n`` jobs of the type active at once (Kue's
  ``<p>:jobs:<type>:active``, so jobs run by Node Kue count too; a lease that expires frees
  its place when the sweep takes the job back).
* ``job.group("tenant-42")``: claims of the type take turns between the groups with jobs
  waiting, the least recently served first (``<p>:groups:<type>``), so one group's backlog
  does not starve another; priority and FIFO hold within a group (``<p>:group:<type>:<g>``).
  Jobs in no group take their turn together. ``group_concurrency`` and ``group_rate`` limit
  each group on its own (``<p>:group-active:<type>:<g>``, ``<p>:group-rate:<type>:<g>``).
* A handler raising :class:`RateLimited` puts its job back (delayed, no attempt counted) and
  holds the whole type back as long.

The rules of a type are one JSON object in the hash ``<p>:limits`` (with the type's paused
flag and whether it has groups), read by the claim in the same call: a type without any costs
one read per claim, which is also the read of whether it is paused. A claim held back by a
limit answers how long to wait; the slot sleeps that long on ``<p>:<type>:limited``, which a
place freed under a concurrency limit, or a change of the limits, pushes to wake it early.
See ``claim`` in ``scripts/lib/claims.lua``.
"""

from __future__ import annotations

import json
import re
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from .. import defaults
from ..base import checks
from ..base.errors import InvalidJob, InvalidLimit
from ..base.keys import job_id_from_zid
from ..base.values import validate_type
from ..store import calls
from ..store.calls import Op, read, server_now

if TYPE_CHECKING:
    from ..base.keys import Keys
    from ..store.transport import Transport

#: The limits a type takes: two rates, ``(max_jobs, per_ms)``, and two caps.
NAMES = ("rate", "concurrency", "group_rate", "group_concurrency")
_RATES = ("rate", "group_rate")
_UNSET: Any = object()
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
#: The rotation member of the jobs in no group (see LANE in lib/type_rules.lua); not a group.
LANE = "\0"


def group_name(value: object) -> str:
    """A checked group name, or ``InvalidJob``."""
    if not isinstance(value, str) or not value:
        raise InvalidJob(f"a group is a non-empty string, got {value!r:.100}")
    if len(value) > defaults.MAX_GROUP_LENGTH:
        raise InvalidJob(f"a group must be at most {defaults.MAX_GROUP_LENGTH} characters")
    if _CONTROL.search(value):
        raise InvalidJob("a group must not contain control characters")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidJob("a group is not valid unicode (lone surrogate)") from None
    return value


def _rate(value: object, name: str) -> list[int] | bool:
    """``(max_jobs, per_ms)`` (``per`` may be a timedelta) as stored; None -> False (remove)."""
    if value is None:
        return False
    if not isinstance(value, list | tuple) or len(value) != 2:
        raise InvalidJob(f"{name} is (max_jobs, per_ms), got {value!r:.100}")
    most, per = value
    if isinstance(per, timedelta):
        per = per.total_seconds() * 1000
    most = checks.integer(most, f"{name}'s max_jobs", 1, defaults.MAX_LIMIT)
    per = int(checks.number(per, f"{name}'s per_ms", 1, defaults.MAX_LIMIT_MS, " ms"))
    return [most, per]


def _cap(value: object, name: str) -> int | bool:
    if value is None:
        return False
    return checks.integer(value, name, 1, defaults.MAX_LIMIT)


def changes(**given: Any) -> dict[str, Any]:
    """The checked changes of a ``limit()`` call (False: remove that limit)."""
    out: dict[str, Any] = {}
    for name, value in given.items():
        if value is _UNSET:
            continue
        out[name] = _rate(value, name) if name in _RATES else _cap(value, name)
    return out


def public(rules: dict[str, Any], now: int | None = None) -> dict[str, Any]:
    """A type's stored rules as :meth:`LimitMethods.limits` gives them: every limit (None when
    unset) and ``held_until`` (ms: held back by a handler's ``RateLimited`` until then)."""
    until = rules.get("until")
    return {
        "rate": _pair(rules.get("rate")),
        "concurrency": rules.get("concurrency"),
        "group_rate": _pair(rules.get("group_rate")),
        "group_concurrency": rules.get("group_concurrency"),
        "held_until": int(until) if until and (now is None or until > now) else None,
    }


def _pair(value: Any) -> tuple[int, int] | None:
    return (int(value[0]), int(value[1])) if isinstance(value, list) and len(value) == 2 else None


def _has_limits(rules: dict[str, Any], now: int) -> bool:
    return any(rules.get(n) for n in NAMES) or (rules.get("until") or 0) > now


class LimitMethods:
    """Mixed into ``Queue``: set and read limits, and read groups (the operations below)."""

    keys: Keys
    scripts: Transport

    def limit(
        self,
        job_type: str,
        *,
        rate: Any = _UNSET,
        concurrency: Any = _UNSET,
        group_rate: Any = _UNSET,
        group_concurrency: Any = _UNSET,
    ) -> dict[str, Any]:
        """Set the limits of ``job_type`` that are given (None removes one; the others are
        kept): ``rate=(max_jobs, per_ms)``, ``concurrency=n``, and per group
        ``group_rate=(max_jobs, per_ms)``, ``group_concurrency=n``. Returns the type's limits
        (see :meth:`limits`)."""
        given = {
            "rate": rate,
            "concurrency": concurrency,
            "group_rate": group_rate,
            "group_concurrency": group_concurrency,
        }
        return self.scripts.drive(set_limits(self.keys, job_type, given))

    def remove_limits(self, job_type: str) -> None:
        """Remove every limit of ``job_type``, and end a hold asked by ``RateLimited``."""
        self.scripts.drive(remove_limits(self.keys, job_type))

    def limits(self) -> dict[str, dict[str, Any]]:
        """Every type with a limit (or held back by ``RateLimited`` now): type -> ``rate``
        and ``group_rate`` ((max_jobs, per_ms) or None), ``concurrency`` and
        ``group_concurrency`` (or None), ``held_until`` (ms, or None)."""
        return self.scripts.drive(read_limits(self.keys))

    def limit_status(self, job_type: str) -> dict[str, Any]:
        """Whether ``job_type`` is held back by its limits right now, and by what: ``held``
        (None, or ``paused``, ``remote`` (RateLimited), ``concurrency`` or ``rate``),
        ``wait_ms`` (until a start fits the rate or the hold ends; None otherwise),
        ``active``, ``waiting``, ``started_in_window`` (under a rate) and the limits."""
        return self.scripts.drive(limit_status(self.keys, job_type))

    def groups(self, job_type: str, start: int = 0, count: int = 50) -> dict[str, Any]:
        """The groups of ``job_type`` with jobs waiting or running, in their turn (the next
        served first), ``count`` from ``start``: ``{"total": n, "groups": [{"group", "waiting",
        "active"}]}``."""
        return self.scripts.drive(groups(self.keys, job_type, start, count))


# -- the operations, for either client (see kue_core.jobs.ops) ----------------------------------
@checks.refused_as(InvalidLimit)
def set_limits(keys: Keys, job_type: str, given: dict[str, Any]) -> Op[dict[str, Any]]:
    """Set the limits given (``_UNSET`` for those left as they are); the type's limits."""
    validate_type(job_type)
    change = changes(**given)
    if not change:
        raise InvalidJob(f"give at least one of {', '.join(NAMES)}")
    rules = yield calls.limit(keys, job_type, change, False)
    now = yield from server_now()
    return public(rules, now)


@checks.refused_as(InvalidLimit)
def remove_limits(keys: Keys, job_type: str) -> Op[None]:
    validate_type(job_type)
    yield calls.limit(keys, job_type, dict.fromkeys(NAMES, False), True)


def read_limits(keys: Keys) -> Op[dict[str, dict[str, Any]]]:
    (stored,) = yield read(("HGETALL", keys.limits))
    now = yield from server_now()
    out = {}
    for job_type, text in sorted(stored.items()):
        rules = _decode(text)
        if _has_limits(rules, now):
            out[job_type] = public(rules, now)
    return out


def limit_status(keys: Keys, job_type: str) -> Op[dict[str, Any]]:
    validate_type(job_type)
    (text,) = yield read(("HGET", keys.limits, job_type))
    rules = _decode(text)
    now = yield from server_now()
    shown = public(rules, now)
    rate = shown["rate"]
    window = (keys.rate(job_type), f"({now - rate[1]}", "+inf") if rate else ()
    got = yield read(
        ("ZCARD", keys.type_state(job_type, "active")),
        ("ZCARD", keys.type_state(job_type, "inactive")),
        *(
            (("ZCOUNT", *window), ("ZRANGEBYSCORE", *window, "WITHSCORES", "LIMIT", 0, 1))
            if rate
            else ()
        ),
    )
    active, waiting = int(got[0]), int(got[1])
    started = int(got[2]) if rate else None
    held, wait = None, None
    if rules.get("paused"):
        held = "paused"
    elif shown["held_until"]:
        held, wait = "remote", shown["held_until"] - now
    elif shown["concurrency"] and active >= shown["concurrency"]:
        held = "concurrency"
    elif rate and started is not None and started >= rate[0]:
        first = _score(got[3]) if got[3] else now  # the oldest start in the window
        held, wait = "rate", max(1, int(first) + rate[1] - now)
    return {
        "type": job_type,
        "held": held if waiting else None,
        "wait_ms": wait if waiting else None,
        "active": active,
        "waiting": waiting,
        "started_in_window": started,
        "limits": shown,
    }


def groups(keys: Keys, job_type: str, start: int, count: int) -> Op[dict[str, Any]]:
    validate_type(job_type)
    checks.integer(start, "start", 0)
    checks.integer(count, "count", 1, defaults.MAX_GROUPS_PAGE)
    turns, members = yield read(
        ("ZRANGE", keys.groups(job_type), 0, -1),
        ("ZRANGE", keys.type_state(job_type, "active"), 0, -1),
    )
    turns = [g for g in turns if g != LANE]
    # The groups of the type's running jobs, read from their hashes: a group with none
    # waiting is out of the rotation.
    held = yield read(*(("HGET", keys.job(job_id_from_zid(m)), "group") for m in members))
    running = sorted({g for g in held if g})
    names = turns + sorted(set(running) - set(turns))
    page = names[start : start + count]
    got = yield read(
        *(
            command
            for g in page
            for command in (
                ("ZCARD", keys.group(job_type, g)),
                ("ZCARD", keys.group_active(job_type, g)),
            )
        )
    )
    rows = [
        {"group": g, "waiting": int(got[2 * i]), "active": int(got[2 * i + 1])}
        for i, g in enumerate(page)
        if got[2 * i] or got[2 * i + 1]  # a group emptied by a client without our scripts
    ]
    return {"total": len(names), "groups": rows}


def _score(reply: list[Any]) -> float:
    """The first score of a ZRANGE ... WITHSCORES reply, read flat (``[member, score]``) or
    paired (``[[member, score]]``), as redis-py versions give it."""
    first = reply[0]
    return float(first[1] if isinstance(first, list | tuple) else reply[1])


def _decode(text: str | None) -> dict[str, Any]:
    if not text:
        return {}
    try:
        value = json.loads(text)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}
