"""Dependencies and flows on the API blueprint (``kue_core.features.flows``): ``POST /flows``
saves a tree of new jobs in one call, all or nothing, each parent blocked until its children
complete; ``GET /job/<id>/dependencies`` tells what a job waits for, what waits for it and the
results it was handed; ``GET /flow/<id>`` gives the whole flow of a job as a tree. ``POST /job``
takes the ``depends`` and ``onDependencyFailure`` options and ``DELETE /job/<id>`` takes
``cascade`` (``api.py``)."""

from __future__ import annotations

from itertools import count
from typing import Any, NamedTuple

from flask import Response, jsonify, request

from kue_core import FLOW_TREE_CHILDREN, FLOW_TREE_LIMIT, InvalidJob, Job, Queue
from kue_core import FlowNode as Node

from . import redaction
from .api import _build, api, int_arg, queue

#: Most jobs one flow saves: the flow is one script call, which blocks Redis while it runs.
MAX_FLOW_NODES = 10_000
#: Most levels of a flow, the root's included: reading and saving a tree recurse once a level.
MAX_FLOW_DEPTH = 32


class _Tree(NamedTuple):
    """A node of a flow as built: its job, and its children (None: it had no ``children``)."""

    job: Job
    children: list[_Tree] | None


@api.post("/flows")
def create_flow() -> Response:
    """Save a tree of new jobs in one call, all or nothing. The body is a node: a ``POST /job``
    body (``type``, ``data``, ``options``) with optional ``children``, a list of nodes; each
    job is blocked until its children complete, then reads their results. Answered with the
    same tree: ``{"id", "state", "children"}`` each, ``children`` where the node had it."""
    body = request.get_json()  # 400 when malformed; security refuses a POST without JSON
    tree = _read(queue(), body, "$", 1, count(1))
    queue().flow(tree.job, _nodes(tree.children or []))
    return jsonify(_answer(tree))


def _read(q: Queue, node: Any, where: str, depth: int, seen: count[int]) -> _Tree:
    """The job of ``node`` (at JSON path ``where``) and its subtree, every one checked before
    anything is saved; a refusal names the node."""
    if next(seen) > MAX_FLOW_NODES:
        raise InvalidJob(f"a flow holds at most {MAX_FLOW_NODES} jobs")
    if depth > MAX_FLOW_DEPTH:
        raise InvalidJob(f"{where}: a flow is at most {MAX_FLOW_DEPTH} levels deep")
    if not isinstance(node, dict):
        raise InvalidJob(f"{where}: a node is a JSON object with type, data, options, children")
    try:
        job = _build(q, {k: v for k, v in node.items() if k != "children"})
    except InvalidJob as e:
        raise InvalidJob(f"{where}: {e}") from None
    if "children" not in node:
        return _Tree(job, None)
    kids = node["children"]
    if not isinstance(kids, list):
        raise InvalidJob(f"{where}: children is a list of nodes, got {type(kids).__name__}")
    return _Tree(
        job,
        [_read(q, kid, f"{where}.children[{i}]", depth + 1, seen) for i, kid in enumerate(kids)],
    )


def _nodes(children: list[_Tree]) -> list[Node]:
    """``queue.flow``'s children: a job, or a ``(job, [its children])`` pair."""
    return [(kid.job, _nodes(kid.children)) if kid.children else kid.job for kid in children]


def _answer(tree: _Tree) -> dict[str, Any]:
    out: dict[str, Any] = {"id": tree.job.id, "state": tree.job.state}
    if tree.children is not None:
        out["children"] = [_answer(kid) for kid in tree.children]
    return out


@api.get("/job/<job_id>/dependencies")
def dependencies(job_id: str) -> Response:
    """What a job depends on (``{"id", "state", "done"}`` each; state null for a job removed
    since), the jobs that depend on it (``{"id", "state"}``) and ``{id: result}`` of the jobs
    it depends on that completed."""
    job = queue().get_job(job_id)  # 404 for an unknown job
    results = job.children_results()
    return jsonify(
        {
            "dependencies": job.dependencies(),
            "dependents": job.dependents(),
            "results": {str(k): v for k, v in redaction.results(results).items()},
        }
    )


@api.get("/flow/<job_id>")
def flow_tree(job_id: str) -> Response:
    """The whole flow of a job as a tree, from its root (or ``start``) down, breadth first, in
    pages of ``limit`` nodes and ``children`` children a node (``offset``: into the start's
    children); see ``kue_core.jobs.flow_tree``."""
    start = request.args.get("start")
    tree = queue().flow_tree(
        job_id,
        start=start,
        offset=int_arg("offset", 0),
        limit=int_arg("limit", FLOW_TREE_LIMIT),
        children=int_arg("children", FLOW_TREE_CHILDREN),
    )
    return jsonify(tree)
