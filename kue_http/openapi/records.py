"""The job records routes (``kue_http/records.py``) and fields in the OpenAPI document:
search through the index, tags, tracking, retention; the package merges them in."""

from __future__ import annotations

from kue_core import STATES, defaults

from .build import (
    CONTROL,
    COUNT,
    JOB_ID,
    Schema,
    array,
    changed,
    job_type,
    json_body,
    obj,
    ok,
    path_param,
    query_param,
    read,
    ref,
    write,
)

_TAG = {
    "type": "string",
    "minLength": 1,
    "maxLength": defaults.MAX_TAG,
    "pattern": rf"^[^{CONTROL}]*[^{CONTROL}\s][^{CONTROL}]*$",
}
#: In a path segment a tag cannot hold ``/``.
_TAG_PARAM = path_param(
    "tag",
    {**_TAG, "pattern": rf"^[^{CONTROL}/]*[^{CONTROL}/\s][^{CONTROL}/]*$"},
    "A tag.",
    example="vip",
)
_PAGE = [
    query_param("offset", {"type": "integer", "minimum": 0, "maximum": 10**18 - 1}, "First rank."),
    query_param("count", {"type": "integer", "minimum": 0, "maximum": 1000}, "Page size."),
]
_SEARCH = [
    query_param(
        "q",
        {"type": "string", "pattern": r"[\w]"},
        "Words: every one must find the job (a word of its type, data.title, search keys or "
        "tags); the last may be a word's start. A job id comes first.",
        True,
    ),
    query_param("state", {"enum": list(STATES)}, "Only jobs in this state."),
    query_param("type", job_type(), "Only jobs of this type."),
    *_PAGE,
]
_POLICY: Schema = {
    "anyOf": [
        obj(
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
_KEPT = obj(
    {
        "count": {"type": ["integer", "null"], "minimum": 0},
        "age": {"type": ["integer", "null"], "minimum": 1, "description": "ms"},
        "source": {"enum": ["queue", "default"]},
    }
)
_RETENTION = obj(
    {
        "complete": _KEPT,
        "failed": _KEPT,
        "memory": obj(
            {
                "used": COUNT,
                "peak": COUNT,
                "maxmemory": {**COUNT, "description": "0: no limit"},
                "policy": {"type": "string"},
            }
        ),
    }
)
_JOBS = array(ref("Job"))


def paths() -> Schema:
    search_ids = array({"type": "string", "pattern": "^[1-9][0-9]*$"}, "Newest first.")
    return {
        "/job/search": {
            "get": read(
                "jobs",
                "Kue's search: ids of the jobs every word of q finds (see GET /search)",
                ok(search_ids),
                400,
                parameters=_SEARCH,
            )
        },
        "/search": {
            "get": read(
                "jobs",
                "Jobs every word of q finds, newest first, through the search index: a page "
                "and the total (a lower bound when exact is false)",
                ok(
                    obj(
                        {
                            "ids": array({"type": "integer", "minimum": 1}),
                            "total": COUNT,
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
            "get": read(
                "records",
                "Tags in use and how many jobs have each, most used first",
                ok(
                    obj(
                        {
                            "total": COUNT,
                            "tags": {"type": "object", "additionalProperties": COUNT},
                        }
                    )
                ),
                400,
                parameters=_PAGE,
            )
        },
        "/tags/{tag}": {
            "parameters": [_TAG_PARAM],
            "get": read(
                "records",
                "Jobs with a tag, most recently tagged first",
                ok(obj({"tag": {"type": "string"}, "total": COUNT, "jobs": _JOBS})),
                400,
                parameters=_PAGE,
            ),
        },
        "/job/{id}/tags/{tag}": {
            "parameters": [JOB_ID, _TAG_PARAM],
            "put": write(
                "records",
                f"Tag a job (at most {defaults.MAX_TAGS} tags)",
                ok(changed(r"^tagged job [1-9][0-9]* ")),
                400,
                404,
            ),
            "delete": write(
                "records",
                "Untag a job",
                ok(changed(r"^untagged job [1-9][0-9]* ")),
                400,
                404,
            ),
        },
        "/tracked": {
            "get": read("records", "Tracked jobs, most recently tracked first", ok(_JOBS))
        },
        "/job/{id}/track": {
            "parameters": [JOB_ID],
            "put": write(
                "records",
                "Track a job: the dashboard lists it first and shows its events",
                ok(changed(r"^tracking job [1-9][0-9]*$")),
                400,
                404,
            ),
            "delete": write(
                "records",
                "Stop tracking a job",
                ok(changed(r"^no longer tracking job [1-9][0-9]*$")),
                400,
                404,
            ),
        },
        "/retention": {
            "get": read(
                "records",
                "The retention of finished jobs in force, and the Redis memory in use",
                ok(_RETENTION),
            ),
            "put": write(
                "records",
                "Set the queue's retention, for every process",
                ok(_RETENTION),
                400,
                413,
                body=json_body(
                    obj(
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
    "tags": array({"type": "string"}, min_items=1),
    "tracked": {"const": True},
    "removeOnComplete": {"anyOf": [{"const": True}, obj({"count": {}, "age": {}})]},
    "removeOnFail": {"anyOf": [{"const": True}, obj({"count": {}, "age": {}})]},
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
    "tags": array(_TAG, min_items=1, max_items=defaults.MAX_TAGS),
    "searchKeys": {
        **array(
            {
                "type": "string",
                "minLength": 1,
                "maxLength": defaults.MAX_TAG,
                "pattern": rf"^[^{CONTROL}]*[^{CONTROL}\s][^{CONTROL}]*$",
            },
            min_items=1,
            max_items=defaults.MAX_TAGS,
        ),
        "description": "Data fields whose words find the job in a search, besides data.title",
    },
    "track": {"type": "boolean"},
}
