"""A whole flow as a tree, from any job of it (:mod:`kue_core.jobs.ops`' form: no I/O, run by
either client): ``queue.flow_tree(id)``, ``GET /api/flow/<id>``, the dashboard's flow page and
``kue flow``.

A flow's tree goes from its root (the job nothing depends on) down through what each job
depends on (its children: the jobs ``queue.flow`` made it wait for, or those of
``depends_on``). From any job the walk goes up through the jobs that depend on it (the lowest
id where there are several) to the root, then down breadth first, level by level, one round
trip a level. A big flow is read in pages: at most ``limit`` nodes, and at most ``children``
children listed per node; a node whose children were left out says how many it has, and a
page from it (``start``, and ``offset`` into its children) reads them. Dependencies may join
(a job that two jobs depend on): such a job is a node once, listed as a child of each.
"""

from __future__ import annotations

from typing import Any

from ..base import checks
from ..base.errors import JobNotFound
from ..base.keys import Keys
from ..base.values import num
from ..store.calls import Op, read

#: Most nodes one page of a tree holds, by default, and at most.
LIMIT = 300
MAX_LIMIT = 2_000
#: Children listed per node, by default, and at most.
CHILDREN = 100
MAX_CHILDREN = 1_000
#: Most levels walked up from a job to its flow's root (a flow is built at most 32 deep).
MAX_UP = 256
#: The fields of each node, read from its job's hash.
FIELDS = ("type", "state", "progress", "priority", "created_at", "started_at", "duration")


def flow_tree(
    keys: Keys,
    job_id: int | str,
    start: int | str | None = None,
    offset: int = 0,
    limit: int = LIMIT,
    children: int = CHILDREN,
) -> Op[dict[str, Any]]:
    """The tree of job ``job_id``'s flow (see the module docstring): ``{"job", "root",
    "start", "nodes", "complete"}``. ``nodes`` lists each node once, breadth first from
    ``start`` (default: the root): ``{"id", "parent", "depth", "type", "state", "progress",
    "priority", "created_at", "started_at", "duration", "children", "children_total"}``
    (``children``: the ids listed, from ``offset`` for the start node, those it still
    waits for first, then by id as text; ``type`` and ``state`` None for a job removed
    since). ``complete`` tells whether every node under ``start`` is in the page.
    ``JobNotFound`` when there is no job ``job_id``."""
    jid = checks.job_id(job_id)
    top = None if start is None else checks.job_id(start, "start")
    skip = checks.integer(offset, "offset", 0)
    most = checks.integer(limit, "limit", 1, MAX_LIMIT)
    per_node = checks.integer(children, "children", 1, MAX_CHILDREN)
    (exists,) = yield read(("EXISTS", keys.job(jid)))
    if not exists:
        raise JobNotFound(jid)
    root = yield from _root(keys, jid)
    if top is None:
        top = root
    nodes: list[dict[str, Any]] = []
    placed: set[int] = {top}
    level: list[tuple[int, int | None]] = [(top, None)]
    depth, whole = 0, True
    while level:
        steps: list[tuple[Any, ...]] = []
        firsts = [skip if depth == 0 else 0 for _ in level]  # the offset: the start's only
        for (node_id, _), first in zip(level, firsts, strict=True):
            steps.append(("HMGET", keys.job(node_id), *FIELDS))
            steps.append(("ZRANGE", keys.deps(node_id), first, first + per_node - 1))
            steps.append(("ZCARD", keys.deps(node_id)))
        replies = yield read(*steps)
        below: list[tuple[int, int | None]] = []
        for k, (node_id, parent) in enumerate(level):
            fields, kids, total = replies[3 * k], replies[3 * k + 1], int(replies[3 * k + 2])
            listed = [int(m) for m in kids]  # as the set keeps them: an offset pages on
            node = _node(node_id, parent, depth, fields, listed, total)
            nodes.append(node)
            if firsts[k] or total > len(listed):
                whole = False  # children before the offset, or past the ones listed
            for kid in listed:
                if kid in placed:
                    continue
                if len(nodes) + len(level) - k - 1 + len(below) >= most:
                    whole = False
                    continue
                placed.add(kid)
                below.append((kid, node_id))
        level = below
        depth += 1
    return {"job": jid, "root": root, "start": top, "nodes": nodes, "complete": whole}


def _root(keys: Keys, job_id: int) -> Op[int]:
    """The root of job ``job_id``'s flow: up through the jobs that depend on it, the lowest id
    at each step, until one that nothing depends on."""
    at, seen = job_id, {job_id}
    for _ in range(MAX_UP):
        (members,) = yield read(("SMEMBERS", keys.dependents(at)))
        ups = sorted(int(m) for m in members if int(m) not in seen)
        if not ups:
            return at
        at = ups[0]
        seen.add(at)
    return at


def _node(
    node_id: int,
    parent: int | None,
    depth: int,
    fields: list[Any],
    children: list[int],
    total: int,
) -> dict[str, Any]:
    got = dict(zip(FIELDS, fields, strict=True))
    progress = num(got["progress"])
    return {
        "id": node_id,
        "parent": parent,
        "depth": depth,
        "type": got["type"],
        "state": got["state"],
        "progress": progress or 0,
        "priority": _int(got["priority"]),
        "created_at": _int(got["created_at"]),
        "started_at": _int(got["started_at"]),
        "duration": _int(got["duration"]),
        "children": children,
        "children_total": total,
    }


def _int(text: str | None) -> int | None:
    value = num(text)
    return None if value is None else int(value)
