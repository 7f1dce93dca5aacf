"""Job control from the command line: ``kue cancel``, ``kue move``, ``kue stop-worker``,
``kue pause`` and ``kue resume``, on the ``cli`` group (imported by the package, so that they
join it).

Exit codes as for every command: an unknown job or worker, or bad input, is bad usage (2);
what the job's state does not allow (cancelling a complete job, moving a running one without
``--force``) has failed (1); a Redis that cannot be reached is unavailable (3).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator

import click
import redis

from kue_core import ConnectionFailed, InvalidTransition, KueError, Queue, validate_type
from kue_core import defaults as core_defaults

from . import cli as main
from .errors import BadUsage, Refused, Unavailable


@contextlib.contextmanager
def _queue(redis_url: str | None, prefix: str, *, reads_only: bool = False) -> Iterator[Queue]:
    """The queue, closed after; library refusals become messages and exit codes. See
    ``connect`` for ``reads_only``."""
    queue, _ = main.connect(redis_url, prefix, reads_only=reads_only)
    try:
        yield queue
    except (ConnectionFailed, redis.RedisError, OSError) as e:
        raise Unavailable(f"Redis stopped answering: {e}") from None
    except InvalidTransition as e:
        raise Refused(str(e)) from None
    except KueError as e:  # JobNotFound, WorkerNotFound, InvalidJob
        raise BadUsage(str(e)) from None
    finally:
        queue.close()


@main.cli.command(short_help="Cancel a job, wherever it runs.")
@click.argument("job_id", metavar="ID")
@click.option("--reason", default="", help="Why; the job's error becomes 'cancelled: REASON'.")
@main.redis_options
def cancel(job_id: str, reason: str, redis_url: str | None, prefix: str) -> None:
    """Cancel job ID, in any state but complete: it fails at once and is not retried; if it
    is running, its worker process stops the handler."""
    with _queue(redis_url, prefix) as queue:
        job = queue.cancel(job_id, reason)
    click.echo(f"cancelled job {job.id}: {job.error}")


@main.cli.command(short_help="Put a job under another type.")
@click.argument("job_id", metavar="ID")
@click.argument("job_type", metavar="TYPE")
@click.option(
    "--force",
    is_flag=True,
    help="Move a running job too: its attempt ends, as on cancel, and it waits under TYPE.",
)
@main.redis_options
def move(job_id: str, job_type: str, force: bool, redis_url: str | None, prefix: str) -> None:
    """Put job ID under another TYPE, keeping its id, data, priority and state (a waiting job
    waits in TYPE's queue). A running job is refused without --force."""
    with _queue(redis_url, prefix) as queue:
        job = queue.move(job_id, job_type, force=force)
    click.echo(f"moved job {job.id} to {job.type} ({job.state})")


@main.cli.command("stop-worker", short_help="Ask a worker process to shut down gracefully.")
@click.argument("worker_id", metavar="WORKER_ID")
@click.option(
    "--timeout",
    default=core_defaults.SHUTDOWN_TIMEOUT,
    show_default=True,
    type=click.FloatRange(0),
    metavar="S",
    help="Seconds its running jobs get to finish; the rest go back to the queue.",
)
@main.redis_options
def stop_worker(worker_id: str, timeout: float, redis_url: str | None, prefix: str) -> None:
    """Ask the worker process WORKER_ID (its --id, else host:pid:token, as GET /api/workers
    and the dashboard list them) to shut down gracefully, as SIGTERM does; `kue worker` then
    exits 0. Returns once asked."""
    with _queue(redis_url, prefix) as queue:
        queue.stop_worker(worker_id, timeout)
    click.echo(f"asked worker {worker_id} to stop; its running jobs get {timeout:g} s")


@main.cli.command(short_help="Stop workers from taking jobs of some types.")
@click.argument("job_types", nargs=-1, required=True, metavar="TYPE...")
@click.option(
    "--json", "as_json", is_flag=True, help="Print JSON: each type, and whether it changed."
)
@main.redis_options
def pause(job_types: tuple[str, ...], as_json: bool, redis_url: str | None, prefix: str) -> None:
    """Stop every worker from taking jobs of each TYPE (running jobs finish; jobs can still be
    saved). kue resume lets them take jobs again; kue stats marks paused types."""
    _switch(job_types, as_json, redis_url, prefix, pause=True)


@main.cli.command(short_help="Let workers take jobs of paused types again.")
@click.argument("job_types", nargs=-1, required=True, metavar="TYPE...")
@click.option(
    "--json", "as_json", is_flag=True, help="Print JSON: each type, and whether it changed."
)
@main.redis_options
def resume(job_types: tuple[str, ...], as_json: bool, redis_url: str | None, prefix: str) -> None:
    """Let workers take jobs of each paused TYPE again."""
    _switch(job_types, as_json, redis_url, prefix, pause=False)


def _switch(
    job_types: tuple[str, ...], as_json: bool, redis_url: str | None, prefix: str, pause: bool
) -> None:
    """Pause or resume each type, once all are known to be valid type names."""
    try:
        checked = list(dict.fromkeys(validate_type(t) for t in job_types))
    except KueError as e:
        raise BadUsage(str(e)) from None
    with _queue(redis_url, prefix) as queue:
        changed = [queue.pause(t) if pause else queue.resume(t) for t in checked]
    word = "paused" if pause else "resumed"
    if as_json:
        pairs = zip(checked, changed, strict=True)
        report = [{"type": t, "paused": pause, "changed": c} for t, c in pairs]
        click.echo(json.dumps(report, indent=2))
        return
    for job_type, done in zip(checked, changed, strict=True):
        click.echo(f"{word} {job_type}" if done else f"{job_type} was already {word}")
