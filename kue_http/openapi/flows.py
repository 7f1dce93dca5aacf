"""Dependencies and flows (``kue_http/flows.py``, the ``depends`` options of ``POST /job`` and
``DELETE /job/{id}?cascade``) in the OpenAPI document; the package merges them in."""

from __future__ import annotations

from kue_core import DEPENDENCY_POLICIES as POLICIES
from kue_core import (
    FLOW_TREE_CHILDREN,
    FLOW_TREE_LIMIT,
    FLOW_TREE_MAX_CHILDREN,
    FLOW_TREE_MAX_LIMIT,
    STATES,
)

from ..flows import MAX_FLOW_DEPTH, MAX_FLOW_NODES
from .build import (
    JOB_ID,
    Schema,
    array,
    json_answer,
    json_body,
    obj,
    ok,
    query_param,
    read,
    ref,
    write,
)

_ID = {"type": "integer", "minimum": 1}
_IDS = array(_ID, min_items=1)
#: A job's state, or null for a job removed since.
_STATE_OR_NULL = {"enum": [*STATES, None]}


def paths() -> Schema:
    return {
        "/flows": {
            "post": write(
                "flows",
                "Save a tree of new jobs in one call, all or nothing: each job is blocked until "
                "its children complete, then reads their results; answered with the same tree "
                "and each job's id",
                ok(ref("FlowJob")),
                400,
                413,
                body=json_body(
                    ref("FlowNode"),
                    f"The root node. At most {MAX_FLOW_NODES} jobs and {MAX_FLOW_DEPTH} levels; "
                    "a refusal names the node (as a JSON path: $.children[0]).",
                ),
            )
        },
        "/flow/{id}": {
            "parameters": [JOB_ID],
            "get": read(
                "flows",
                "The whole flow of a job as a tree: found from any job of it, from its root (or "
                "start) down, breadth first, in pages",
                ok(ref("FlowTree")),
                400,
                404,
                parameters=[
                    query_param(
                        "start",
                        {"type": "string", "pattern": "^[1-9][0-9]{0,17}$"},
                        "The job of the flow to start the page from (default: the root).",
                    ),
                    query_param(
                        "offset",
                        {"type": "integer", "minimum": 0, "maximum": 10**17},
                        "Into the start job's children: the first to list (default 0).",
                    ),
                    query_param(
                        "limit",
                        {"type": "integer", "minimum": 1, "maximum": FLOW_TREE_MAX_LIMIT},
                        f"Most nodes in the page (default {FLOW_TREE_LIMIT}).",
                    ),
                    query_param(
                        "children",
                        {"type": "integer", "minimum": 1, "maximum": FLOW_TREE_MAX_CHILDREN},
                        f"Most children listed per node (default {FLOW_TREE_CHILDREN}).",
                    ),
                ],
            ),
        },
        "/job/{id}/dependencies": {
            "parameters": [JOB_ID],
            "get": read(
                "flows",
                "What a job depends on, the jobs that depend on it, and the results of the "
                "jobs it depends on that completed",
                ok(ref("Dependencies")),
                400,
                404,
            ),
        },
    }


def remove() -> Schema:
    """``DELETE /job/{id}``: Kue's, with ``cascade``."""
    operation = write(
        "jobs",
        "Delete a job, its log and its history; a job that others are blocked waiting for "
        "only with cascade=true, which deletes them too, and theirs in turn",
        ok(
            obj(
                {
                    "message": {"type": "string", "pattern": r"^job [1-9][0-9]* removed$"},
                    "removed": {**_IDS, "description": "The ids deleted, the job's first"},
                }
            )
        ),
        400,
        404,
        parameters=[
            query_param(
                "cascade",
                {"enum": ["true", "false"]},
                "Delete the jobs blocked waiting for it too (default false: 409).",
            )
        ],
    )
    operation["responses"]["409"] = json_answer(
        "Jobs are blocked waiting for it, and cascade is not true: nothing was deleted",
        obj(
            {"error": {"type": "string", "minLength": 1}, "dependents": _IDS},
            optional="dependents",
        ),
    )
    return operation


#: Fields of the Job schema.
JOB_FIELDS: Schema = {
    "depends": {**_ID, "description": "How many jobs it depends on"},
    "onDependencyFailure": {"enum": list(POLICIES)},
    "blockedBy": {**_ID, "description": "A job it waits for that failed for good (wait)"},
    "hasDependents": {"const": True},
}
JOB_OPTIONAL = " ".join(JOB_FIELDS)
#: A job id as ``options.depends`` takes it: an integer, or a string of digits.
_DEPENDS_ID = [{**_ID, "maximum": 2**63 - 1}, {"type": "string", "pattern": "^[0-9]+$"}]
#: ``POST /job`` options (and a flow node's).
OPTIONS: Schema = {
    "depends": {
        "anyOf": [*_DEPENDS_ID, array({"anyOf": _DEPENDS_ID}, min_items=1)],
        "description": "The id of a saved job, or a non-empty list of them: it is blocked until "
        "each completes (an unknown id is 400; so is an empty list: leave depends out).",
    },
    "onDependencyFailure": {
        "enum": list(POLICIES),
        "default": POLICIES[0],
        "description": "When a job it depends on fails for good: wait (stay blocked until that "
        "job is retried and completes), fail (fail at once) or ignore (count it as done)",
    },
}


def schemas(new_job: Schema) -> Schema:
    """The schemas of flows; a node is ``new_job`` (the ``NewJob`` schema) with children."""
    return {
        "FlowNode": {
            **new_job,
            "properties": {
                **new_job["properties"],
                "children": array(ref("FlowNode"), max_items=MAX_FLOW_NODES - 1),
            },
            "required": new_job["required"],
        },
        "FlowJob": obj(
            {
                "id": _ID,
                "state": {"enum": list(STATES)},
                "children": array(ref("FlowJob"), "Where the node had children"),
            },
            optional="children",
        ),
        "FlowTree": obj(
            {
                "job": _ID,
                "root": {**_ID, "description": "The flow's root: the job nothing depends on"},
                "start": {**_ID, "description": "The node the page starts from"},
                "complete": {
                    "type": "boolean",
                    "description": "Whether every job under start is in the page",
                },
                "nodes": array(
                    obj(
                        {
                            "id": _ID,
                            "parent": {"anyOf": [_ID, {"type": "null"}]},
                            "depth": {"type": "integer", "minimum": 0},
                            "type": {"type": ["string", "null"]},
                            "state": {"type": ["string", "null"]},
                            "progress": {"type": "number"},
                            "priority": {"type": ["integer", "null"]},
                            "created_at": {"type": ["integer", "null"]},
                            "started_at": {"type": ["integer", "null"]},
                            "duration": {"type": ["integer", "null"]},
                            "children": array(_ID, "The ids listed: what it depends on"),
                            "children_total": {"type": "integer", "minimum": 0},
                        }
                    ),
                    "Breadth first from start, each job once; type and state null for a job "
                    "removed since.",
                ),
            }
        ),
        "Dependencies": obj(
            {
                "dependencies": array(
                    obj({"id": _ID, "state": _STATE_OR_NULL, "done": {"type": "boolean"}}),
                    "By id; state null for a job removed since.",
                ),
                "dependents": array(obj({"id": _ID, "state": _STATE_OR_NULL}), "By id."),
                "results": {
                    "type": "object",
                    "propertyNames": {"pattern": "^[1-9][0-9]*$"},
                    "additionalProperties": {"description": "What the job returned"},
                    "description": "Job id -> result, of the jobs it depends on that completed",
                },
            }
        ),
    }
