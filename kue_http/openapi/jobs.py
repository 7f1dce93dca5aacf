"""Kue's routes in the OpenAPI document, and those beside them: stats, types, jobs and their
logs, the listings (one path per form of ``/jobs/...``), bulk actions, pausing, workers,
events, health."""

from __future__ import annotations

from kue_core import STATES, defaults

from . import flows
from .build import (
    COUNT,
    DAY,
    JOB_ID,
    MINUTES,
    ORDER,
    PRIORITY,
    RANGE,
    STATE,
    STATE_PARAM,
    TYPE_PARAM,
    Schema,
    array,
    error_refs,
    health,
    json_answer,
    json_body,
    message,
    names,
    obj,
    ok,
    path_param,
    query_param,
    read,
    ref,
    type_query,
    write,
)


def paths(max_page: int) -> Schema:
    jobs = array(ref("Job"), f"At most {max_page} jobs (KUE_MAX_PAGE); a larger window is 400.")
    listing = read("listing", "Jobs in a window of ranks, sorted by id", ok(jobs), 400)
    by_finish = query_param(
        "by",
        {"enum": ["queue", "finished"]},
        "queue (Kue's: the window of the state's set, sorted by id), or finished: complete "
        "or failed jobs in the order they finished, ranks from 0, oldest first (desc: newest "
        "first), not sorted after (another state: 400).",
    )
    by_state = read(
        "listing",
        "Jobs of a state in a window of ranks, sorted by id, or by when they finished",
        ok(jobs),
        400,
        parameters=[by_finish],
    )
    return {
        "/stats": {"get": read("jobs", "Number of jobs in each state", ok(ref("Stats")))},
        "/job/types": {"get": read("jobs", "Every job type ever saved", ok(names()))},
        "/job": {
            "post": write(
                "jobs",
                "Create one job, or several: each element of an array is created or refused "
                "on its own, in its place in the answer",
                {
                    "200": json_answer(
                        "Created",
                        {"oneOf": [ref("Created"), array(ref("Created"), min_items=1)]},
                    ),
                    "204": {"description": "The body was {} or []: nothing to create"},
                    "400": json_answer(
                        "Bad input: one job or the body refused (nothing was written), or an "
                        "array with at least one job refused (the others were saved)",
                        {
                            "oneOf": [
                                ref("Error"),
                                array({"oneOf": [ref("Created"), ref("Error")]}, min_items=1),
                            ]
                        },
                    ),
                },
                413,
                body=json_body(
                    {
                        "anyOf": [
                            ref("NewJob"),
                            array(ref("NewJob")),
                            {"type": "object", "maxProperties": 0},
                        ]
                    },
                    "One job, an array of jobs, or {} (nothing).",
                ),
            )
        },
        "/job/{id}": {
            "parameters": [JOB_ID],
            "get": read("jobs", "One job", ok(ref("Job")), 400, 404),
            "delete": flows.remove(),
        },
        "/job/{id}/log": {
            "parameters": [JOB_ID],
            "get": read("jobs", "The job's log lines", ok(array({"type": "string"})), 400, 404),
        },
        "/job/{id}/history": {
            "parameters": [JOB_ID],
            "get": read(
                "jobs",
                f"The job's last {defaults.HISTORY_LENGTH} transitions, oldest first",
                ok(array(ref("HistoryEntry"), max_items=defaults.HISTORY_LENGTH)),
                400,
                404,
            ),
        },
        "/job/{id}/state/{state}": {
            "parameters": [JOB_ID, path_param("state", STATE, "Only a worker makes a job active.")],
            "put": write(
                "jobs",
                "Move a job to another state",
                ok(message("updated state")),
                400,
                404,
                409,
            ),
        },
        "/job/{id}/priority/{priority}": {
            "parameters": [JOB_ID, path_param("priority", PRIORITY, example="high")],
            "put": write(
                "jobs", "Change a job's priority", ok(message("updated priority")), 400, 404
            ),
        },
        "/jobs/{from}..{to}": {"parameters": RANGE, "get": listing},
        "/jobs/{from}..{to}/{order}": {"parameters": [*RANGE, ORDER], "get": listing},
        "/jobs/{state}/{from}..{to}": {"parameters": [STATE_PARAM, *RANGE], "get": by_state},
        "/jobs/{state}/{from}..{to}/{order}": {
            "parameters": [STATE_PARAM, *RANGE, ORDER],
            "get": by_state,
        },
        "/jobs/{type}/{state}/{from}..{to}": {
            "parameters": [TYPE_PARAM, STATE_PARAM, *RANGE],
            "get": by_state,
        },
        "/jobs/{type}/{state}/{from}..{to}/{order}": {
            "parameters": [TYPE_PARAM, STATE_PARAM, *RANGE, ORDER],
            "get": by_state,
        },
        "/jobs/{type}/{state}/stats": {
            "parameters": [TYPE_PARAM, STATE_PARAM],
            "get": read(
                "listing",
                "Number of jobs of one type in one state",
                ok(obj({"count": COUNT})),
                400,
            ),
        },
        "/jobs/failed/retry": {
            "post": _bulk("Every failed job back to inactive, attempts anew", post=True)
        },
        "/jobs/delayed/promote": {"post": _bulk("Every delayed job inactive now", post=True)},
        "/jobs/{state}": {
            "parameters": [
                path_param(
                    "state", {"enum": [s for s in STATES if s != "active"]}, example="complete"
                )
            ],
            "delete": _bulk("Delete every job in a state (not active)"),
        },
        "/paused": {"get": read("pausing", "The paused job types", ok(names()))},
        "/paused/{type}": {
            "parameters": [TYPE_PARAM],
            "put": write(
                "pausing",
                "Stop workers of every process from claiming jobs of this type",
                ok(obj({"message": {"type": "string"}, "changed": {"type": "boolean"}})),
                400,
            ),
            "delete": write(
                "pausing",
                "Let workers claim jobs of a paused type again",
                ok(obj({"message": {"type": "string"}, "changed": {"type": "boolean"}})),
                400,
            ),
        },
        "/workers": {
            "get": read("watching", "The live worker processes", ok(array(ref("Worker"))))
        },
        "/throughput": {
            "get": read(
                "watching",
                "Jobs completed and failed for good per minute, oldest first",
                ok(array(ref("Minute"), min_items=1, max_items=defaults.THROUGHPUT_MINUTES)),
                400,
                parameters=[query_param("minutes", MINUTES, "Minutes back, this one included.")],
            )
        },
        "/events": {
            "get": read(
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
                    type_query("Only events of jobs of this type."),
                    query_param("id", {"type": "integer", "minimum": 1, "maximum": 10**19 - 1}),
                ],
            )
        },
        "/timings": {
            "get": read(
                "watching",
                "How long jobs of every known type waited (from their last change while waiting "
                "to their start) and ran (start to the attempt's end) on a UTC day",
                ok(ref("Timings")),
                400,
                parameters=[DAY],
            )
        },
        "/timings/{type}": {
            "parameters": [TYPE_PARAM],
            "get": read(
                "watching",
                "How long jobs of one type waited and ran on a UTC day (zeros for a type "
                "without jobs that day)",
                ok(ref("TypeTimings")),
                400,
                parameters=[DAY],
            ),
        },
        "/health": {
            "get": {
                "tags": ["watching"],
                "summary": "200 when Redis answers, else 503 (open without authentication)",
                "security": [],
                "responses": {
                    "200": json_answer("Redis answers", health("ok", "up")),
                    "503": json_answer("Redis does not answer", health("unavailable", "down")),
                },
            }
        },
        "/openapi.json": {
            "get": {
                "summary": "This document",
                "responses": {
                    "200": json_answer(
                        "The OpenAPI document",
                        obj(
                            {"openapi": {"type": "string"}, "info": {}, "paths": {}},
                            closed=False,
                        ),
                    ),
                    **error_refs(401),
                },
            }
        },
    }


def _bulk(summary: str, *, post: bool = False) -> Schema:
    """A bulk action: a write with the optional ``type`` filter and a count in the answer."""
    operation = write(
        "bulk",
        summary,
        ok(obj({"message": {"type": "string"}, "count": COUNT})),
        400,
        parameters=[type_query("Only jobs of this type.")],
    )
    if post:  # a POST must carry JSON, which the action ignores
        operation["requestBody"] = json_body(
            {"description": "Not read"}, "Ignored, but a POST must send JSON (CSRF): send {}."
        )
    return operation
