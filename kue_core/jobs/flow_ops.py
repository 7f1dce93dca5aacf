"""A flow's save: a tree of new jobs (``queue.flow(parent, children)``) checked and turned into
``flow.lua``'s rows, children before parents, and the ids it gave them (see
:mod:`kue_core.features.flows`)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Union

from ..base.errors import InvalidJob
from ..features.flows import is_job
from .spec import JobSpec

#: An item of a flow's ``children``: a job, or a job with its own children.
Node = Union["JobSpec", tuple["JobSpec", Sequence["Node"]]]


def _walk(children: Iterable[Node], into: list[tuple[JobSpec, list[JobSpec]]]) -> list[JobSpec]:
    """Add each child's subtree to ``into`` (children before parents); return the children."""
    jobs = []
    for item in children:
        if isinstance(item, tuple):
            if len(item) != 2 or isinstance(item[1], str | bytes):
                raise InvalidJob("a flow child is a job or a (job, [its children]) pair")
            job, kids = item
            if not isinstance(kids, Iterable):
                raise InvalidJob("a flow child's children are a list")
            into.append((job, _walk(kids, into)))
        else:
            job = item
            into.append((job, []))
        jobs.append(job)
    return jobs


def flow_rows(
    side: object, parent: JobSpec, children: Iterable[Node]
) -> tuple[list[tuple[JobSpec, list[JobSpec]]], list[list[Any]]]:
    """The flow of ``parent`` and its tree of ``children``, checked: its jobs (each with its
    children), children before parents (the parent last), and ``flow.lua``'s rows for them."""
    nodes: list[tuple[JobSpec, list[JobSpec]]] = []
    if is_job(children) or isinstance(children, tuple | str | bytes):
        raise InvalidJob("a flow's children are a list of jobs or (job, [children]) pairs")
    nodes.append((parent, _walk(children, nodes)))
    place: dict[int, int] = {}  # id(job) -> its place in the call, from 1
    rows = []
    for i, (job, kids) in enumerate(nodes, 1):
        if not is_job(job):
            raise InvalidJob(f"a flow holds jobs, not {type(job).__name__}")
        if job.queue is not side:
            raise InvalidJob("a flow's jobs are created by the queue that saves them")
        if job.id is not None:
            raise InvalidJob(f"job {job.id} is saved already: a flow saves new jobs")
        if id(job) in place:
            raise InvalidJob("a job appears twice in the flow")
        if job.unique() is not None:
            raise InvalidJob("a job with a unique key cannot be saved with dependencies")
        place[id(job)] = i
        deps = [str(d) for d in job._depends or []] + [f"#{place[id(k)]}" for k in kids]
        policy = "" if job._on_dep_fail == "wait" else job._on_dep_fail
        rows.append([*job._save_row(), policy, len(deps), *deps])
    return nodes, rows


def flow_saved(
    nodes: list[tuple[JobSpec, list[JobSpec]]], saved: list[tuple[int, str]]
) -> list[JobSpec]:
    """Give the jobs of a flow the (id, state) ``flow.lua`` saved them with; the jobs."""
    jobs = [job for job, _ in nodes]
    for (job, kids), (job_id, state) in zip(nodes, saved, strict=True):
        job._saved(job_id)
        job.state = state
        job.depends_count = len(job._depends or []) + len(kids)
    for _, kids in nodes:
        for kid in kids:
            kid.has_dependents = True
    return jobs
