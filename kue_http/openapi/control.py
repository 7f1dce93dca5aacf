"""Job control in the OpenAPI document (``kue_http/control.py``): cancel, retry, promote,
move, edits of a job's data, and asking a worker process to stop."""

from __future__ import annotations

from kue_core import defaults

from .build import (
    JOB_ID,
    TYPE_PARAM,
    Schema,
    changed,
    json_body,
    message,
    obj,
    ok,
    path_param,
    query_param,
    write,
)


def paths() -> Schema:
    """Job control (``kue_http/control.py``): each answers the job as it is after."""
    return {
        "/job/{id}/cancel": {
            "parameters": [JOB_ID],
            "post": write(
                "control",
                "Cancel a job in any state but complete: it fails at once, with the error "
                "'cancelled: <reason>', and is not retried; a running one is stopped in its "
                "worker process",
                ok(changed(r"^cancelled job [1-9][0-9]*$")),
                400,
                404,
                409,
                413,
                body=json_body(
                    obj(
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
            "parameters": [JOB_ID, {**TYPE_PARAM, "description": "The job's new type."}],
            "put": write(
                "control",
                "Put a job under another type, keeping its id, data, priority and state; a "
                "running job only with force=true, which ends its attempt as cancel does and "
                "leaves it inactive under the new type",
                ok(changed(r"^moved job [1-9][0-9]* to ")),
                400,
                404,
                409,
                parameters=[
                    query_param(
                        "force",
                        {"enum": ["true", "false"]},
                        "Move a running job too (default false: 409).",
                    )
                ],
            ),
        },
        "/job/{id}/data": {
            "parameters": [JOB_ID],
            "put": write(
                "control",
                "Replace the data of an inactive, delayed or failed job (active or complete: 409)",
                ok(changed(r"^updated the data of job [1-9][0-9]*$")),
                400,
                404,
                409,
                413,
                body=json_body({"description": "Any JSON value"}, "The job's new data."),
            ),
        },
        "/job/{id}/reveal": {
            "parameters": [JOB_ID],
            "post": write(
                "control",
                "Show a job whole: its payload with nothing hidden (see the Job's hidden). Needs "
                "the role of KUE_REVEAL_ROLE (admin unless set); recorded in the audit log (who, "
                "which job, what was hidden) before it is answered",
                ok(
                    obj(
                        {
                            "message": {"type": "string", "pattern": "^(revealed job|job) "},
                            "revealed": {
                                "type": "array",
                                "items": {"type": "string"},
                                "description": "What the user's view hides (the Job's hidden)",
                            },
                            "job": {"$ref": "#/components/schemas/Job"},
                        }
                    )
                ),
                400,
                404,
                413,
                body=json_body(
                    obj({}),
                    "Empty, or {}; a POST must send JSON (CSRF).",
                    required=False,
                ),
            ),
        },
        "/workers/{id}/stop": {
            "parameters": [
                path_param(
                    "id",
                    {"type": "string", "minLength": 1, "pattern": "^[^/]+$"},
                    "A worker process's id (GET /workers).",
                    example="host:1234:0a1b2c3d",
                )
            ],
            "post": write(
                "control",
                "Ask a live worker process to shut down gracefully, as SIGTERM does: it claims "
                "nothing more, its running jobs get timeout seconds to finish, the rest go "
                "back to the queue; answered once asked",
                ok(message(pattern="^asked worker .+ to stop$")),
                400,
                404,
                413,
                body=json_body(
                    obj(
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
        "parameters": [JOB_ID],
        "post": write(
            "control",
            summary,
            ok(changed(rf"^{verb} job [1-9][0-9]*$")),
            400,
            404,
            409,
            413,
            body=json_body(
                obj({}),
                "Empty, or {}; a POST must send JSON (CSRF).",
                required=False,
            ),
        ),
    }
