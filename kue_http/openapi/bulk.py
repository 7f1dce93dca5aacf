"""Bulk actions on a filter in the OpenAPI document (``kue_http/bulk.py``)."""

from __future__ import annotations

from kue_core import BULK_ACTIONS, STATES, defaults
from kue_core import BULK_MAX_EXAMPLES as MAX_EXAMPLES

from .build import (
    Schema,
    array,
    job_type,
    json_answer,
    json_body,
    obj,
    ok,
    path_param,
    query_param,
    read,
    write,
)

_COUNT = {"type": "integer", "minimum": 0}
_TAG = {"type": "string", "minLength": 1, "maxLength": defaults.MAX_TAG}
_WORDS = {"type": "string", "maxLength": 1000, "description": "Whole words, all of them"}
_AGE = {"type": "integer", "minimum": 0, "maximum": defaults.MAX_MS}
_FILTER = obj(
    {
        "state": {"enum": list(STATES)},
        "type": job_type(),
        "tag": _TAG,
        "words": _WORDS,
        "min_age_ms": {**_AGE, "description": "Created at least this long ago (ms)"},
    },
    optional="type tag words min_age_ms",
)
_NULLABLE = {"type": ["string", "null"]}
_RUN = obj(
    {
        "id": {"type": ["string", "null"]},
        "action": {"enum": list(BULK_ACTIONS)},
        "filter": obj(
            {
                "state": {"enum": list(STATES)},
                "type": _NULLABLE,
                "tag": _NULLABLE,
                "words": _NULLABLE,
                "min_age_ms": {"type": ["integer", "null"]},
            }
        ),
        "expect": {
            "type": ["integer", "null"],
            "description": "The count confirmed (given as expect): the most jobs it acts on",
        },
        "matched": {**_COUNT, "description": "Jobs the filter matched so far"},
        "done": {**_COUNT, "description": "Jobs acted on so far"},
        "state": {"enum": ["running", "done", "stopped", "interrupted"]},
        "started_at": {"type": "integer"},
        "updated_at": {"type": "integer"},
        "stopping": {"type": "boolean"},
        "follow": {"type": "string", "description": "Where to follow it while it runs"},
    },
    optional="stopping follow",
)
_CHANGED = obj(
    {
        "error": {"type": "string"},
        "matched": {**_COUNT, "description": "Jobs the filter matches now"},
        "expected": {**_COUNT, "description": "The count given as expect"},
    }
)
_RUN_ID = path_param(
    "run_id", {"type": "string", "pattern": "^[0-9a-f]{32}$"}, example="0123456789abcdef" * 2
)


def paths() -> Schema:
    return {
        "/jobs/match": {
            "get": read(
                "bulk",
                "How many jobs a filter matches (of a state; of a type, with a tag, found by "
                "words, old enough)",
                ok(
                    obj(
                        {
                            "matched": _COUNT,
                            "filter": obj({}, closed=False),
                            "examples": array(
                                obj(
                                    {
                                        "id": {"type": "integer", "minimum": 1},
                                        "type": {"type": "string"},
                                        "title": {
                                            "type": ["string", "null"],
                                            "description": "data.title, its first 200 characters",
                                        },
                                    }
                                ),
                                "Some of the jobs matched (the first found)",
                                max_items=MAX_EXAMPLES,
                            ),
                        }
                    )
                ),
                400,
                parameters=[
                    query_param("state", {"enum": list(STATES)}, required=True),
                    query_param("type", job_type()),
                    query_param("tag", _TAG),
                    query_param("words", _WORDS),
                    query_param("min_age_ms", _AGE),
                    query_param(
                        "examples",
                        {"type": "integer", "minimum": 0, "maximum": MAX_EXAMPLES, "default": 5},
                    ),
                ],
            )
        },
        "/jobs/bulk": {
            "post": write(
                "bulk",
                "Retry, remove, promote or cancel every job a filter matches, in batches: the "
                "outcome (200), the progress so far and where to follow it (202), or the count "
                "now when it is not the one confirmed (409)",
                {
                    "200": json_answer("Done", _RUN),
                    "202": json_answer("Still running: follow it", _RUN),
                    "409": json_answer(
                        "The filter matches another number than expect: nothing was done; ask "
                        "again with matched",
                        _CHANGED,
                    ),
                },
                400,
                body=json_body(
                    obj(
                        {
                            "action": {"enum": list(BULK_ACTIONS)},
                            "filter": _FILTER,
                            "reason": {"type": "string", "maxLength": defaults.MAX_REASON},
                            "expect": {
                                **_COUNT,
                                "maximum": 2**63 - 1,
                                "description": "The count an operator confirmed: when the "
                                "filter matches another number as the action starts, nothing "
                                "is done (409); else it acts on this many jobs at most",
                            },
                        },
                        optional="reason expect",
                    ),
                    "The action, the filter, for cancel a reason, and the count confirmed",
                ),
            )
        },
        "/jobs/bulk/{run_id}": {
            "parameters": [_RUN_ID],
            "get": read("bulk", "A bulk action's progress", ok(_RUN), 404),
            "delete": write("bulk", "Stop a running bulk action after its batch", ok(_RUN), 404),
        },
    }
