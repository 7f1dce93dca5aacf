"""Pinning and fan-out (the ``only`` and ``fanOut`` options and fields of a job, and
``GET /job/{id}/runs``) in the OpenAPI document; the package merges it in."""

from __future__ import annotations

from kue_core import WORKER_ID_RULE, defaults

from .build import COUNT, JOB_ID, MS, Schema, array, changed, json_body, obj, ok, read, ref, write

#: A worker id, as ``Queue(worker_id=...)`` and ``kue worker --id`` take it.
WORKER_ID: Schema = {
    "type": "string",
    "minLength": 1,
    "maxLength": defaults.MAX_WORKER_ID,
    "pattern": f"^{WORKER_ID_RULE}$",
}
_WORKERS: Schema = {
    "type": "array",
    "items": WORKER_ID,
    "minItems": 1,
    "maxItems": defaults.MAX_PINS,
}
_K: Schema = {"type": "integer", "minimum": 1, "maximum": defaults.MAX_PINS}
_FAN_OUT_OBJECT: Schema = obj(
    {
        "k": {"oneOf": [_K, {"const": "all"}]},
        "atOnce": {"type": "integer", "minimum": 1, "description": "At most k (default: k)"},
        "maxFailedRuns": {**COUNT, "description": "Failed runs tolerated (default 0)"},
        "lateJoiners": {"type": "boolean", "description": 'With "all" only (default false)'},
        "resetRuns": {
            "type": "boolean",
            "description": "With unique: a save deduplicated onto a running job of the key "
            "clears its failed runs (default false)",
        },
    },
    optional="atOnce maxFailedRuns lateJoiners resetRuns",
)

#: ``POST /job`` options.
OPTIONS: Schema = {
    "only": {
        **_WORKERS,
        "description": "The worker processes (by id) that alone may run the job: it waits for "
        "one of them in state pinned while the type's other jobs go to any worker",
    },
    "fanOut": {
        "oneOf": [_K, {"const": "all"}, _FAN_OUT_OBJECT],
        "description": "Run the job on k distinct worker processes (each a run) and complete "
        'it once each completed its run, with the result {worker id: result}; "all": every '
        "live worker serving its type when it is saved (none: complete at once with {}). "
        "With only, k is at most its number of workers. Not with group.",
    },
}
OPTIONS["prefer"] = {
    **_WORKERS,
    "description": "Workers that find the job first: any worker may run it, but these take it "
    "before a job of equal priority they do not prefer. Not with only or fanOut.",
}
#: Fields of the Job schema.
JOB_FIELDS: Schema = {
    "prefer": {**_WORKERS, "description": "The workers that find it first"},
    "only": {**_WORKERS, "description": "The workers that alone may run it (pinned)"},
    "fanOut": obj(
        {
            "k": {
                "type": "integer",
                "minimum": 0,
                "description": 'Runs to complete ("all": resolved at the save)',
            },
            "atOnce": {"type": ["integer", "null"], "minimum": 1},
            "maxFailedRuns": COUNT,
            "lateJoiners": {"type": "boolean"},
        }
    ),
    "runs": array(ref("Run"), "A fan-out job's runs, ordered by start"),
}
JOB_OPTIONAL = " ".join(JOB_FIELDS)


def schemas() -> Schema:
    return {
        "Run": obj(
            {
                "worker": WORKER_ID,
                "state": {"enum": ["running", "complete", "failed", "lost"]},
                "started_at": MS,
                "ended_at": MS,
                "result": {"description": "What the handler returned (a complete run)"},
                "error": {"type": "string", "description": "Why it failed (a failed run)"},
                "tries": {
                    "type": "integer",
                    "minimum": 1,
                    "description": "Runs this worker started (a lost or failed run may be "
                    "started again)",
                },
            },
            optional="started_at ended_at result error tries",
        )
    }


def paths() -> Schema:
    return {
        "/job/{id}/only": {
            "parameters": [JOB_ID],
            "put": write(
                "control",
                "Change which workers may run a job: a waiting job waits for the new ones, a "
                "running job whose worker is no longer allowed is stopped there and waits "
                "pinned for them (no attempt counted), a running fan-out job's runs on workers "
                "no longer allowed stop; null: any worker",
                ok(changed(r"^job [1-9][0-9]* runs on ")),
                400,
                404,
                413,
                body=json_body(
                    obj({"workers": {"oneOf": [_WORKERS, {"type": "null"}]}}),
                    "The workers (a fan-out job keeps at least k), or null.",
                ),
            ),
        },
        "/job/{id}/runs": {
            "parameters": [JOB_ID],
            "get": read(
                "jobs",
                "A fan-out job's runs, one per worker that started one, ordered by start ([] "
                "for a job that does not fan out)",
                ok(array(ref("Run"))),
                400,
                404,
            ),
        },
    }
