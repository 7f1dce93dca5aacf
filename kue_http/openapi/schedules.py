"""Schedules (``kue_http/schedules.py``, and the ``schedule`` and ``tick`` of the jobs they
make) in the OpenAPI document; the package merges them in."""

from __future__ import annotations

from kue_core import SCHEDULE_CATCH_UP as CATCH_UP
from kue_core import SCHEDULE_LATEST as MAX_TIME
from kue_core import defaults

from ..schedules import OPTIONS
from .build import (
    CONTROL,
    MS,
    Schema,
    array,
    job_type,
    json_body,
    obj,
    ok,
    path_param,
    read,
    ref,
    write,
)
from .options import JOB_OPTIONS

_KEY = path_param(
    "key",
    {
        "type": "string",
        "minLength": 1,
        "maxLength": 200,
        "pattern": rf"^[^{CONTROL}\s/]+$",
    },
    "A schedule's key: 1 to 200 characters, no spaces, no '/'.",
    example="nightly-report",
)
_TIME = {"type": ["integer", "null"], "minimum": 0, "maximum": MAX_TIME}
_LIMIT = {"type": ["integer", "null"], "minimum": 1, "description": "Most jobs it makes, then ends"}
_CRON = {
    "type": "string",
    "minLength": 1,
    "maxLength": 200,
    "description": "Five fields (minute hour day month weekday), or a name: @hourly, @daily, "
    "@weekly, @monthly, @yearly",
}
_TZ = {"type": "string", "minLength": 1, "description": "An IANA time zone (default UTC)"}
_EVERY = {
    "type": "integer",
    "minimum": defaults.SCHEDULE_MIN_INTERVAL,
    "maximum": 2**53,
    "description": "ms between jobs",
}
_OFFSET = {"type": "integer", "minimum": 0, "maximum": 2**53, "description": "ms after start"}
_CATCH_UP = {
    "enum": list(CATCH_UP),
    "description": "The ticks missed while no worker ran: one (a job for the latest), all "
    f"(one each, at most {defaults.CATCH_UP_MAX}), none (only a tick at most "
    f"{defaults.SCHEDULE_GRACE} ms late)",
}
_MESSAGE = {"type": "string", "minLength": 1}


def paths() -> Schema:
    one = ok(ref("Schedule"))
    return {
        "/schedules": {
            "get": read(
                "schedules",
                "Every schedule, by key",
                ok(obj({"schedules": array(ref("Schedule"))})),
            )
        },
        "/schedules/{key}": {
            "parameters": [_KEY],
            "get": read("schedules", "One schedule", one, 400, 404),
            "put": write(
                "schedules",
                "Define a schedule, or redefine it (upserted by key: an unchanged definition "
                "keeps its timetable, a changed one starts again from now); the body is "
                "checked whole before anything is written",
                one,
                400,
                404,
                413,
                body=json_body(ref("NewSchedule"), "Exactly one of every and cron."),
            ),
            "delete": write(
                "schedules",
                "Delete a schedule (the jobs it made stay)",
                ok(obj({"message": {"type": "string", "pattern": "^schedule .+ removed$"}})),
                400,
                404,
            ),
        },
        "/schedules/{key}/trigger": {
            "parameters": [_KEY],
            "post": _steer(
                "Make one job of the schedule now, even paused; its timetable is unchanged",
                obj({"message": _MESSAGE, "job": ref("Job")}),
            ),
        },
        "/schedules/{key}/pause": {
            "parameters": [_KEY],
            "post": _steer(
                "Make no more jobs until resumed; the definition and runs are kept",
                obj({"message": _MESSAGE, "schedule": ref("Schedule")}),
            ),
        },
        "/schedules/{key}/resume": {
            "parameters": [_KEY],
            "post": _steer(
                "Make jobs again, from the next tick after now (the ticks while paused are "
                "skipped)",
                obj({"message": _MESSAGE, "schedule": ref("Schedule")}),
            ),
        },
    }


def _steer(summary: str, answer: Schema) -> Schema:
    return write(
        "schedules",
        summary,
        ok(answer),
        400,
        404,
        413,
        body=json_body(
            {"description": "Not read"}, "Ignored, but a POST must send JSON (CSRF): send {}."
        ),
    )


#: Fields of the Job schema.
JOB_FIELDS: Schema = {
    "schedule": {"type": "string", "description": "The key of the schedule that made it"},
    "tick": {**MS, "description": "The time (ms) of the schedule's tick it was made for"},
}
JOB_OPTIONAL = " ".join(JOB_FIELDS)


def schemas(records_options: Schema) -> Schema:
    """The schemas of schedules; ``records_options`` are ``POST /job``'s options of records
    and runs."""
    options = {**JOB_OPTIONS["properties"], **records_options}
    job_options = {
        "type": "object",
        "properties": {name: options[name] for name in OPTIONS},
        "additionalProperties": False,
        "description": "POST /job's options a schedule applies to every job it makes",
    }
    common = {
        "type": job_type(),
        "data": {"description": "Any JSON value (default {})"},
        "start": {**_TIME, "description": "Unix time in ms of the first tick (default now)"},
        "end": {**_TIME, "description": "Unix time in ms past which it ends"},
        "limit": _LIMIT,
        "catch_up": {**_CATCH_UP, "default": CATCH_UP[0]},
        "catchUp": {
            **_CATCH_UP,
            "deprecated": True,
            "description": "The former name of catch_up, still taken (not with catch_up)",
        },
        "options": {**job_options, "type": ["object", "null"]},
    }
    return {
        "NewSchedule": {
            **obj(
                {"every": _EVERY, "offset": _OFFSET, "cron": _CRON, "tz": _TZ, **common},
                optional="every offset cron tz data start end limit catch_up catchUp options",
            ),
            "oneOf": [
                {
                    "required": ["every"],
                    "not": {"anyOf": [{"required": [k]} for k in ("cron", "tz")]},
                },
                {
                    "required": ["cron"],
                    "not": {"anyOf": [{"required": [k]} for k in ("every", "offset")]},
                },
            ],
        },
        "Schedule": obj(
            {
                "key": {"type": "string", "minLength": 1},
                "kind": {"enum": ["every", "cron"]},
                "every": _EVERY,
                "offset": {**_OFFSET, "minimum": 1},
                "cron": {"type": "string", "description": "Five fields (a name is expanded)"},
                "tz": {"type": "string"},
                "type": {"type": "string"},
                "data": {"description": "Any JSON value"},
                "options": job_options,
                "start": _TIME,
                "end": _TIME,
                "limit": _LIMIT,
                "catch_up": _CATCH_UP,
                "anchor": {**MS, "description": "When an every schedule's ticks count from"},
                "paused": {"type": "boolean"},
                "ended": {"type": "boolean", "description": "Past end or limit: makes no more"},
                "next": {
                    "type": ["integer", "null"],
                    "minimum": 0,
                    "description": "ms of the next tick; null when paused or ended",
                },
                "upcoming": array({**MS}, "The next ticks (up to 3).", max_items=3),
                "runs": {
                    "type": "integer",
                    "minimum": 0,
                    "description": "Ticks fired: each made a job, or found its unique key held",
                },
                "deduplicated": {
                    "type": "integer",
                    "minimum": 0,
                    "description": "Ticks and triggers that found the unique key held by a job "
                    "(options.unique): they made none, or changed that job as its mode says",
                },
                "triggered": {"type": "integer", "minimum": 0, "description": "Jobs made by hand"},
                "last_job": {
                    "oneOf": [
                        {"type": "null"},
                        obj(
                            {
                                "id": {"type": "integer", "minimum": 1},
                                "state": {"type": ["string", "null"]},
                                "tick": MS,
                            }
                        ),
                    ],
                    "description": "The last job it made (state null once removed)",
                },
                "created_at": MS,
                "updated_at": MS,
            },
            optional="every offset cron tz",
        ),
    }
