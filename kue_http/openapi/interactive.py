"""Interactive jobs (issue 55) in the OpenAPI document: a running job's stream of partial
output (``GET /job/{id}/stream``); the package merges it in."""

from __future__ import annotations

from .build import JOB_ID, Schema, query_param, read

#: A stream entry id (``<ms>-<seq>``): where a reader resumes after a part.
ENTRY_ID: Schema = {"type": "string", "pattern": "^[0-9]{1,19}(-[0-9]{1,19})?$"}


_JSON = {"type": "string", "contentMediaType": "application/json"}
#: One event of a job's stream.
_EVENT: Schema = {
    "oneOf": [
        {
            "type": "object",
            "required": ["event", "id", "data"],
            "properties": {
                "event": {"const": "part"},
                "id": ENTRY_ID,
                "data": {
                    **_JSON,
                    "contentSchema": {
                        "type": "object",
                        "required": ["attempt", "value"],
                        "properties": {"attempt": {"type": "integer", "minimum": 0}, "value": {}},
                    },
                },
            },
        },
        {
            "type": "object",
            "required": ["event", "data"],
            "properties": {
                "event": {"enum": ["end", "error"]},
                "data": {
                    **_JSON,
                    "contentSchema": {
                        "type": "object",
                        "properties": {"state": {"type": "string"}, "error": {"type": "string"}},
                    },
                },
            },
        },
    ]
}


def paths() -> dict[str, Schema]:
    return {
        "/job/{id}/stream": {
            "parameters": [JOB_ID],
            "get": read(
                "jobs",
                "A running job's stream of partial output as Server-Sent Events: each part an "
                'event \'part\' (its id the part\'s entry id, its data {"attempt", "value"}, '
                "the value '[hidden]' for a role that may not see payloads), then one event "
                "'end' ({\"state\"}) once the job has ended and every part is sent. A client "
                "resumes after the last part it had with the Last-Event-ID header (as a "
                "browser's EventSource does) or ?after=",
                {
                    "200": {
                        "description": "The parts, comments keeping the stream alive, then end",
                        "content": {"text/event-stream": {"schema": _EVENT}},
                    }
                },
                400,
                404,
                parameters=[
                    query_param("after", ENTRY_ID, "Start after this part (its entry id)."),
                    query_param(
                        "once",
                        {"type": "string", "enum": ["true", "false"]},
                        "true: send the parts held now, then end (its state the job's now).",
                    ),
                    {
                        "name": "Last-Event-ID",
                        "in": "header",
                        "required": False,
                        "schema": ENTRY_ID,
                        "description": "Start after this part (wins over ?after=).",
                    },
                ],
            ),
        },
    }
