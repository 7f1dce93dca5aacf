"""The document's named schemas (components/schemas): Kue's job, stats and the core answers,
with the fields and options each part of the API adds to a job."""

from __future__ import annotations

from kue_core import STATES, defaults

from . import flows, interactive, limits, records, rules, runs, schedules
from .build import COUNT, MS, Schema, array, job_type, names, obj, ref
from .options import JOB_OPTIONS, UNIQUE_MODES


def schemas() -> Schema:
    """The components/schemas of the document: the job and what every part adds to it."""
    state = {"enum": list(STATES)}
    options = {
        **JOB_OPTIONS,
        "properties": {
            **JOB_OPTIONS["properties"],
            **records.OPTIONS,
            **flows.OPTIONS,
            **limits.OPTIONS,
            **runs.OPTIONS,
        },
    }
    new_job = obj(
        {
            "type": job_type(),
            "data": {"description": "Any JSON value (default {})"},
            "options": options,
        },
        optional="data options",
    )
    return {
        "Error": obj({"error": {"type": "string", "minLength": 1}}),
        "TooLarge": obj(
            {
                "error": {"type": "string", "minLength": 1},
                "size": {"type": "integer", "minimum": 1, "description": "bytes"},
                "limit": {"type": "integer", "minimum": 0, "description": "bytes"},
            },
            optional="size limit",
        ),
        "Stats": obj({**{f"{s}Count": COUNT for s in STATES}, "workTime": COUNT}),
        "Job": obj(
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
                "created_at": MS,
                "promote_at": MS,
                "updated_at": MS,
                "failed_at": MS,
                "started_at": MS,
                "duration": {"type": "integer", "minimum": 0, "description": "ms"},
                "delay": {"type": "integer", "minimum": 1, "description": "ms"},
                "workerId": {"type": "string"},
                "ttl": {"type": "integer", "minimum": 1, "description": "ms"},
                "attempts": obj(
                    {
                        "made": COUNT,
                        "remaining": {"type": "integer"},
                        "max": {"type": "integer", "minimum": 1},
                    }
                ),
                "unique": obj({"key": {"type": "string"}, "mode": {"enum": list(UNIQUE_MODES)}}),
                "unopened": {
                    **obj(
                        {
                            "key": {"type": "string"},
                            "payload": {"type": "string"},
                            "missing": {"type": "boolean"},
                        },
                        optional="key payload",
                    ),
                    "description": "Its data or result is encrypted under key `key`, which this "
                    "server lacks (missing) or which does not decrypt it (docs/security.md); or "
                    "it is in the payload store as `payload`, which this server is not given "
                    "(missing) or which does not have it (docs/payloads.md): that field is "
                    "shown as stored",
                },
                "hidden": {
                    "type": "array",
                    "items": {"type": "string"},
                    "description": "What of its payload is shown as [hidden] to this user: a "
                    "field (data, result, progress_data, runs.<worker>) for a role that may not "
                    "see payloads, or a sensitive path in it (data.card.number); POST "
                    "/job/{id}/reveal shows it whole (docs/security.md)",
                },
                **records.JOB_FIELDS,
                **flows.JOB_FIELDS,
                **schedules.JOB_FIELDS,
                **limits.JOB_FIELDS,
                **runs.JOB_FIELDS,
                **interactive.JOB_FIELDS,
            },
            optional="result progress_data error created_at promote_at updated_at failed_at "
            f"started_at duration delay workerId ttl unique unopened hidden {records.JOB_OPTIONAL} "
            + f"{flows.JOB_OPTIONAL} {schedules.JOB_OPTIONAL} {limits.JOB_OPTIONAL} "
            + f"{runs.JOB_OPTIONAL} {interactive.JOB_OPTIONAL}",
        ),
        "NewJob": new_job,
        **flows.schemas(new_job),
        **schedules.schemas({**records.OPTIONS, **runs.OPTIONS}),
        **limits.schemas(),
        **rules.schemas(),
        **runs.schemas(),
        "Created": obj(
            {
                "message": {
                    "enum": ["job created", "job deduplicated"],
                    "description": "job deduplicated: nothing new was saved, id is the job "
                    "holding the unique key",
                },
                "id": {"type": "integer", "minimum": 1},
            }
        ),
        "HistoryEntry": obj(
            {
                "state": state,
                "at": MS,
                "from": state,
                "worker": {"type": "string"},
                "attempt": {"type": "integer", "minimum": 1},
                "duration": {"type": "integer", "minimum": 0},
                "error": {"type": "string"},
                "stalled": {"type": "integer", "minimum": 1},
                "released": {"const": True},
                "cancelled": {"type": "string", "description": "The reason (may be empty)"},
                "moved": obj({"from": {"type": "string"}, "to": {"type": "string"}}),
                "edited": {"const": True},
                "no_retry": {"const": True, "description": "Its handler raised NoRetry"},
                "run": {
                    "enum": [True, "complete", "failed", "lost"],
                    "description": "A fan-out job's run on worker `worker` started (true) or "
                    "ended so",
                },
                "reset_runs": {"type": "integer", "minimum": 0, "description": "Runs dropped"},
                "joined": {"type": "string", "description": "A worker that joined a fan-out"},
                "only": {
                    "type": ["array", "object"],
                    "items": {"type": "string"},
                    "maxProperties": 0,
                    "description": "The workers it was pinned to (none: [] or {})",
                },
                "stopped": {"type": "array", "items": {"type": "string"}},
                "reason": {"type": "string"},
                "unblocked": {"const": True},
                "rate_limited": {"type": "number", "description": "ms it waits for its limit"},
                "unique": {"type": "string", "description": "The unique key a save met"},
                "doctor": {"const": True, "description": "Repaired by kue doctor"},
                **interactive.HISTORY_FIELDS,
            },
            optional="from worker attempt duration error stalled released cancelled moved edited "
            "no_retry run reset_runs joined only stopped reason unblocked rate_limited unique "
            f"doctor {' '.join(interactive.HISTORY_FIELDS)}",
        ),
        "Worker": obj(
            {
                "id": {"type": "string"},
                "host": {"type": "string"},
                "pid": {"type": "integer", "minimum": 1},
                "version": {
                    "type": "string",
                    "description": "The version it runs (Queue(version=), kue worker "
                    "--version-tag): the history's deploy markers",
                },
                "types": {
                    "type": "object",
                    "additionalProperties": {"type": "integer", "minimum": 1},
                    "description": "Job type -> handlers running it",
                },
                "started_at": MS,
                "lease_ms": {"type": "integer", "minimum": 1},
                "runtime": {
                    "type": "string",
                    "enum": ["thread", "loop"],
                    "description": "How it runs its slots: tasks on one event loop (thread: a "
                    "thread each, a runtime of earlier versions)",
                },
                "abandoned_threads": {
                    **COUNT,
                    "description": "Handler threads left running past their attempt",
                },
                "jobs": array({"type": "integer", "minimum": 1}, "Ids of the jobs it runs."),
                "heartbeat": MS,
                "paused": {
                    **names(),
                    "description": "Types paused in this process only (pause with local)",
                },
                "stopping": {
                    "type": "boolean",
                    "description": "Shutting down (a signal or a remote stop): claims nothing",
                },
            },
            optional="abandoned_threads paused runtime stopping version",
        ),
        "Timing": obj(
            {
                "count": COUNT,
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
                            COUNT,
                        ],
                        "items": False,
                        "minItems": 2,
                    },
                    "minItems": len(defaults.DURATION_BUCKETS_MS) + 1,
                    "maxItems": len(defaults.DURATION_BUCKETS_MS) + 1,
                },
            }
        ),
        "TypeTimings": obj(
            {
                "type": {"type": "string"},
                "day": {"type": "string", "format": "date"},
                "wait": ref("Timing"),
                "run": ref("Timing"),
            }
        ),
        "Timings": obj(
            {
                "day": {"type": "string", "format": "date"},
                "types": {
                    "type": "object",
                    "description": "Every known job type (GET /job/types) -> its figures",
                    "additionalProperties": obj({"wait": ref("Timing"), "run": ref("Timing")}),
                },
            }
        ),
        "Minute": obj({"at": {**MS, "multipleOf": 60_000}, "complete": COUNT, "failed": COUNT}),
    }
