"""The job records routes (``kue_http/records.py``) and fields in the OpenAPI document:
search through the index, tags, tracking, retention. ``openapi.py`` merges them in."""

from __future__ import annotations

from kue_core import STATES, defaults

from .openapi import (
    _CONTROL,
    _COUNT,
    _JOB_ID,
    Schema,
    _array,
    _body,
    _changed,
    _get,
    _job_type,
    _object,
    _ok,
    _path,
    _query,
    _ref,
    _write,
)

_TAG = {
    "type": "string",
    "minLength": 1,
    "maxLength": defaults.MAX_TAG,
    "pattern": rf"^[^{_CONTROL}]*[^{_CONTROL}\s][^{_CONTROL}]*$",
}
#: In a path segment a tag cannot hold ``/``.
_TAG_PARAM = _path(
    "tag",
    {**_TAG, "pattern": rf"^[^{_CONTROL}/]*[^{_CONTROL}/\s][^{_CONTROL}/]*$"},
    "A tag.",
    example="vip",
)
_PAGE = [
    _query("offset", {"type": "integer", "minimum": 0, "maximum": 10**18 - 1}, "First rank."),
    _query("count", {"type": "integer", "minimum": 0, "maximum": 1000}, "Page size."),
]
_SEARCH = [
    _query(
        "q",
        {"type": "string", "pattern": r"[\w]"},
        "Words: every one must find the job (a word of its type, data.title, search keys or "
        "tags); the last may be a word's start. A job id comes first.",
        True,
    ),
    _query("state", {"enum": list(STATES)}, "Only jobs in this state."),
    _query("type", _job_type(), "Only jobs of this type."),
    *_PAGE,
]
_POLICY: Schema = {
    "anyOf": [
        _object(
            {
                "count": {"type": ["integer", "null"], "minimum": 0, "maximum": 10**12},
                "age": {"type": ["number", "null"], "minimum": 1, "maximum": defaults.MAX_MS},
            },
            optional="count age",
        ),
        {"type": "integer", "minimum": 0, "maximum": 10**12},
    ],
    "description": "Keep the newest count finished jobs, none older than age ms",
}
_SETTING = {"anyOf": [_POLICY, {"type": "null"}, {"const": "default"}]}
_KEPT = _object(
    {
        "count": {"type": ["integer", "null"], "minimum": 0},
        "age": {"type": ["integer", "null"], "minimum": 1, "description": "ms"},
        "source": {"enum": ["queue", "default"]},
    }
)
_RETENTION = _object(
    {
        "complete": _KEPT,
        "failed": _KEPT,
        "memory": _object(
            {
                "used": _COUNT,
                "peak": _COUNT,
                "maxmemory": {**_COUNT, "description": "0: no limit"},
                "policy": {"type": "string"},
            }
        ),
    }
)
_JOBS = _array(_ref("Job"))


def paths() -> Schema:
    search_ids = _array({"type": "string", "pattern": "^[1-9][0-9]*$"}, "Newest first.")
    return {
        "/job/search": {
            "get": _get(
                "jobs",
                "Kue's search: ids of the jobs every word of q finds (see GET /search)",
                _ok(search_ids),
                400,
                parameters=_SEARCH,
            )
        },
        "/search": {
            "get": _get(
                "jobs",
                "Jobs every word of q finds, newest first, through the search index: a page "
                "and the total (a lower bound when exact is false)",
                _ok(
                    _object(
                        {
                            "ids": _array({"type": "integer", "minimum": 1}),
                            "total": _COUNT,
                            "exact": {"type": "boolean"},
                            "jobs": _JOBS,
                        }
                    )
                ),
                400,
                parameters=_SEARCH,
            )
        },
        "/tags": {
            "get": _get(
                "records",
                "Tags in use and how many jobs have each, most used first",
                _ok(
                    _object(
                        {
                            "total": _COUNT,
                            "tags": {"type": "object", "additionalProperties": _COUNT},
                        }
                    )
                ),
                400,
                parameters=_PAGE,
            )
        },
        "/tags/{tag}": {
            "parameters": [_TAG_PARAM],
            "get": _get(
                "records",
                "Jobs with a tag, most recently tagged first",
                _ok(_object({"tag": {"type": "string"}, "total": _COUNT, "jobs": _JOBS})),
                400,
                parameters=_PAGE,
            ),
        },
        "/job/{id}/tags/{tag}": {
            "parameters": [_JOB_ID, _TAG_PARAM],
            "put": _write(
                "records",
                f"Tag a job (at most {defaults.MAX_TAGS} tags)",
                _ok(_changed(r"^tagged job [1-9][0-9]* ")),
                400,
                404,
            ),
            "delete": _write(
                "records",
                "Untag a job",
                _ok(_changed(r"^untagged job [1-9][0-9]* ")),
                400,
                404,
            ),
        },
        "/tracked": {
            "get": _get("records", "Tracked jobs, most recently tracked first", _ok(_JOBS))
        },
        "/job/{id}/track": {
            "parameters": [_JOB_ID],
            "put": _write(
                "records",
                "Track a job: the dashboard lists it first and shows its events",
                _ok(_changed(r"^tracking job [1-9][0-9]*$")),
                400,
                404,
            ),
            "delete": _write(
                "records",
                "Stop tracking a job",
                _ok(_changed(r"^no longer tracking job [1-9][0-9]*$")),
                400,
                404,
            ),
        },
        "/retention": {
            "get": _get(
                "records",
                "The retention of finished jobs in force, and the Redis memory in use",
                _ok(_RETENTION),
            ),
            "put": _write(
                "records",
                "Set the queue's retention, for every process",
                _ok(_RETENTION),
                400,
                413,
                body=_body(
                    _object(
                        {
                            "complete": {
                                "anyOf": [_POLICY, {"type": "null"}, {"const": "default"}]
                            },
                            "failed": {"anyOf": [_POLICY, {"type": "null"}, {"const": "default"}]},
                        },
                        optional="complete failed",
                    ),
                    "A policy per state: {count, age}, a count, null (keep every job) or "
                    "'default'; at least one.",
                ),
            ),
        },
    }


#: Fields of the Job schema.
JOB_FIELDS: Schema = {
    "tags": _array({"type": "string"}, min_items=1),
    "tracked": {"const": True},
    "removeOnComplete": {"anyOf": [{"const": True}, _object({"count": {}, "age": {}})]},
    "removeOnFail": {"anyOf": [{"const": True}, _object({"count": {}, "age": {}})]},
}
JOB_OPTIONAL = " ".join(JOB_FIELDS)
_JOB_POLICY = {"anyOf": [{"type": "boolean"}, _POLICY]}
#: ``POST /job`` options.
OPTIONS: Schema = {
    "removeOnComplete": {
        **_JOB_POLICY,
        "description": "true: delete it once complete; a count or {count, age}: keep only "
        "that many completed jobs (BullMQ's shapes); false: the queue's retention",
    },
    "removeOnFail": {**_JOB_POLICY, "description": "As removeOnComplete, once failed for good"},
    "tags": _array(_TAG, min_items=1, max_items=defaults.MAX_TAGS),
    "searchKeys": {
        **_array(
            {
                "type": "string",
                "minLength": 1,
                "maxLength": defaults.MAX_TAG,
                "pattern": rf"^[^{_CONTROL}]*[^{_CONTROL}\s][^{_CONTROL}]*$",
            },
            min_items=1,
            max_items=defaults.MAX_TAGS,
        ),
        "description": "Data fields whose words find the job in a search, besides data.title",
    },
    "track": {"type": "boolean"},
}
