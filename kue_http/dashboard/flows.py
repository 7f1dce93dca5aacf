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
    results = q.children_results(job.id) if job.depends_count else {}
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
