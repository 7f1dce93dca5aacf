"""``kue job signal ID NAME``, a command of the ``kue job`` group (:mod:`kue_cli.jobs`): give a
job a signal (see :mod:`kue_core.features.signals`), which resumes it when it is suspended
waiting for that signal, or is kept for it. Exit codes: 0 when the signal resumed the job, was
kept for it, or the job had it already (said, and nothing changed: sending again is safe);
1 when the job has ended; 2 for a bad id, name or payload, or an unknown job; 3 when Redis
cannot be reached."""

from __future__ import annotations

import json
from typing import Any

import click

from kue_core import SIGNAL_MESSAGES, JobNotFound

from . import cli as main
from .control import _queue
from .errors import BadUsage


@click.command("signal", short_help="Give a job a signal (resumes a suspended job).")
@click.argument("job_id", metavar="ID")
@click.argument("name")
@click.option("--data", metavar="JSON", help="The signal's payload: any JSON value.")
@click.option("--json", "as_json", is_flag=True, help='Print {"outcome", "job"} as JSON.')
@main.redis_options
def signal(
    job_id: str,
    name: str,
    data: str | None,
    as_json: bool,
    redis_url: str | None,
    prefix: str,
) -> None:
    """Give job ID the signal NAME, with --data as its payload (the job's handler reads it as
    job.signals[NAME]). A job suspended waiting for it waits for a worker again; otherwise it
    is kept for the job. Only the first signal of a name counts."""
    payload: Any = None
    if data is not None:
        try:
            payload = json.loads(data)
        except ValueError as e:
            raise BadUsage(f"--data is not JSON: {e}") from None
    with _queue(redis_url, prefix) as queue:
        outcome = queue.signal(job_id, name, payload)
        try:
            job: dict[str, object] | None = queue.get_job(job_id).to_dict()
        except JobNotFound:  # resumed, run and removed on completion before this read
            job = None
    if as_json:
        click.echo(json.dumps({"outcome": outcome, "job": job}))
    else:
        click.echo(SIGNAL_MESSAGES[outcome].format(id=int(job_id), name=name))
