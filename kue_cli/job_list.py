"""``kue job list STATE``, a command of the ``kue job`` group (:mod:`kue_cli.jobs`): the
jobs of a state (of one type with ``-t``), in the order the dashboard's list of that state
shows them first, a page at a time (``Queue.page``).

Finished jobs (complete, failed) come newest first, by when they finished; delayed jobs
soonest due first; the others in the order workers take them (priority, then first in).
``--reverse`` turns any of these around. An unknown state or type is bad usage (exit 2).
"""

from __future__ import annotations

import json
from typing import Any

import click

from kue_core import STATES, Job
from kue_core.base.states import priority_name
from kue_http.dashboard.filters import ago
from kue_http.redaction import WHOLE, title

from . import cli as main
from .control import _queue

#: The longest a title or a job's data is shown in a row, in characters.
WIDTH = 60
_FINISHED = ("complete", "failed")


@click.command("list", short_help="List the jobs of a state, newest or next first.")
@click.argument("state", type=click.Choice(STATES), metavar="STATE")
@click.option("-t", "--type", "job_type", metavar="TYPE", help="Only jobs of this type.")
@click.option(
    "-n",
    "--count",
    default=25,
    show_default=True,
    type=click.IntRange(1, 1000),
    metavar="N",
    help="Jobs to show.",
)
@click.option(
    "--offset",
    default=0,
    show_default=True,
    type=click.IntRange(0),
    metavar="N",
    help="Jobs to skip first.",
)
@click.option("--reverse", is_flag=True, help="The other way round (oldest or last first).")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON array of Kue's job objects.")
@main.redis_options
def list_jobs(
    state: str,
    job_type: str | None,
    count: int,
    offset: int,
    reverse: bool,
    as_json: bool,
    redis_url: str | None,
    prefix: str,
) -> None:
    """The jobs in STATE (inactive, active, complete, failed, delayed, blocked or pinned), as the
    dashboard lists them: complete and failed ones newest first, delayed ones soonest due
    first, the others in the order workers take them. One line a job: id, type, state,
    priority, created, updated (for a delayed job: due), and its title or the start of its
    data. How many there are in all goes to stderr."""
    finished = state in _FINISHED
    with _queue(redis_url, prefix, reads_only=True) as queue:
        total = queue.count(state, job_type)
        jobs = queue.page(
            state,
            job_type,
            offset=offset,
            count=count,
            desc=finished != reverse,
            by="finished" if finished else "queue",
        )
    if as_json:
        click.echo(json.dumps([j.to_dict() for j in jobs], indent=2))
    elif jobs:
        for line in table(jobs, state):
            click.echo(line)
    of = f" of type {job_type}" if job_type else ""
    noun = "job" if total == 1 else "jobs"
    click.echo(f"{len(jobs)} shown of {total} {state} {noun}{of}", err=True)


def table(jobs: list[Job], state: str) -> list[str]:
    """The jobs as aligned columns under a header line."""
    head = (
        "ID",
        "TYPE",
        "STATE",
        "PRIORITY",
        "CREATED",
        "DUE" if state == "delayed" else "UPDATED",
    )
    rows = [(*head, "TITLE OR DATA")] + [_row(j) for j in jobs]
    widths = [max(len(row[i]) for row in rows) for i in range(len(head))] + [0]  # last: as is
    return ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in rows]


def _row(found: Job) -> tuple[str, ...]:
    d = found.to_dict()
    when = d.get("promote_at") if d["state"] == "delayed" else d.get("updated_at")
    priority = d["priority"]
    return (
        str(d["id"]),
        d["type"],
        d["state"],
        "-" if priority is None else priority_name(priority) or str(priority),
        ago(d.get("created_at")) or "-",
        ago(when) or "-",
        cut(str(title(found, WHOLE)) or _compact(d["data"])),
    )


def _compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def cut(text: str, width: int = WIDTH) -> str:
    """``text`` on one line, at most ``width`` characters (``…`` where it was cut)."""
    line = " ".join(text.split())
    return line if len(line) <= width else line[: width - 1] + "…"
