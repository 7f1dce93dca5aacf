"""Pinning (the ``only`` option and field of a job) in the OpenAPI document. ``openapi.py``
merges it in."""

from __future__ import annotations

from kue_core import WORKER_ID_RULE, defaults

from .openapi import Schema

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

#: ``POST /job`` options.
OPTIONS: Schema = {
    "only": {
        **_WORKERS,
        "description": "The worker processes (by id) that alone may run the job: it waits for "
        "one of them in state pinned while the type's other jobs go to any worker",
    }
}
#: Fields of the Job schema.
JOB_FIELDS: Schema = {
    "only": {**_WORKERS, "description": "The workers that alone may run it (pinned)"}
}
JOB_OPTIONAL = " ".join(JOB_FIELDS)
