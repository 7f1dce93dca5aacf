"""Schedules: jobs made on a timetable, every N ms or by a cron expression in a time zone.

A schedule is a hash ``<p>:schedule:<key>`` (its definition, runs made, last job) and, while it
will make jobs, a member of ``<p>:schedules`` scored by its next due time. The promotion timer
of every worker process wakes at the next due time of a delayed job or a schedule (woken early
on ``<p>:promote``, as for delayed jobs), plans the firing
(:func:`kue_core.features.schedule_rules.plan`) and runs ``tick.lua``, which makes the tick's
jobs and moves the next due time on in one call, if the schedule is still due at the time
planned from: so each tick makes its jobs once, however many processes plan it at the same
moment, with no leader and no polling.
"""

from __future__ import annotations

import contextlib
import json
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, cast

from .. import defaults
from ..base import checks, sealing
from ..base.errors import CannotDecrypt, InvalidJob, InvalidSchedule, ScheduleNotFound
from ..features import runs
from ..features import schedule_rules as rules
from ..store import calls
from ..store.calls import Op, read
from . import ops
from .spec import JobSpec

if TYPE_CHECKING:
    import redis

    from ..store.transport import Transport

#: The job class of one client (``Job``, ``AsyncJob``).
_J = TypeVar("_J", bound=JobSpec)
_J_co = TypeVar("_J_co", bound=JobSpec, covariant=True)
#: Job options a schedule applies to every job it makes: the Job setter of each name.
OPTIONS = (
    "priority",
    "attempts",
    "backoff",
    "delay",
    "ttl",
    "remove_on_complete",
    "remove_on_fail",
    "tags",
    "search_keys",
    "track",
    "unique",
    "only",
    "fan_out",
)
_LISTS = ("tags", "search_keys")  # given as a list, applied as arguments


@checks.refused_as(InvalidSchedule)
def _key(key: object) -> str:
    if (
        not isinstance(key, str)
        or not key
        or len(key) > 200
        or any(c.isspace() or ord(c) < 32 for c in key)
        or "/" in key
    ):
        raise InvalidJob(
            f"a schedule key is 1 to 200 characters without spaces or '/', got {key!r:.100}"
        )
    return key


def apply_options(job: _J, options: dict[str, Any], names: tuple[str, ...] = OPTIONS) -> _J:
    """Apply job options to ``job``: a schedule's (names of :data:`OPTIONS`), or those of
    ``names`` (each the name of a Job setter; a list for one that takes several)."""
    for name, value in options.items():
        if name not in names:
            raise InvalidJob(f"unknown job option {name!r}; options are: {', '.join(names)}")
        if name == "track":
            if not isinstance(value, bool):
                raise InvalidJob(f"track is true or false, got {value!r}")
            if value:
                job.track()
        elif name == "unique":
            _unique(job, value)
        elif name == "fan_out":
            runs.apply_json(job, value)
        elif name == "depends_on":  # a job, an id, or a list or tuple of them
            job.depends_on(value)
        elif name in _LISTS:
            if not isinstance(value, list | tuple) or not value:
                raise InvalidJob(f"{name} is a non-empty list of strings")
            getattr(job, name)(*value)
        else:
            getattr(job, name)(value)
    return job


def _unique(job: JobSpec, value: object) -> None:
    """``unique``: a key (mode ``until_done``: no new job while the last one holding it has
    not ended), or ``{"key": str, "mode": str, "ttl": ms}`` with mode and ttl optional."""
    if isinstance(value, str):
        job.unique(value)
    elif (
        isinstance(value, dict)
        and isinstance(value.get("key"), str)
        and set(value)
        <= {
            "key",
            "mode",
            "ttl",
        }
    ):
        job.unique(value["key"], value.get("mode", "until_done"), value.get("ttl"))
    else:
        raise InvalidJob(
            'unique is a key, or {"key": str, "mode": str, "ttl": ms} with mode and ttl '
            f"optional, got {value!r:.100}"
        )


# -- the operations, for either client (see kue_core.jobs.ops) ----------------------------------
class Side(ops.Side[_J_co], Protocol):
    def create_job(self, job_type: str, data: Any = None) -> _J_co: ...


@checks.refused_as(InvalidSchedule)
def every_definition(interval: Any, offset: Any) -> dict[str, Any]:
    every = rules.interval_ms(interval, "interval", defaults.SCHEDULE_MIN_INTERVAL)
    shift = 0 if offset is None else rules.interval_ms(offset, "offset", 0)
    return {"kind": "every", "every": every, "offset": shift}


@checks.refused_as(InvalidSchedule)
def cron_definition(expression: str, tz: str) -> dict[str, Any]:
    rules.zone(tz)
    return {"kind": "cron", "cron": rules.cron_expression(expression), "tz": tz}


def _due(side: Side[JobSpec], key: str) -> Op[int | None]:
    (score,) = yield read(("ZSCORE", side.keys.schedules, key))
    return None if score is None else int(score)


def _load(side: Side[JobSpec], key: str) -> Op[dict[str, str]]:
    (h,) = yield read(("HGETALL", side.keys.schedule(_key(key))))
    if not h or "definition" not in h:
        raise ScheduleNotFound(key)
    return cast(dict[str, str], h)


def _first(definition: dict[str, Any], now: int) -> int:
    """The first due time from ``now`` on (-1 when the schedule has nothing left)."""
    start = max(now, definition.get("start") or now)
    at = rules.rule_of(definition).at_or_after(start)
    end = definition.get("end")
    return -1 if end is not None and at > end else at


@checks.refused_as(InvalidSchedule)
def define(
    side: Side[JobSpec],
    key: str,
    definition: dict[str, Any],
    job_type: str,
    data: Any,
    start: Any,
    end: Any,
    limit: int | None,
    catch_up: str,
    options: dict[str, Any],
) -> Op[dict[str, Any]]:
    """Upsert schedule ``key`` (see ``Queue.every``); the schedule."""
    key = _key(key)
    if catch_up not in rules.CATCH_UP:
        raise InvalidJob(f"catch_up is one of {', '.join(rules.CATCH_UP)}, got {catch_up!r}")
    first, last = rules.time_ms(start, "start"), rules.time_ms(end, "end")
    if first is not None and last is not None and last < first:
        raise InvalidJob("end is before start")
    if limit is not None:
        checks.integer(limit, "limit", 1)
    job = apply_options(side.create_job(job_type, data), options)
    job._offloads = False  # a schedule's data stays in Redis (its jobs share it)
    job._save_row()  # checks the data and options as a save would
    once = job.unique()
    if once is not None:  # stored in one form, ttl in ms
        options = {**options, "unique": {k: v for k, v in once.items() if v is not None}}
    if options.get("backoff") is not None:  # stored in one form: maxDelay, not its former name
        options = {**options, "backoff": job.backoff()}
    definition.update(
        type=job.type,
        data=job.data,
        options=options,
        start=first,
        end=last,
        limit=limit,
        catch_up=catch_up,
    )
    text = _canonical(definition)
    (stored,) = yield read(("HMGET", side.keys.schedule(key), "definition", "anchor", "ended"))
    now = yield from calls.server_now()
    same = stored[0] is not None and _canonical(_opened(side, stored[0])) == text
    if same and stored[1] is not None:  # unchanged: keep its timetable
        definition["anchor"] = int(stored[1])
        due = yield from _due(side, key)
        at = -1 if stored[2] == "1" else (due if due is not None else _first(definition, now))
    else:
        definition["anchor"] = max(now, first or now) + int(definition.get("offset", 0))
        at = _first(definition, now)
    fields = ["definition", _stored(side, text), "anchor", definition["anchor"]]
    yield calls.schedule(side.keys, "set", key, at, fields)
    return (yield from read_schedule(side, key))


def read_schedule(side: Side[JobSpec], key: str) -> Op[dict[str, Any]]:
    """One schedule (see ``Queue.schedule``)."""
    h = yield from _load(side, key)
    definition = _opened(side, h["definition"])
    definition["anchor"] = int(h["anchor"])
    due = yield from _due(side, key)
    last = None
    if h.get("last_job"):
        jobs = yield from ops.get_jobs(side, [int(h["last_job"])])
        last = {
            "id": int(h["last_job"]),
            "state": jobs[0].state if jobs else None,
            "tick": int(h.get("last_tick") or 0),
        }
    paused = h.get("paused") == "1"
    upcoming = rules.upcoming(definition, due, 3)
    if paused and h.get("ended") != "1":
        now = yield from calls.server_now()
        upcoming = rules.upcoming(definition, _first(definition, now), 3)
    return {
        "key": key,
        **{k: v for k, v in definition.items() if k != "offset" or v},
        "paused": paused,
        "ended": h.get("ended") == "1",
        "next": due,
        "upcoming": upcoming,
        "runs": int(h.get("runs") or 0),
        "deduplicated": int(h.get("deduplicated") or 0),
        "triggered": int(h.get("triggered") or 0),
        "last_job": last,
        "created_at": int(h.get("created_at") or 0),
        "updated_at": int(h.get("updated_at") or 0),
    }


def read_schedules(side: Side[JobSpec]) -> Op[list[dict[str, Any]]]:
    """Every schedule, by key."""
    found: list[str] = []
    cursor = 0
    while True:
        ((cursor, batch),) = yield read(
            ("SCAN", cursor, "MATCH", side.keys.match("schedule:*"), "COUNT", 1000)
        )
        found += batch
        if int(cursor) == 0:
            break
    out = []
    for key in sorted({k[len(side.keys.schedule("")) :] for k in found}):
        try:
            out.append((yield from read_schedule(side, key)))
        except (ScheduleNotFound, InvalidJob):
            continue  # removed meanwhile, or not ours
    return out


def pause_schedule(side: Side[JobSpec], key: str) -> Op[dict[str, Any]]:
    """Make no more jobs until resumed (see ``Queue.pause_schedule``)."""
    if not (yield calls.schedule(side.keys, "pause", _key(key))):
        raise ScheduleNotFound(key)
    return (yield from read_schedule(side, key))


def resume_schedule(side: Side[JobSpec], key: str) -> Op[dict[str, Any]]:
    """Make jobs again from the next tick after now (see ``Queue.resume_schedule``)."""
    h = yield from _load(side, key)
    definition = _opened(side, h["definition"])
    definition["anchor"] = int(h["anchor"])
    now = yield from calls.server_now()
    at = -1 if h.get("ended") == "1" else _first(definition, now)
    if not (yield calls.schedule(side.keys, "resume", key, at)):
        raise ScheduleNotFound(key)
    return (yield from read_schedule(side, key))


def remove_schedule(side: Side[JobSpec], key: str) -> Op[None]:
    """Delete a schedule; the jobs it made stay."""
    if not (yield calls.schedule(side.keys, "remove", _key(key))):
        raise ScheduleNotFound(key)


def trigger(side: Side[_J], key: str) -> Op[_J]:
    """Make one job of the schedule now (see ``Queue.trigger``)."""
    h = yield from _load(side, key)
    made = _made(side, _opened(side, h["definition"]))
    now = yield from calls.server_now()
    row = [*made._save_row(), now]
    outcome, ids, held = yield calls.tick(side.keys, key, None, "", -1, [row], made._unique)
    if outcome != "made":
        raise ScheduleNotFound(key)
    jobs = yield from ops.get_jobs(side, ids)
    if not jobs:  # a throttle key that outlived the job holding it
        made._saved(ids[0])
        jobs = [made]
    jobs[0].deduplicated = held > 0
    return jobs[0]


def _made(queue: Side[_J], definition: dict[str, Any]) -> _J:
    """A job as ``definition`` makes them (unsaved); ``CannotDecrypt`` for data sealed under
    a key the queue lacks (``_opened`` left it so)."""
    data = definition["data"]
    kid = sealing.envelope_key(data)
    if kid is not None:
        raise CannotDecrypt(kid, "data", missing=True)
    made = apply_options(queue.create_job(definition["type"], data), definition["options"])
    made._offloads = False  # its jobs share the definition's data: it stays in Redis
    return made


def _canonical(definition: dict[str, Any]) -> str:
    """A definition's text, in clear: what tells a changed definition from the same one."""
    return json.dumps(definition, sort_keys=True, separators=(",", ":"))


def _stored(side: Side[JobSpec], text: str) -> str:
    """A definition's text (canonical) as stored: its data sealed when the queue has keys
    (see kue_core.base.sealing), the rest in clear (the timetable's, read by the scripts)."""
    ring = sealing.of(side)
    if ring is None:
        return text
    definition = json.loads(text)
    definition["data"] = sealing.sealed_value(ring, definition["data"], "data")
    return _canonical(definition)


def _opened(side: Side[JobSpec], stored: str) -> dict[str, Any]:
    """A stored definition, its sealed data opened where the queue can (else left sealed)."""
    definition: dict[str, Any] = json.loads(stored)
    ring = sealing.of(side)
    if ring is not None and "data" in definition:
        with contextlib.suppress(CannotDecrypt):
            definition["data"] = sealing.opened_value(ring, definition["data"], "data")
    return definition


class Timer(Side[JobSpec], Protocol):
    """What firing due schedules uses of a queue (the promotion timer's)."""

    client: redis.Redis
    scripts: Transport


def fire_due(queue: Timer, now: int) -> int:
    """Fire every schedule due at server time ``now`` (see :func:`firing`)."""
    return queue.scripts.drive(firing(queue, now))


def firing(side: Side[JobSpec], now: int) -> Op[int]:
    """Fire every schedule due at server time ``now`` (the promotion timer's operation, run
    by either transport); returns the next due time of a schedule, or -1."""
    keys = side.keys
    (due,) = yield read(
        (
            "ZRANGEBYSCORE",
            keys.schedules,
            "-inf",
            now,
            "WITHSCORES",
            "LIMIT",
            0,
            defaults.SWEEP_LIMIT,
        )
    )
    unopened = False
    for key, score in _scored(due):
        (h,) = yield read(("HMGET", keys.schedule(key), "definition", "anchor", "rev", "runs"))
        if h[0] is None or h[1] is None:
            yield calls.tick(keys, key, int(score), "", -1, [])  # gone: drops it
            continue
        definition = _opened(side, h[0])
        definition["anchor"] = int(h[1])
        plan = rules.plan(definition, int(score), now, int(h[3] or 0))
        try:
            made = _made(side, definition)
        except CannotDecrypt:  # sealed under a key this process lacks: left to one that has it
            unopened = True
            continue
        row = made._save_row()
        rows = [[*row, tick] for tick in plan.ticks]
        at = -1 if plan.next is None else plan.next
        yield calls.tick(keys, key, int(score), h[2] or "", at, rows, made._unique)
    (first,) = yield read(("ZRANGE", keys.schedules, 0, 0, "WITHSCORES"))
    scored = _scored(first)
    if not scored:
        return -1
    # A schedule left due above is looked at again in a second, not at once and for ever.
    return max(int(scored[0][1]), now + 1000) if unopened else int(scored[0][1])


def _scored(reply: Any) -> list[tuple[str, float]]:
    """A sorted set's members with their scores, as a plain command replies (a flat list, or
    pairs under RESP3)."""
    if reply and isinstance(reply[0], list | tuple):
        return [(str(m), float(sc)) for m, sc in reply]
    return [(str(m), float(sc)) for m, sc in zip(reply[::2], reply[1::2], strict=True)]
