"""``POST /job``'s options in the OpenAPI document: the core ones and ``unique`` (the parts
add theirs in ``schemas``)."""

from __future__ import annotations

from kue_core import defaults

from .build import CONTROL, PRIORITY, Schema, obj

UNIQUE_MODES = ("until_done", "throttle", "debounce", "reuse")
#: ``options.unique`` (``_unique`` in api.py, checked by ``kue_core.jobs.job.Job.unique``).
UNIQUE: Schema = {
    **obj(
        {
            "key": {
                "type": "string",
                "minLength": 1,
                "maxLength": defaults.MAX_UNIQUE_KEY,
                "pattern": rf"^[^{CONTROL}]*$",
                "not": {"const": "jobs"},
            },
            "mode": {"enum": list(UNIQUE_MODES), "default": UNIQUE_MODES[0]},
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
#: ``POST /job`` options (``JOB_OPTIONS`` in api.py and the setters of ``kue_core.jobs.job.Job``).
JOB_OPTIONS: Schema = {
    "type": ["object", "null"],
    "properties": {
        "attempts": {"type": "integer", "minimum": 1},
        "priority": PRIORITY,
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
                obj(
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
        "unique": UNIQUE,
    },
    "additionalProperties": False,
}
