"""Schedules on the API blueprint (``kue_core.jobs.schedules``): jobs made on a timetable, every N
ms or by a cron expression in a time zone. ``PUT /schedules/<key>`` defines one (upserted by key: an
unchanged definition keeps its timetable), ``GET`` reads them, ``DELETE`` removes one, and ``POST
/schedules/<key>/trigger``, ``/pause`` and ``/resume`` steer it. A key is a path segment: kue_core
refuses ``/`` in keys, so every key can be addressed.
The body takes the names the answers use (``catch_up``, as ``created_at`` and ``last_job``),
and ``POST /job``'s names for job options (``removeOnComplete``; kue_core's are the Python
ones, ``remove_on_complete``). ``catchUp``, the body's name before, is still taken."""

from __future__ import annotations

from typing import Any

from flask import Response, jsonify, request

from kue_core import SCHEDULE_CATCH_UP as CATCH_UP
from kue_core import SCHEDULE_LATEST as MAX_TIME
from kue_core import InvalidJob, Queue

from . import redaction
from .api import api, done, queue

#: Job options of a schedule, ``POST /job``'s names -> kue_core's
#: (``kue_core.jobs.schedules.OPTIONS``).
OPTIONS = {
    "priority": "priority",
    "attempts": "attempts",
    "backoff": "backoff",
    "delay": "delay",
    "ttl": "ttl",
    "removeOnComplete": "remove_on_complete",
    "removeOnFail": "remove_on_fail",
    "tags": "tags",
    "searchKeys": "search_keys",
    "track": "track",
    "unique": "unique",
    "only": "only",
    "fanOut": "fan_out",
}
_NAMES = {python: rest for rest, python in OPTIONS.items()}
#: The fields of a definition, beside exactly one of ``every`` and ``cron``.
_FIELDS = frozenset(
    [
        "every",
        "offset",
        "cron",
        "tz",
        "type",
        "data",
        "start",
        "end",
        "limit",
        "catch_up",
        "catchUp",
        "options",
    ]
)


@api.get("/schedules")
def list_schedules() -> Response:
    """Every schedule, by key."""
    return jsonify({"schedules": [_answer(s) for s in queue().schedules()]})


@api.get("/schedules/<key>")
def get_schedule(key: str) -> Response:
    return jsonify(_answer(queue().schedule(key)))  # 404 for an unknown key


@api.put("/schedules/<key>")
def put_schedule(key: str) -> Response:
    """Define the schedule ``key``, or redefine it: ``{"every": ms, "offset": ms}`` or
    ``{"cron": "expr", "tz": "Area/City"}``, with ``type`` and optionally ``data``, ``start``,
    ``end``, ``limit``, ``catch_up`` and ``options``. Checked whole before anything is
    written."""
    body = request.get_json()  # 400 when malformed
    return jsonify(_answer(_define(queue(), key, body)))


@api.delete("/schedules/<key>")
def remove_schedule(key: str) -> Response:
    """Delete a schedule; the jobs it made stay."""
    queue().remove_schedule(key)
    return jsonify({"message": f"schedule {key} removed"})


@api.post("/schedules/<key>/trigger")
def trigger_schedule(key: str) -> Response:
    """Make one job of the schedule now (even paused); its timetable is unchanged."""
    job = queue().trigger(key)
    return done(f"triggered schedule {key}: job {job.id}", job)


@api.post("/schedules/<key>/pause")
def pause_schedule(key: str) -> Response:
    """Make no more jobs until resumed."""
    schedule = queue().pause_schedule(key)
    return jsonify({"message": f"paused schedule {key}", "schedule": _answer(schedule)})


@api.post("/schedules/<key>/resume")
def resume_schedule(key: str) -> Response:
    """Make jobs again, from the next tick after now (the ticks while paused are skipped)."""
    schedule = queue().resume_schedule(key)
    return jsonify({"message": f"resumed schedule {key}", "schedule": _answer(schedule)})


def _define(q: Queue, key: str, body: Any) -> dict[str, Any]:
    """Check the shape of ``body`` and hand it to ``queue.every`` or ``queue.cron``, which
    check the values before they write."""
    if not isinstance(body, dict):
        raise InvalidJob("a schedule is a JSON object with every or cron, type, data, options")
    unknown = set(body) - _FIELDS
    if unknown:
        raise InvalidJob(f"unknown field(s): {', '.join(sorted(unknown))}")
    if ("every" in body) == ("cron" in body):
        raise InvalidJob("a schedule has exactly one of every (ms) and cron (an expression)")
    if "every" in body and "tz" in body:
        raise InvalidJob("tz is for cron schedules")
    if "cron" in body and "offset" in body:
        raise InvalidJob("offset is for every schedules")
    if not body.get("type"):
        raise InvalidJob("Must provide job type")
    for name in ("start", "end"):
        value = body.get(name)
        if isinstance(value, int | float) and not isinstance(value, bool) and value > MAX_TIME:
            raise InvalidJob(f"{name} must be at most {MAX_TIME} (ms: 3000-01-01), got {value}")
    common: dict[str, Any] = {
        "start": body.get("start"),
        "end": body.get("end"),
        "limit": body.get("limit"),
        "catch_up": body.get("catch_up", body.get("catchUp", "one")),
        **_options(body.get("options")),
    }
    if "catch_up" in body and "catchUp" in body:
        raise InvalidJob("give catch_up only (catchUp is its former name)")
    if not isinstance(common["catch_up"], str):
        raise InvalidJob(f"catch_up is one of {', '.join(CATCH_UP)}")
    data = body.get("data", {})
    if "every" in body:
        return q.every(key, body["every"], body["type"], data, offset=body.get("offset"), **common)
    return q.cron(key, body["cron"], body["type"], data, tz=body.get("tz", "UTC"), **common)


def _options(options: Any) -> dict[str, Any]:
    """``options`` under kue_core's names."""
    if options is None:
        return {}
    if not isinstance(options, dict):
        raise InvalidJob("options must be an object")
    unknown = set(options) - set(OPTIONS)
    if unknown:
        known = ", ".join(OPTIONS)
        raise InvalidJob(f"unknown option(s) {', '.join(sorted(unknown))}; options are: {known}")
    if "unique" in options and not isinstance(options["unique"], dict):
        raise InvalidJob('unique is {"key": str, "mode": str, "ttl": ms}, mode and ttl optional')
    return {OPTIONS[name]: value for name, value in options.items()}


def _answer(schedule: dict[str, Any]) -> dict[str, Any]:
    """kue_core's schedule with its options under ``POST /job``'s names, so that what is read
    can be sent back."""
    options = {_NAMES.get(name, name): value for name, value in schedule["options"].items()}
    data = redaction.schedule_data(schedule["data"], schedule["type"])
    return {**schedule, "data": data, "options": options}
