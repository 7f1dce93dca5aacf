"""Flow control (``kue_http/limits.py``, and the ``group`` option and field of a job) in the
OpenAPI document; the package merges them in."""

from __future__ import annotations

from kue_core import defaults

from .build import (
    CONTROL,
    COUNT,
    MS,
    TYPE_PARAM,
    Schema,
    array,
    json_body,
    obj,
    ok,
    query_param,
    read,
    ref,
    write,
)

_GROUP = {
    "type": "string",
    "minLength": 1,
    "maxLength": defaults.MAX_GROUP_LENGTH,
    "pattern": rf"^[^{CONTROL}]*$",
}
_CAP = {"type": "integer", "minimum": 1, "maximum": defaults.MAX_LIMIT}
_PAGE = [
    query_param("offset", {"type": "integer", "minimum": 0, "maximum": 10**18 - 1}, "First rank."),
    query_param(
        "count",
        {"type": "integer", "minimum": 1, "maximum": defaults.MAX_GROUPS_PAGE},
        "Page size (default 50).",
    ),
]
_HELD = {
    "enum": [None, "paused", "remote", "concurrency", "rate"],
    "description": "What holds the type's waiting jobs back right now: paused, remote (a "
    "handler raised RateLimited), concurrency (the cap is reached) or rate (the window is "
    "full); null when nothing does, or no job waits",
}


def paths() -> Schema:
    entry = ok(ref("Limits"))
    return {
        "/limits": {
            "get": read(
                "limits",
                "Every job type with a limit, or held back by a handler's RateLimited now: "
                "its limits, and whether they hold it back right now",
                ok(obj({"limits": {"type": "object", "additionalProperties": ref("Limits")}})),
            )
        },
        "/limits/{type}": {
            "parameters": [TYPE_PARAM],
            "get": read(
                "limits",
                "One type's limits (each null when unset) and status",
                entry,
                400,
            ),
            "put": write(
                "limits",
                "Set the limits the body gives, across every worker process (null removes "
                "one; those not given are kept); checked whole before anything is written",
                entry,
                400,
                413,
                body=json_body(ref("NewLimits"), "At least one limit."),
            ),
            "delete": write(
                "limits",
                "Remove every limit of the type, and end a hold asked by RateLimited",
                ok(obj({"message": {"type": "string", "pattern": "^limits of .+ removed$"}})),
                400,
            ),
        },
        "/groups/{type}": {
            "parameters": [TYPE_PARAM],
            "get": read(
                "limits",
                "The type's groups (tenants) with jobs waiting, in their turn (the next served "
                "first), then those with only running jobs",
                ok(
                    obj(
                        {
                            "total": COUNT,
                            "groups": array(
                                ref("Group"),
                                max_items=defaults.MAX_GROUPS_PAGE,
                            ),
                        }
                    )
                ),
                400,
                parameters=_PAGE,
            ),
        },
    }


#: ``POST /job`` options.
OPTIONS: Schema = {
    "group": {
        **_GROUP,
        "description": "The group (tenant) the job is served in: claims of its type take turns "
        "between groups, and groupRate and groupConcurrency apply to each group",
    }
}
#: Fields of the Job schema.
JOB_FIELDS: Schema = {"group": {**_GROUP, "description": "The group (tenant) it is served in"}}
JOB_OPTIONAL = " ".join(JOB_FIELDS)


def _rate(description: str) -> Schema:
    return {
        "oneOf": [
            {"type": "null"},
            obj(
                {
                    "max": {**_CAP, "description": "Most jobs that start in any window"},
                    "perMs": {
                        "type": "integer",
                        "minimum": 1,
                        "maximum": defaults.MAX_LIMIT_MS,
                        "description": "The window, in ms",
                    },
                }
            ),
        ],
        "description": description,
    }


def schemas() -> Schema:
    limits = {
        "rate": _rate("Most jobs of the type that start in any window of perMs"),
        "concurrency": {
            **_CAP,
            "type": ["integer", "null"],
            "description": "Most jobs of the type active at once",
        },
        "groupRate": _rate("As rate, for each group on its own"),
        "groupConcurrency": {
            **_CAP,
            "type": ["integer", "null"],
            "description": "As concurrency, for each group on its own",
        },
    }
    return {
        "NewLimits": {
            **obj(limits, optional=" ".join(limits)),
            "minProperties": 1,
            "description": "The limits to set; null removes one, those not given are kept",
        },
        "Limits": obj(
            {
                **limits,
                "heldUntil": {
                    **MS,
                    "type": ["integer", "null"],
                    "description": "Held back until then (ms) by a handler's RateLimited",
                },
                "status": obj(
                    {
                        "held": _HELD,
                        "waitMs": {
                            "type": ["integer", "null"],
                            "minimum": 0,
                            "description": "ms until a start fits the rate or the hold ends",
                        },
                        "active": COUNT,
                        "waiting": {**COUNT, "description": "Inactive jobs of the type"},
                        "startedInWindow": {
                            "type": ["integer", "null"],
                            "minimum": 0,
                            "description": "Jobs started in the current window (under a rate)",
                        },
                    }
                ),
            }
        ),
        "Group": obj(
            {"group": {"type": "string", "minLength": 1}, "waiting": COUNT, "active": COUNT}
        ),
    }
