"""The job page's dependencies: the jobs a job depends on and those that depend on it, what it
does when one fails, and the results of those that completed (see ``kue_core.features.flows``).

A parent of 10,000 children must not make a page of 10,000 rows: each side lists its first
``SHOWN`` jobs, by id, and counts the rest by state. The page names the ids it lists in
``data-watch`` so that ``static/kue.js`` refreshes it on their events (on every event when a
list is cut: any job left out may change the counts).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from kue_core import STATES, Job, Queue

from .. import redaction

#: Jobs listed on each side, and children's results shown; beyond, counts only.
SHOWN = 50
#: What a job does when a job it depends on fails for good, in words.
POLICIES = {
    "wait": "stays blocked until the failed job is retried and completes",
    "fail": "fails at once",
    "ignore": "counts the failed job as done",
}


@dataclass
class Linked:
    """A job on one side: its id and state (None once removed), and whether it counts as
    done (for a dependency); ``job`` is loaded for the jobs listed."""

    id: int
    state: str | None
    done: bool = False
    job: Job | None = None


@dataclass
class Side:
    """The jobs a job depends on, or that depend on it: the first ``SHOWN`` of them, how many
    in all, and how many in each state (``removed`` for a job deleted since)."""

    total: int
    shown: list[Linked]
    states: list[tuple[str, int]]
    done: int = 0

    @property
    def more(self) -> int:
        return self.total - len(self.shown)


@dataclass
class Dependencies:
    """The template's ``deps``: both sides, the failure policy, the job it is blocked by, the
    results of the completed dependencies, and the ids the page refreshes for."""

    dependencies: Side
    dependents: Side
    policy: str
    blocked_by: int | None
    blocker_state: str | None
    results: dict[int, Any]
    results_total: int
    watch: str

    @property
    def any(self) -> bool:
        return bool(self.dependencies.total or self.dependents.total or self.blocked_by)

    @property
    def policy_text(self) -> str:
        return POLICIES.get(self.policy, "")


def job_dependencies(q: Queue, job: Job) -> Dependencies:
    """What the job page shows of ``job``'s dependencies; no Redis call for a job that has
    none and that none depend on."""
    assert job.id is not None
    found = q.dependencies(job.id) if job.depends_count else []
    waiting = q.dependents(job.id) if job.has_dependents else []
    deps = [Linked(d["id"], d["state"], d["done"]) for d in found]
    dependents = [Linked(d["id"], d["state"]) for d in waiting]
    _load(q, [*deps[:SHOWN], *dependents[:SHOWN]])
    results = redaction.results(q.children_results(job.id)) if job.depends_count else {}
    blocker = next((d for d in deps if d.id == job.blocked_by), None)
    cut = len(deps) > SHOWN or len(dependents) > SHOWN
    ids = [job.id, *(d.id for d in deps), *(d.id for d in dependents)]
    return Dependencies(
        dependencies=_side(deps),
        dependents=_side(dependents),
        policy=job.on_dependency_failure(),
        blocked_by=job.blocked_by,
        blocker_state=blocker.state if blocker else None,
        results=dict(list(results.items())[:SHOWN]),
        results_total=len(results),
        watch="*" if cut else " ".join(map(str, ids)),
    )


def _load(q: Queue, linked: list[Linked]) -> None:
    """Load the jobs listed, for their type and title (and their state, read again)."""
    if not linked:
        return
    jobs = {j.id: j for j in q.get_jobs([item.id for item in linked])}
    for item in linked:
        item.job = jobs.get(item.id)
        item.state = item.job.state if item.job else None


def _side(linked: list[Linked]) -> Side:
    counts = Counter(item.state or "removed" for item in linked)
    order = [*STATES, "removed"]
    return Side(
        total=len(linked),
        shown=linked[:SHOWN],
        states=[(s, counts[s]) for s in order if counts[s]],
        done=sum(item.done for item in linked),
    )


# -- the flow page: a whole flow as a tree ------------------------------------------------------
#: Nodes read for one page of a tree, and children listed per node.
TREE_NODES = 300
TREE_CHILDREN = 100
#: Up to this many nodes, every branch of the tree is open; beyond, only those above this
#: depth (the top's own: depth 0).
ALL_OPEN = 60
OPEN_DEPTH = 1


@dataclass
class TreeNode:
    """A node of the flow page: its job's fields as ``flow_tree`` reads them, the nodes under
    it in this page, the ids it depends on that are shown under another node (a job two jobs
    depend on), and how many of its children this page leaves out."""

    fields: dict[str, Any]
    below: list[TreeNode]
    elsewhere: list[int]
    left_out: int

    @property
    def id(self) -> int:
        return int(self.fields["id"])


@dataclass
class Tree:
    """The flow page's ``tree``: the top node, the job asked for, the root, counts by state,
    whether the page holds every job under its top, and the ids it refreshes for."""

    top: TreeNode
    job: int
    root: int
    states: list[tuple[str, int]]
    size: int
    complete: bool
    offset: int
    watch: str

    def open(self, node: TreeNode) -> bool:
        return self.size <= ALL_OPEN or int(node.fields["depth"]) < OPEN_DEPTH


def flow_tree(q: Queue, job_id: str, start: str | None, offset: int) -> Tree:
    """One page of the tree of ``job_id``'s flow (from ``start``, its children from
    ``offset``), laid out for the template."""
    found = q.flow_tree(job_id, start, offset, TREE_NODES, TREE_CHILDREN)
    nodes = {int(n["id"]): n for n in found["nodes"]}
    made: dict[int, TreeNode] = {}
    for n in found["nodes"]:  # breadth first: a parent comes before its children
        node = TreeNode(n, [], [], 0)
        made[int(n["id"])] = node
        if n["parent"] is not None:
            made[int(n["parent"])].below.append(node)
    for node in made.values():
        under = {c.id for c in node.below}
        node.elsewhere = [c for c in node.fields["children"] if c in nodes and c not in under]
        # The children in the page come first in the list (breadth first, in its order).
        listed = [c for c in node.fields["children"] if c in nodes]
        skipped = offset if node.id == found["start"] else 0
        node.left_out = int(node.fields["children_total"]) - len(listed) - skipped
    counts = Counter(n["state"] or "removed" for n in found["nodes"])
    return Tree(
        top=made[int(found["start"])],
        job=int(found["job"]),
        root=int(found["root"]),
        states=[(s, counts[s]) for s in (*STATES, "removed") if counts[s]],
        size=len(nodes),
        complete=bool(found["complete"]),
        offset=offset,
        watch=" ".join(str(i) for i in nodes),
    )
