"""Job dependencies from the command line: ``kue deps``, ``kue flow`` and ``kue remove``, on
the ``cli`` group (imported by the package, so that they join it).

Exit codes as for every command: an unknown job or bad input is bad usage (2); removing a job
that others are blocked waiting for, without ``--cascade``, is refused (1); a Redis that
cannot be reached is unavailable (3).
"""

from __future__ import annotations

import json
from typing import Any

import click

from kue_core import FLOW_TREE_LIMIT, FLOW_TREE_MAX_LIMIT, HasDependents

from . import cli as main
from .control import _queue
from .errors import Refused


def _ids(ids: list[int]) -> str:
    return ", ".join(str(i) for i in ids)


@main.cli.command(short_help="Show the jobs a job depends on, and those depending on it.")
@click.argument("job_id", metavar="ID")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of lines.")
@main.redis_options
def deps(job_id: str, as_json: bool, redis_url: str | None, prefix: str) -> None:
    """The jobs job ID depends on (each with its state, and whether it is done: completed,
    or failed under the policy ignore) and the jobs that depend on it, with their states."""
    with _queue(redis_url, prefix, reads_only=True) as queue:
        job = queue.get_job(job_id)
        on, by = job.dependencies(), job.dependents()
    if as_json:
        report: dict[str, Any] = {
            "id": job.id,
            "type": job.type,
            "state": job.state,
            "onDependencyFailure": job.on_dependency_failure(),
            "blockedBy": job.blocked_by,
            "dependencies": on,
            "dependents": by,
        }
        click.echo(json.dumps(report, indent=2))
        return
    head = f"job {job.id} ({job.type}) is {job.state}"
    if job.blocked_by is not None:
        head += f", blocked by failed job {job.blocked_by}"
    click.echo(head)
    if on:
        click.echo(f"depends on (if one fails for good: {job.on_dependency_failure()}):")
    else:
        click.echo("depends on no job")
    for d in on:
        done = "done" if d["done"] else "waited for"
        click.echo(f"  {d['id']:>8}  {d['state'] or '(removed)':<10}{done}")
    click.echo("jobs that depend on it:" if by else "no job depends on it")
    for d in by:
        click.echo(f"  {d['id']:>8}  {d['state'] or '(removed)'}")


@main.cli.command(short_help="Show the whole flow of a job as a tree.")
@click.argument("job_id", metavar="ID")
@click.option("--start", metavar="ID", help="Start from this job of the flow (default: its root).")
@click.option(
    "--limit",
    default=FLOW_TREE_LIMIT,
    show_default=True,
    type=click.IntRange(1, FLOW_TREE_MAX_LIMIT),
    help="Most jobs shown.",
)
@click.option(
    "--offset",
    default=0,
    type=click.IntRange(0),
    help="With --start: the first of its children to show (a page of a big flow).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the tree as GET /api/flow does.")
@main.redis_options
def flow(
    job_id: str,
    start: str | None,
    limit: int,
    offset: int,
    as_json: bool,
    redis_url: str | None,
    prefix: str,
) -> None:
    """The whole flow of job ID as a tree, found from any job of it: each job above the jobs it
    depends on, with its type, state and run time; the job asked for marked with *."""
    with _queue(redis_url, prefix, reads_only=True) as queue:
        tree = queue.flow_tree(job_id, start=start, offset=offset, limit=limit)
    if as_json:
        click.echo(json.dumps(tree, indent=2))
        return
    nodes = {n["id"]: n for n in tree["nodes"]}
    below: dict[int, list[int]] = {}
    for n in tree["nodes"]:
        if n["parent"] is not None:
            below.setdefault(n["parent"], []).append(n["id"])

    def show(node_id: int, lead: str, last: bool, top: bool) -> None:
        n = nodes[node_id]
        mark = "*" if node_id == tree["job"] else " "
        what = f"{n['type']} {n['state']}" if n["type"] is not None else "(removed)"
        took = f" {n['duration']} ms" if n["duration"] is not None else ""
        branch = "" if top else ("└─ " if last else "├─ ")
        click.echo(f"{mark}{lead}{branch}{node_id} {what}{took}")
        kids = below.get(node_id, [])
        # Children in the page under another job (two jobs depend on them) are not "more".
        shown = sum(1 for c in n["children"] if c in nodes) + (offset if top else 0)
        more = n["children_total"] - shown
        inner = lead if top else lead + ("   " if last else "│  ")
        for i, kid in enumerate(kids):
            show(kid, inner, i == len(kids) - 1 and more <= 0, False)
        if more > 0:
            rest = f"kue flow {tree['job']} --start {node_id} --offset {shown}"
            click.echo(f" {inner}└─ … {more} more ({rest})")

    show(tree["start"], "", True, True)


@main.cli.command(short_help="Remove a job (with --cascade, the jobs waiting for it too).")
@click.argument("job_id", metavar="ID")
@click.option(
    "--cascade",
    is_flag=True,
    help="Remove the jobs blocked waiting for it too, and those waiting for them in turn.",
)
@main.redis_options
def remove(job_id: str, cascade: bool, redis_url: str | None, prefix: str) -> None:
    """Remove job ID: its hash, log, history and every index entry. A job that others are
    blocked waiting for is refused (exit 1, naming them) unless --cascade."""
    with _queue(redis_url, prefix) as queue:
        try:
            removed = queue.remove(job_id, cascade=cascade)
        except HasDependents as e:
            raise Refused(
                f"job {e.job_id} cannot be removed: jobs {_ids(e.dependents)} are waiting for "
                "it (--cascade removes them too)"
            ) from None
    click.echo(f"removed job{'s' if len(removed) > 1 else ''} {_ids(removed)}")
