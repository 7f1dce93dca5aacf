"""``GET /openapi.json``: the JSON API described in OpenAPI 3.1, for clients, API browsers and
the fuzz test (``tests/http/test_openapi.py``), which also checks that every route is here.

The document is built per request: its server is where the API is mounted (script root and
``KUE_API_PREFIX``), its security follows ``KUE_AUTH`` and its page size ``KUE_MAX_PAGE``.
Paths are relative to the server, as in the blueprint (``/job/{id}``). ``GET /metrics`` is
Prometheus text outside the API prefix, so it is not described here.

Kue's ``/jobs/...`` listings are one Flask route that tells its forms apart by where the
``from..to`` segment is; here each form is a path of its own. What every route may answer:
401 (``KUE_AUTH``), 503 (Redis unavailable), and for writes 403 (foreign ``Origin``), 405
(``KUE_READONLY``) and 415 (a body that is not JSON, or a POST without JSON).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from flask import Response, current_app, jsonify, request

from kue_core import PRIORITIES, PRIORITY_LIMIT, STATES, defaults

from .api import api

Schema = dict[str, Any]

OPENAPI_VERSION = "3.1.0"
_INT64 = {"type": "integer", "format": "int64", "minimum": -(2**63), "maximum": 2**63 - 1}
_COUNT = {"type": "integer", "minimum": 0}
_MS = {"type": "integer", "minimum": 0, "description": "Unix time in milliseconds"}
#: ``KUE_AUTH``'s scheme -> what every route but the health check requires (none without it).
_SECURITY: dict[str, list[Schema]] = {"basic": [{"basicAuth": []}], "bearer": [{"bearerAuth": []}]}
#: Characters a job type may not hold (``kue_core.job.validate_type``).
_CONTROL = r"\x00-\x1f\x7f"


@api.get("/openapi.json")
def openapi() -> Response:
    server = request.script_root + current_app.config["KUE_API_PREFIX"]
    return jsonify(document(server, current_app.config))


def document(server: str, settings: Mapping[str, Any]) -> Schema:
    """The OpenAPI document of the API mounted at ``server``, for the app's ``settings``
    (only the scheme of ``KUE_AUTH`` is read, never its secret)."""
    scheme = (settings.get("KUE_AUTH") or "").partition(":")[0]
    return {
        "openapi": OPENAPI_VERSION,
        "info": {
            "title": "kue JSON API",
            "version": "1.0.0",
            "description": (
                "Kue's JSON API (same routes, field names and shapes) with real status codes, "
                "and routes Kue lacks: history, job control, bulk actions, pausing, workers, "
                "throughput, wait and run timings, search through an index, tags, tracking, "
                "retention, dependencies and flows, schedules, flow control (limits, groups), "
                "kue rules (watchers, their counters and failed events), events, health. "
                'Every error answer is {"error": "..."}.'
            ),
        },
        "servers": [{"url": server or "/"}],
        "security": _SECURITY.get(scheme, []),
        "tags": [
            {"name": name}
            for name in (
                "jobs",
                "control",
                "records",
                "flows",
                "schedules",
                "limits",
                "rules",
                "listing",
                "bulk",
                "pausing",
                "watching",
            )
        ],
        "paths": _paths(settings.get("KUE_MAX_PAGE", 1000)),
        "components": {
            "schemas": _schemas(),
            "responses": {name: _error_response(code) for code, (name, _) in _ERRORS.items()},
            "securitySchemes": {
                "basicAuth": {
                    "type": "http",
                    "scheme": "basic",
                    "description": "When KUE_AUTH is basic:<user>:<password>.",
                },
                "bearerAuth": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "When KUE_AUTH is bearer:<token>.",
                },
            },
        },
    }


# -- the routes ----------------------------------------------------------------------------
def _paths(max_page: int) -> Schema:
    jobs = _array(_ref("Job"), f"At most {max_page} jobs (KUE_MAX_PAGE); a larger window is 400.")
    listing = _get("listing", "Jobs in a window of ranks, sorted by id", _ok(jobs), 400)
    by_finish = _query(
        "by",
        {"enum": ["queue", "finished"]},
        "queue (Kue's: the window of the state's set, sorted by id), or finished: complete "
        "or failed jobs in the order they finished, ranks from 0, oldest first (desc: newest "
        "first), not sorted after (another state: 400).",
    )
    by_state = _get(
        "listing",
        "Jobs of a state in a window of ranks, sorted by id, or by when they finished",
        _ok(jobs),
        400,
        parameters=[by_finish],
    )
    return {
        "/stats": {"get": _get("jobs", "Number of jobs in each state", _ok(_ref("Stats")))},
        "/job/types": {"get": _get("jobs", "Every job type ever saved", _ok(_names()))},
        "/job": {
            "post": _write(
                "jobs",
                "Create one job, or several: each element of an array is created or refused "
                "on its own, in its place in the answer",
                {
                    "200": _json(
                        "Created",
                        {"oneOf": [_ref("Created"), _array(_ref("Created"), min_items=1)]},
                    ),
                    "204": {"description": "The body was {} or []: nothing to create"},
                    "400": _json(
                        "Bad input: one job or the body refused (nothing was written), or an "
                        "array with at least one job refused (the others were saved)",
                        {
                            "oneOf": [
                                _ref("Error"),
                                _array({"oneOf": [_ref("Created"), _ref("Error")]}, min_items=1),
                            ]
                        },
                    ),
                },
                413,
                body=_body(
                    {
                        "anyOf": [
                            _ref("NewJob"),
                            _array(_ref("NewJob")),
                            {"type": "object", "maxProperties": 0},
                        ]
                    },
                    "One job, an array of jobs, or {} (nothing).",
                ),
            )
        },
        "/job/{id}": {
            "parameters": [_JOB_ID],
            "get": _get("jobs", "One job", _ok(_ref("Job")), 400, 404),
            "delete": _remove(),
        },
        "/job/{id}/log": {
            "parameters": [_JOB_ID],
            "get": _get("jobs", "The job's log lines", _ok(_array({"type": "string"})), 400, 404),
        },
        "/job/{id}/history": {
            "parameters": [_JOB_ID],
            "get": _get(
                "jobs",
                f"The job's last {defaults.HISTORY_LENGTH} transitions, oldest first",
                _ok(_array(_ref("HistoryEntry"), max_items=defaults.HISTORY_LENGTH)),
                400,
                404,
            ),
        },
        "/job/{id}/state/{state}": {
            "parameters": [_JOB_ID, _path("state", _STATE, "Only a worker makes a job active.")],
            "put": _write(
                "jobs",
                "Move a job to another state",
                _ok(_message("updated state")),
                400,
                404,
                409,
            ),
        },
        "/job/{id}/priority/{priority}": {
            "parameters": [_JOB_ID, _path("priority", _PRIORITY, example="high")],
            "put": _write(
                "jobs", "Change a job's priority", _ok(_message("updated priority")), 400, 404
            ),
        },
        **_control(),
        **_split_paths(),
        "/jobs/{from}..{to}": {"parameters": _RANGE, "get": listing},
        "/jobs/{from}..{to}/{order}": {"parameters": [*_RANGE, _ORDER], "get": listing},
        "/jobs/{state}/{from}..{to}": {"parameters": [_STATE_PARAM, *_RANGE], "get": by_state},
        "/jobs/{state}/{from}..{to}/{order}": {
            "parameters": [_STATE_PARAM, *_RANGE, _ORDER],
            "get": by_state,
        },
        "/jobs/{type}/{state}/{from}..{to}": {
            "parameters": [_TYPE_PARAM, _STATE_PARAM, *_RANGE],
            "get": by_state,
        },
        "/jobs/{type}/{state}/{from}..{to}/{order}": {
            "parameters": [_TYPE_PARAM, _STATE_PARAM, *_RANGE, _ORDER],
            "get": by_state,
        },
        "/jobs/{type}/{state}/stats": {
            "parameters": [_TYPE_PARAM, _STATE_PARAM],
            "get": _get(
                "listing",
                "Number of jobs of one type in one state",
                _ok(_object({"count": _COUNT})),
                400,
            ),
        },
        "/jobs/failed/retry": {
            "post": _bulk("Every failed job back to inactive, attempts anew", post=True)
        },
        "/jobs/delayed/promote": {"post": _bulk("Every delayed job inactive now", post=True)},
        "/jobs/{state}": {
            "parameters": [
                _path("state", {"enum": [s for s in STATES if s != "active"]}, example="complete")
            ],
            "delete": _bulk("Delete every job in a state (not active)"),
        },
        "/paused": {"get": _get("pausing", "The paused job types", _ok(_names()))},
        "/paused/{type}": {
            "parameters": [_TYPE_PARAM],
            "put": _write(
                "pausing",
                "Stop workers of every process from claiming jobs of this type",
                _ok(_object({"message": {"type": "string"}, "changed": {"type": "boolean"}})),
                400,
            ),
            "delete": _write(
                "pausing",
                "Let workers claim jobs of a paused type again",
                _ok(_object({"message": {"type": "string"}, "changed": {"type": "boolean"}})),
                400,
            ),
        },
        "/workers": {
            "get": _get("watching", "The live worker processes", _ok(_array(_ref("Worker"))))
        },
        "/throughput": {
            "get": _get(
                "watching",
                "Jobs completed and failed for good per minute, oldest first",
                _ok(_array(_ref("Minute"), min_items=1, max_items=defaults.THROUGHPUT_MINUTES)),
                400,
                parameters=[_query("minutes", _MINUTES, "Minutes back, this one included.")],
            )
        },
        "/events": {
            "get": _get(
                "watching",
                "Job events as Server-Sent Events, one data: line each (Kue's event message)",
                {
                    "200": {
                        "description": "An endless stream; comments keep it alive",
                        "content": {"text/event-stream": {"schema": {"type": "string"}}},
                    }
                },
                400,
                parameters=[
                    _type_query("Only events of jobs of this type."),
                    _query("id", {"type": "integer", "minimum": 1, "maximum": 10**19 - 1}),
                ],
            )
        },
        "/timings": {
            "get": _get(
                "watching",
                "How long jobs of every known type waited (from their last change while waiting "
                "to their start) and ran (start to the attempt's end) on a UTC day",
                _ok(_ref("Timings")),
                400,
                parameters=[_DAY],
            )
        },
        "/timings/{type}": {
            "parameters": [_TYPE_PARAM],
            "get": _get(
                "watching",
                "How long jobs of one type waited and ran on a UTC day (zeros for a type "
                "without jobs that day)",
                _ok(_ref("TypeTimings")),
                400,
                parameters=[_DAY],
            ),
        },
        "/health": {
            "get": {
                "tags": ["watching"],
                "summary": "200 when Redis answers, else 503 (open without authentication)",
                "security": [],
                "responses": {
                    "200": _json("Redis answers", _health("ok", "up")),
                    "503": _json("Redis does not answer", _health("unavailable", "down")),
                },
            }
        },
        "/openapi.json": {
            "get": {
                "summary": "This document",
                "responses": {
                    "200": _json(
                        "The OpenAPI document",
                        _object(
                            {"openapi": {"type": "string"}, "info": {}, "paths": {}},
                            closed=False,
                        ),
                    ),
                    **_errors(401),
                },
            }
        },
    }


def _split_paths() -> Schema:
    from . import (
        openapi_flows,
        openapi_limits,
        openapi_records,
        openapi_rules,
        openapi_runs,
        openapi_schedules,
    )

    return {
        **openapi_records.paths(),
        **openapi_runs.paths(),
        **openapi_flows.paths(),
        **openapi_schedules.paths(),
        **openapi_limits.paths(),
        **openapi_rules.paths(),
    }


def _remove() -> Schema:
    from . import openapi_flows  # it builds on this module's helpers

    return openapi_flows.remove()


def _control() -> Schema:
    """Job control (``kue_http/control.py``): each answers the job as it is after."""
    return {
        "/job/{id}/cancel": {
            "parameters": [_JOB_ID],
            "post": _write(
                "control",
                "Cancel a job in any state but complete: it fails at once, with the error "
                "'cancelled: <reason>', and is not retried; a running one is stopped in its "
                "worker process",
                _ok(_changed(r"^cancelled job [1-9][0-9]*$")),
                400,
                404,
                409,
                413,
                body=_body(
                    _object(
                        {"reason": {"type": "string", "maxLength": defaults.MAX_REASON}},
                        optional="reason",
                    ),
                    "Optional (an empty body is {}), but a POST must send JSON (CSRF).",
                    required=False,
                ),
            ),
        },
        "/job/{id}/retry": _requeue(
            "retried",
            "Run a failed or complete job again: it waits now, with its attempts anew (another "
            "state: 409, and the job is left as it is)",
        ),
        "/job/{id}/promote": _requeue(
            "promoted",
            "Make a delayed job wait now instead of at its due time (another state: 409)",
        ),
        "/job/{id}/type/{type}": {
            "parameters": [_JOB_ID, {**_TYPE_PARAM, "description": "The job's new type."}],
            "put": _write(
                "control",
                "Put a job under another type, keeping its id, data, priority and state; a "
                "running job only with force=true, which ends its attempt as cancel does and "
                "leaves it inactive under the new type",
                _ok(_changed(r"^moved job [1-9][0-9]* to ")),
                400,
                404,
                409,
                parameters=[
                    _query(
                        "force",
                        {"enum": ["true", "false"]},
                        "Move a running job too (default false: 409).",
                    )
                ],
            ),
        },
        "/job/{id}/data": {
            "parameters": [_JOB_ID],
            "put": _write(
                "control",
                "Replace the data of an inactive, delayed or failed job (active or complete: 409)",
                _ok(_changed(r"^updated the data of job [1-9][0-9]*$")),
                400,
                404,
                409,
                413,
                body=_body({"description": "Any JSON value"}, "The job's new data."),
            ),
        },
        "/workers/{id}/stop": {
            "parameters": [
                _path(
                    "id",
                    {"type": "string", "minLength": 1, "pattern": "^[^/]+$"},
                    "A worker process's id (GET /workers).",
                    example="host:1234:0a1b2c3d",
                )
            ],
            "post": _write(
                "control",
                "Ask a live worker process to shut down gracefully, as SIGTERM does: it claims "
                "nothing more, its running jobs get timeout seconds to finish, the rest go "
                "back to the queue; answered once asked",
                _ok(_message(pattern="^asked worker .+ to stop$")),
                400,
                404,
                413,
                body=_body(
                    _object(
                        {
                            "timeout": {
                                "type": "number",
                                "minimum": 0,
                                "maximum": defaults.MAX_MS // 1000,
                                "description": "Seconds running jobs get to finish (default "
                                f"{defaults.SHUTDOWN_TIMEOUT:g})",
                            }
                        },
                        optional="timeout",
                    ),
                    "Optional (an empty body is {}), but a POST must send JSON (CSRF).",
                    required=False,
                ),
            ),
        },
    }


def _requeue(verb: str, summary: str) -> Schema:
    """A POST that makes a job wait again, from the states it names (``control.py``)."""
    return {
        "parameters": [_JOB_ID],
        "post": _write(
            "control",
            summary,
            _ok(_changed(rf"^{verb} job [1-9][0-9]*$")),
            400,
            404,
            409,
            413,
            body=_body(
                _object({}),
                "Empty, or {}; a POST must send JSON (CSRF).",
                required=False,
            ),
        ),
    }


def _changed(pattern: str) -> Schema:
    return _object({"message": {"type": "string", "pattern": pattern}, "job": _ref("Job")})


def _bulk(summary: str, *, post: bool = False) -> Schema:
    """A bulk action: a write with the optional ``type`` filter and a count in the answer."""
    operation = _write(
        "bulk",
        summary,
        _ok(_object({"message": {"type": "string"}, "count": _COUNT})),
        400,
        parameters=[_type_query("Only jobs of this type.")],
    )
    if post:  # a POST must carry JSON, which the action ignores
        operation["requestBody"] = _body(
            {"description": "Not read"}, "Ignored, but a POST must send JSON (CSRF): send {}."
        )
    return operation


# -- operations ----------------------------------------------------------------------------
def _get(
    tag: str,
    summary: str,
    responses: Schema,
    *errors: int,
    parameters: list[Schema] | None = None,
) -> Schema:
    """A read: answers 401 without credentials and 503 when Redis does not answer."""
    operation: Schema = {"tags": [tag], "summary": summary}
    if parameters:
        operation["parameters"] = parameters
    operation["responses"] = {**responses, **_errors(*errors, 401, 503)}
    return operation


def _write(
    tag: str,
    summary: str,
    responses: Schema,
    *errors: int,
    parameters: list[Schema] | None = None,
    body: Schema | None = None,
) -> Schema:
    """A write: a read that also answers 403 (foreign Origin), 405 (read-only) and 415."""
    operation = _get(tag, summary, responses, *errors, 403, 405, 415, parameters=parameters)
    if body is not None:
        operation["requestBody"] = body
    return operation


def _ok(schema: Schema) -> Schema:
    return {"200": _json("OK", schema)}


def _json(description: str, schema: Schema) -> Schema:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _body(schema: Schema, description: str, *, required: bool = True) -> Schema:
    return {
        "required": required,
        "description": description,
        "content": {"application/json": {"schema": schema}},
    }


# -- errors --------------------------------------------------------------------------------
#: Status -> (name in components/responses, when it is answered).
_ERRORS: dict[int, tuple[str, str]] = {
    400: ("BadRequest", "Bad input (nothing was written)"),
    401: ("Unauthorized", "No or wrong credentials (KUE_AUTH)"),
    403: ("Forbidden", "A write from another site (Origin does not match)"),
    404: ("NotFound", "No job (or worker process) with this id"),
    405: ("ReadOnly", "Read-only mode (KUE_READONLY): no writes"),
    409: ("Conflict", "The job's state does not allow this"),
    413: ("TooLarge", "The body is larger than KUE_MAX_BODY"),
    415: ("NotJson", "A write's body is not application/json, or a POST has none"),
    503: ("Unavailable", "Redis is unavailable"),
}


def _errors(*codes: int) -> Schema:
    return {
        str(code): {"$ref": f"#/components/responses/{_ERRORS[code][0]}"} for code in sorted(codes)
    }


def _error_response(code: int) -> Schema:
    response = _json(_ERRORS[code][1], _ref("Error"))
    if code == 401:
        response["headers"] = {
            "WWW-Authenticate": {"required": True, "schema": {"type": "string"}},
        }
    return response


# -- parameters ----------------------------------------------------------------------------
def _path(name: str, schema: Schema, description: str = "", example: Any = None) -> Schema:
    param: Schema = {"name": name, "in": "path", "required": True, "schema": schema}
    if description:
        param["description"] = description
    if example is not None:
        param["example"] = example
    return param


def _query(name: str, schema: Schema, description: str = "", required: bool = False) -> Schema:
    param: Schema = {"name": name, "in": "query", "required": required, "schema": schema}
    if description:
        param["description"] = description
    return param


def _type_query(description: str) -> Schema:
    """The optional ``type`` filter of bulk actions and events: any job type."""
    return _query("type", _job_type(), description)


def _job_type(segment: bool = False) -> Schema:
    """A job type: not blank, no control characters; in a path segment, no ``/`` either
    (the route could not tell it apart from the next segment)."""
    bad = _CONTROL + "/" if segment else _CONTROL
    return {
        "type": "string",
        "minLength": 1,
        "maxLength": defaults.MAX_TYPE_LENGTH,
        "pattern": rf"^[^{bad}]*[^{bad}\s][^{bad}]*$",
    }


_STATE = {"enum": list(STATES)}
_PRIORITY = {
    "anyOf": [
        {"enum": list(PRIORITIES)},
        {"type": "integer", "minimum": 1 - PRIORITY_LIMIT, "maximum": PRIORITY_LIMIT - 1},
    ],
    "description": "A name, or an integer: lower runs sooner.",
}
_MINUTES = {"type": "integer", "minimum": 1, "maximum": defaults.THROUGHPUT_MINUTES}
_JOB_ID = _path("id", {**_INT64, "minimum": 1}, "A job id.", example=1)
_STATE_PARAM = _path("state", _STATE, example="inactive")
_TYPE_PARAM = _path("type", _job_type(segment=True), "A job type.", example="email")
_DAY = _query(
    "day",
    {"type": "string", "format": "date", "pattern": "^[0-9]{4}-[0-9]{2}-[0-9]{2}$"},
    f"A UTC day, YYYY-MM-DD (default today on the Redis server's clock); the figures are "
    f"kept {defaults.TIMINGS_DAYS} days.",
)
_ORDER = _path("order", {"enum": ["asc", "desc"]}, "Ids ascending (the default) or not.")
_RANGE = [
    _path("from", _INT64, "First rank of the window (negative: from the end).", example=0),
    _path("to", _INT64, "Last rank of the window, included (-1: the last).", example=9),
]


# -- schemas -------------------------------------------------------------------------------
def _ref(name: str) -> Schema:
    return {"$ref": f"#/components/schemas/{name}"}


def _object(properties: Schema, *, optional: str = "", closed: bool = True) -> Schema:
    """An object with these properties, all required but the ``optional`` ones (names
    separated by spaces); no others when ``closed``."""
    schema: Schema = {
        "type": "object",
        "required": [name for name in properties if name not in optional.split()],
        "properties": properties,
    }
    if closed:
        schema["additionalProperties"] = False
    return schema


def _array(
    items: Schema, description: str = "", *, min_items: int = 0, max_items: int | None = None
) -> Schema:
    schema: Schema = {"type": "array", "items": items}
    if min_items:
        schema["minItems"] = min_items
    if max_items is not None:
        schema["maxItems"] = max_items
    if description:
        schema["description"] = description
    return schema


def _names() -> Schema:
    """Job types, sorted."""
    return {"type": "array", "items": {"type": "string"}, "uniqueItems": True}


def _message(text: str | None = None, *, pattern: str | None = None) -> Schema:
    message: Schema = {"type": "string"}
    if text is not None:
        message["const"] = text
    if pattern is not None:
        message["pattern"] = pattern
    return _object({"message": message})


def _health(status: str, redis: str) -> Schema:
    return _object({"status": {"const": status}, "redis": {"const": redis}})


def _schemas() -> Schema:
    from . import openapi_flows as flows  # they build on this module's helpers
    from . import openapi_limits as limits
    from . import openapi_records as records
    from . import openapi_rules as rules
    from . import openapi_runs as runs
    from . import openapi_schedules as schedules

    state = {"enum": list(STATES)}
    options = {
        **_OPTIONS,
        "properties": {
            **_OPTIONS["properties"],
            **records.OPTIONS,
            **flows.OPTIONS,
            **limits.OPTIONS,
            **runs.OPTIONS,
        },
    }
    new_job = _object(
        {
            "type": _job_type(),
            "data": {"description": "Any JSON value (default {})"},
            "options": options,
        },
        optional="data options",
    )
    return {
        "Error": _object({"error": {"type": "string", "minLength": 1}}),
        "Stats": _object({**{f"{s}Count": _COUNT for s in STATES}, "workTime": _COUNT}),
        "Job": _object(
            {
                "id": {"type": "integer", "minimum": 1},
                "type": {"type": "string"},
                "data": {"description": "Any JSON value"},
                "result": {"description": "What the handler returned (complete jobs)"},
                "priority": {
                    "type": ["integer", "null"],
                    "description": "null when another client stored a priority that is not "
                    "a number",
                },
                "progress": {"type": "number", "minimum": 0, "maximum": 100},
                "progress_data": {"description": "Any JSON value"},
                "state": state,
                "error": {"type": "string"},
                "created_at": _MS,
                "promote_at": _MS,
                "updated_at": _MS,
                "failed_at": _MS,
                "started_at": _MS,
                "duration": {"type": "integer", "minimum": 0, "description": "ms"},
                "delay": {"type": "integer", "minimum": 1, "description": "ms"},
                "workerId": {"type": "string"},
                "ttl": {"type": "integer", "minimum": 1, "description": "ms"},
                "attempts": _object(
                    {
                        "made": _COUNT,
                        "remaining": {"type": "integer"},
                        "max": {"type": "integer", "minimum": 1},
                    }
                ),
                "unique": _object(
                    {"key": {"type": "string"}, "mode": {"enum": list(_UNIQUE_MODES)}}
                ),
                **records.JOB_FIELDS,
                **flows.JOB_FIELDS,
                **schedules.JOB_FIELDS,
                **limits.JOB_FIELDS,
                **runs.JOB_FIELDS,
            },
            optional="result progress_data error created_at promote_at updated_at failed_at "
            f"started_at duration delay workerId ttl unique {records.JOB_OPTIONAL} "
            + f"{flows.JOB_OPTIONAL} {schedules.JOB_OPTIONAL} {limits.JOB_OPTIONAL} "
            + runs.JOB_OPTIONAL,
        ),
        "NewJob": new_job,
        **flows.schemas(new_job),
        **schedules.schemas({**records.OPTIONS, **runs.OPTIONS}),
        **limits.schemas(),
        **rules.schemas(),
        **runs.schemas(),
        "Created": _object(
            {
                "message": {
                    "enum": ["job created", "job deduplicated"],
                    "description": "job deduplicated: nothing new was saved, id is the job "
                    "holding the unique key",
                },
                "id": {"type": "integer", "minimum": 1},
            }
        ),
        "HistoryEntry": _object(
            {
                "state": state,
                "at": _MS,
                "from": state,
                "worker": {"type": "string"},
                "attempt": {"type": "integer", "minimum": 1},
                "duration": {"type": "integer", "minimum": 0},
                "error": {"type": "string"},
                "stalled": {"type": "integer", "minimum": 1},
                "released": {"const": True},
                "cancelled": {"type": "string", "description": "The reason (may be empty)"},
                "moved": _object({"from": {"type": "string"}, "to": {"type": "string"}}),
                "edited": {"const": True},
            },
            optional="from worker attempt duration error stalled released cancelled moved edited",
        ),
        "Worker": _object(
            {
                "id": {"type": "string"},
                "host": {"type": "string"},
                "pid": {"type": "integer", "minimum": 1},
                "types": {
                    "type": "object",
                    "additionalProperties": {"type": "integer", "minimum": 1},
                    "description": "Job type -> handlers running it",
                },
                "started_at": _MS,
                "lease_ms": {"type": "integer", "minimum": 1},
                "abandoned_threads": {
                    **_COUNT,
                    "description": "Handler threads left running past their attempt",
                },
                "jobs": _array({"type": "integer", "minimum": 1}, "Ids of the jobs it runs."),
                "heartbeat": _MS,
                "paused": {
                    **_names(),
                    "description": "Types paused in this process only (pause with local)",
                },
                "stopping": {
                    "type": "boolean",
                    "description": "Shutting down (a signal or a remote stop): claims nothing",
                },
            },
            optional="abandoned_threads paused stopping",
        ),
        "Timing": _object(
            {
                "count": _COUNT,
                "mean_ms": {
                    "type": ["number", "null"],
                    "minimum": 0,
                    "description": "null when count is 0",
                },
                "stddev_ms": {"type": ["number", "null"], "minimum": 0},
                "buckets": {
                    "type": "array",
                    "description": "[upper bound in ms (null: no bound), jobs in this bucket and "
                    "no lower one]: not cumulative",
                    "items": {
                        "type": "array",
                        "prefixItems": [
                            {"enum": [*defaults.DURATION_BUCKETS_MS, None]},
                            _COUNT,
                        ],
                        "items": False,
                        "minItems": 2,
                    },
                    "minItems": len(defaults.DURATION_BUCKETS_MS) + 1,
                    "maxItems": len(defaults.DURATION_BUCKETS_MS) + 1,
                },
            }
        ),
        "TypeTimings": _object(
            {
                "type": {"type": "string"},
                "day": {"type": "string", "format": "date"},
                "wait": _ref("Timing"),
                "run": _ref("Timing"),
            }
        ),
        "Timings": _object(
            {
                "day": {"type": "string", "format": "date"},
                "types": {
                    "type": "object",
                    "description": "Every known job type (GET /job/types) -> its figures",
                    "additionalProperties": _object(
                        {"wait": _ref("Timing"), "run": _ref("Timing")}
                    ),
                },
            }
        ),
        "Minute": _object(
            {"at": {**_MS, "multipleOf": 60_000}, "complete": _COUNT, "failed": _COUNT}
        ),
    }


#: ``Job.unique``'s modes, the first the default.
_UNIQUE_MODES = ("until_done", "throttle", "debounce", "reuse")
#: ``options.unique`` (``_unique`` in api.py, checked by ``kue_core.job.Job.unique``).
_UNIQUE: Schema = {
    **_object(
        {
            "key": {
                "type": "string",
                "minLength": 1,
                "maxLength": defaults.MAX_UNIQUE_KEY,
                "pattern": rf"^[^{_CONTROL}]*$",
                "not": {"const": "jobs"},
            },
            "mode": {"enum": list(_UNIQUE_MODES), "default": _UNIQUE_MODES[0]},
            "ttl": {
                "type": ["number", "null"],
                "minimum": 1,
                "maximum": defaults.MAX_MS,
                "description": "ms the key holds: required for throttle, refused for reuse, "
                "a safety expiry for until_done and debounce",
            },
        },
        optional="mode ttl",
    ),
    "description": "At most one job per key: until_done (while it is not finished), throttle "
    "(for ttl ms from the first save), debounce (a delayed job's data is replaced and its due "
    "time pushed back), reuse (one job per key for ever, re-queued: Node kue-unique's). A "
    "duplicate saves nothing new and is answered 'job deduplicated' with the job's id.",
    "allOf": [
        {
            "if": {"required": ["mode"], "properties": {"mode": {"const": "throttle"}}},
            "then": {"required": ["ttl"], "properties": {"ttl": {"type": "number"}}},
        },
        {
            "if": {"required": ["mode"], "properties": {"mode": {"const": "reuse"}}},
            "then": {"properties": {"ttl": {"type": "null"}}},
        },
    ],
}
#: ``POST /job`` options (``_OPTIONS`` in api.py and the setters of ``kue_core.job.Job``).
_OPTIONS: Schema = {
    "type": ["object", "null"],
    "properties": {
        "attempts": {"type": "integer", "minimum": 1},
        "priority": _PRIORITY,
        "delay": {
            "type": "number",
            "minimum": 0,
            "maximum": defaults.MAX_MS,
            "description": "ms before it may run",
        },
        "ttl": {
            "type": "number",
            "minimum": 1,
            "maximum": defaults.MAX_MS,
            "description": "ms an attempt may run",
        },
        "backoff": {
            "anyOf": [
                {"type": ["boolean", "null"]},
                _object(
                    {
                        "type": {"enum": ["fixed", "exponential"]},
                        "delay": {"type": ["number", "null"], "minimum": 0},
                        "maxDelay": {"type": ["number", "null"], "minimum": 0},
                        "max_delay": {
                            "type": ["number", "null"],
                            "minimum": 0,
                            "deprecated": True,
                            "description": "maxDelay's former name; not with maxDelay.",
                        },
                        "jitter": {"type": ["number", "null"], "minimum": 0, "maximum": 1},
                    },
                    optional="delay maxDelay max_delay jitter",
                ),
            ]
        },
        "unique": _UNIQUE,
    },
    "additionalProperties": False,
}
