"""Interactive jobs in the OpenAPI document: a running job's stream of partial output (``GET
/job/{id}/stream``), signals (``POST /job/{id}/signal``, a job's ``signals``, ``waiting_for``
and ``resumed``, their history entries); the package merges it in."""

from __future__ import annotations

from kue_core import defaults

from .build import JOB_ID, MS, Schema, json_body, obj, query_param, read, ref, write

#: A signal's name.
SIGNAL_NAME: Schema = {"type": "string", "pattern": f"^{defaults.SIGNAL_NAME_RULE}$"}
_BY: Schema = {"enum": ["signal", "timeout", "doctor"]}
#: A job's signal fields (kue_core/features/signals.py).
JOB_FIELDS: Schema = {
    "signals": {
        "type": ["object", "string"],
        "description": "The signals it was given: name -> payload ([hidden] for a role that "
        "may not see payloads)",
    },
    "waiting_for": {
        **obj(
            {
                "name": SIGNAL_NAME,
                "until": {"type": ["integer", "null"], "description": "Its deadline (ms)"},
                "on_timeout": {"enum": ["resume", "fail"]},
            }
        ),
        "description": "The signal a suspended job waits for",
    },
    "resumed": {
        **obj({"name": SIGNAL_NAME, "by": _BY, "at": MS}),
        "description": "How its last wait for a signal ended",
    },
}
JOB_FIELDS["steps"] = {
    "type": ["object", "string"],
    "description": "The steps it recorded: name -> result ([hidden] for a role that may not "
    "see payloads)",
}
JOB_OPTIONAL = " ".join(JOB_FIELDS)
#: Fields of history entries of signals.
HISTORY_FIELDS: Schema = {
    "signal": {**SIGNAL_NAME, "description": "The signal waited for"},
    "by": {**_BY, "description": "What ended the wait"},
    "until": {**MS, "description": "The wait's deadline"},
    "step": {**SIGNAL_NAME, "description": "A step it recorded (job.step())"},
    "streamed": {"type": "integer", "minimum": 1, "description": "This attempt streamed"},
}

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
        "/job/{id}/signal": {
            "parameters": [JOB_ID],
            "post": write(
                "control",
                "Give a job a signal (its handler reads the payload as job.signals[name]): a "
                "job suspended waiting for it waits for a worker again (resumed); else it is "
                "kept for the job (kept); a second signal of a name changes nothing (already). "
                "A job that has ended: 409",
                {
                    "200": {
                        "description": (
                            "What the signal did, and the job as it is now (null when it "
                            "was removed meanwhile: it ran and was removed on completion)"
                        ),
                        "content": {
                            "application/json": {
                                "schema": obj(
                                    {
                                        "message": {"type": "string"},
                                        "outcome": {"enum": ["resumed", "kept", "already"]},
                                        "job": {"anyOf": [ref("Job"), {"type": "null"}]},
                                    }
                                )
                            }
                        },
                    }
                },
                400,
                404,
                409,
                body=json_body(
                    obj(
                        {
                            "name": SIGNAL_NAME,
                            "payload": {
                                "description": "Any JSON value, at most "
                                f"{defaults.SIGNAL_PAYLOAD_BYTES:,} bytes of JSON"
                            },
                        },
                        optional="payload",
                    ),
                    "The signal.",
                ),
            ),
        },
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
