"""Job records from the command line: ``kue search``, ``kue tag``, ``kue untag`` and
``kue retention``, on the ``cli`` group (imported by the package, so that they join it); and
the retention and memory lines of ``kue stats``. Exit codes as for every command: bad input
or an unknown job is bad usage (2); a Redis that cannot be reached is unavailable (3)."""

from __future__ import annotations

from typing import Any

import click

from kue_core import STATES

from . import cli as main
from .control import _queue
from .errors import BadUsage
from .records_text import age_ms, policy_text


@main.cli.command(short_help="Find jobs by words, through the search index.")
@click.argument("words", nargs=-1, required=True)
@click.option("--state", type=click.Choice(STATES), help="Only jobs in this state.")
@click.option("--type", "job_type", metavar="TYPE", help="Only jobs of this type.")
@click.option("--count", default=25, show_default=True, type=click.IntRange(1, 1000))
@click.option("--offset", default=0, show_default=True, type=click.IntRange(0))
@main.redis_options
def search(
    words: tuple[str, ...],
    state: str | None,
    job_type: str | None,
    count: int,
    offset: int,
    redis_url: str | None,
    prefix: str,
) -> None:
    """Jobs that every one of WORDS finds (a word of their type, data.title, search keys or
    tags; the last may be a word's start), newest first: id, state, type and title."""
    with _queue(redis_url, prefix, reads_only=True) as queue:
        found = queue.search(
            " ".join(words), state=state, job_type=job_type, offset=offset, count=count
        )
        jobs = queue.get_jobs(found)
    for job in jobs:
        title = job.data.get("title", "") if isinstance(job.data, dict) else ""
        click.echo(f"{job.id}\t{job.state}\t{job.type}\t{title}")
    more = "" if found.exact else "at least "
    click.echo(f"{len(jobs)} shown of {more}{found.total}", err=True)


@main.cli.command(short_help="Tag a job.")
@click.argument("job_id", metavar="ID")
@click.argument("tags", nargs=-1, required=True)
@main.redis_options
def tag(job_id: str, tags: tuple[str, ...], redis_url: str | None, prefix: str) -> None:
    """Add TAGS to job ID."""
    with _queue(redis_url, prefix) as queue:
        job = queue.tag(job_id, *tags)
    click.echo(f"job {job.id} tags: {', '.join(job.tags()) or '-'}")


@main.cli.command(short_help="Untag a job.")
@click.argument("job_id", metavar="ID")
@click.argument("tags", nargs=-1, required=True)
@main.redis_options
def untag(job_id: str, tags: tuple[str, ...], redis_url: str | None, prefix: str) -> None:
    """Remove TAGS from job ID."""
    with _queue(redis_url, prefix) as queue:
        job = queue.untag(job_id, *tags)
    click.echo(f"job {job.id} tags: {', '.join(job.tags()) or '-'}")


@main.cli.command(short_help="Show or set how many finished jobs are kept, and how long.")
@click.option("--complete-count", type=click.IntRange(0), metavar="N")
@click.option("--complete-age", metavar="AGE", help="e.g. 7d, 12h, 90m (ms without a unit).")
@click.option("--failed-count", type=click.IntRange(0), metavar="N")
@click.option("--failed-age", metavar="AGE")
@click.option(
    "--keep-all",
    type=click.Choice(["complete", "failed"]),
    multiple=True,
    help="Keep every job that ends so (no bound).",
)
@click.option(
    "--default",
    "reset",
    type=click.Choice(["complete", "failed"]),
    multiple=True,
    help="Go back to the default policy.",
)
@main.redis_options
def retention(
    complete_count: int | None,
    complete_age: str | None,
    failed_count: int | None,
    failed_age: str | None,
    keep_all: tuple[str, ...],
    reset: tuple[str, ...],
    redis_url: str | None,
    prefix: str,
) -> None:
    """Show the retention of finished jobs in force (every process of the queue applies the
    same); with options, set it first. A state given only a count or only an age has no bound
    on the other."""
    policies: dict[str, Any] = {}
    for state, count, age in (
        ("complete", complete_count, complete_age),
        ("failed", failed_count, failed_age),
    ):
        given = [state in keep_all, state in reset, count is not None or age is not None]
        if sum(given) > 1:
            raise BadUsage(f"{state}: give a count and/or an age, --keep-all or --default")
        if state in keep_all:
            policies[state] = None
        elif state in reset:
            policies[state] = "default"
        elif given[2]:
            policies[state] = {"count": count, "age": None if age is None else age_ms(age)}
    with _queue(redis_url, prefix, reads_only=not policies) as queue:
        now = queue.set_retention(**policies) if policies else queue.retention()
    for state in ("complete", "failed"):
        click.echo(f"{state}: {policy_text(now[state])}")
