"""Fan-out jobs and the workers that run jobs, from the command line: ``kue runs`` and ``kue
only``, on the ``cli`` group (imported by the package, so that it joins it).

Exit codes as for every command: an unknown job or bad input is bad usage (2); a Redis that
cannot be reached is unavailable (3).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import click

from . import cli as main
from .control import _queue


def _time(ms: int | None) -> str:
    if not ms:
        return "-"
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S")


def _outcome(run: dict[str, Any]) -> str:
    if "result" in run:
        return json.dumps(run["result"], ensure_ascii=False)[:80]
    return str(run.get("error") or "").partition("\n")[0][:80]


@main.cli.command(short_help="Show the runs of a fan-out job, one per worker.")
@click.argument("job_id", metavar="ID")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of lines.")
@main.redis_options
def runs(job_id: str, as_json: bool, redis_url: str | None, prefix: str) -> None:
    """The runs of fan-out job ID, ordered by start: each worker's run with its state
    (running, complete, failed, lost), start and end (UTC), tries, and result or error."""
    with _queue(redis_url, prefix, reads_only=True) as queue:
        job = queue.get_job(job_id)
        fan_out, found = job.fan_out(), job.runs()
    if as_json:
        report = {"id": job.id, "state": job.state, "fanOut": fan_out, "runs": found}
        click.echo(json.dumps(report, indent=2))
        return
    if fan_out is None:
        click.echo(f"job {job.id} ({job.type}) is {job.state} and does not fan out")
        return
    done = sum(1 for run in found if run.get("state") == "complete")
    click.echo(f"job {job.id} ({job.type}) is {job.state}: {done} of {fan_out['k']} runs complete")
    for run in found:
        click.echo(
            f"  {run['worker']:<20} {run.get('state', '?'):<9} {_time(run.get('started_at'))}"
            f"  {_time(run.get('ended_at')):<19}  tries {run.get('tries', 0)}  {_outcome(run)}"
        )


@main.cli.command(short_help="Change which workers may run a job.")
@click.argument("job_id", metavar="ID")
@click.argument("workers", nargs=-1, metavar="[WORKER]...")
@click.option("--any", "any_worker", is_flag=True, help="Let any worker run it again.")
@main.redis_options
def only(
    job_id: str, workers: tuple[str, ...], any_worker: bool, redis_url: str | None, prefix: str
) -> None:
    """Let only the workers named (by their ids, as `kue worker --id` gives them) run job ID,
    or any worker with --any. A waiting job waits for them; a running one whose worker is no
    longer allowed is stopped in that worker's process and waits for them, no attempt
    counted (a fan-out job's runs on workers no longer allowed stop, and their places go to
    the new ones)."""
    if bool(workers) == any_worker:
        raise click.UsageError("name the workers, or give --any (not both)")
    with _queue(redis_url, prefix) as queue:
        job = queue.set_only(job_id, None if any_worker else list(workers))
    allowed = ", ".join(job.only() or []) or "any worker"
    click.echo(f"job {job.id} ({job.type}) is {job.state} and runs on {allowed}")
