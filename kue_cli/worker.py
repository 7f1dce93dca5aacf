"""``kue worker``: run a handler on jobs of some types until SIGTERM, SIGINT or ``kue
stop-worker``, in one process or several under a supervisor (:mod:`kue_cli.supervisor`)."""

from __future__ import annotations

import logging
import os
import sys
from types import ModuleType
from typing import Any

import click
from click.core import ParameterSource

from kue_core import connection, installed_version, tracing, validate_type
from kue_core import defaults as core_defaults
from kue_core.clients.queue_workers import drained as queue_drained
from kue_core.features.pins import check_worker_id

from . import cli as main
from . import supervisor, task_list
from .errors import BadUsage


@main.cli.command()
@click.argument("handler", metavar="MODULE:FUNC|MODULE|MODULE:TASK")
@click.option(
    "-t",
    "--type",
    "types",
    multiple=True,
    help="Job type to process (repeat for several types, all run by this handler). With a "
    "MODULE of tasks: the tasks to serve (default: all of them).",
)
@click.option(
    "--list",
    "list_only",
    is_flag=True,
    help="List the tasks MODULE defines (type, function, concurrency, isolation, options), "
    "and exit.",
)
@click.option(
    "-n",
    "--concurrency",
    "-c",
    default=1,
    show_default=True,
    type=click.IntRange(1, 10_000),
    help="Jobs of each type run at once (with --shared: of all the types together). With a "
    "MODULE of tasks: each task's own concurrency unless given.",
)
@click.option(
    "--shared",
    is_flag=True,
    help="One pool of --concurrency slots serves all the types given (else each has its own).",
)
@click.option(
    "--reserve",
    type=click.Choice(["ordered", "round-robin", "shuffled"]),
    help="With --shared, the order a slot takes the types in: the first with a job waiting, "
    "in turn, or in turn in a random order.  [default: ordered]",
)
@click.option(
    "--isolation",
    type=click.Choice(["thread", "process"]),
    default="thread",
    show_default=True,
    help="process: each handler runs in a child process of its own.",
)
@click.option(
    "--runtime",
    type=click.Choice(core_defaults.RUNTIMES),
    envvar=core_defaults.RUNTIME_ENV,
    help="loop, the one runtime: every slot a task on one event loop, which owns the "
    "process's Redis connection (async def handlers run on it, def handlers in threads). "
    "[env: KUE_RUNTIME; default: loop]",
)
@click.option(
    "--burst",
    is_flag=True,
    help="Stop once the work of the types has run out (no job of theirs waiting, running, due, "
    "or waiting to retry an attempt failed here; jobs delayed to later are left), then exit 0.",
)
@click.option(
    "--shutdown-timeout",
    default=core_defaults.SHUTDOWN_TIMEOUT,
    show_default=True,
    type=click.FloatRange(0),
    help="Seconds running jobs get to finish on SIGTERM; the rest go back to the queue.",
)
@click.option(
    "--lease",
    default=core_defaults.LEASE_MS / 1000,
    show_default=True,
    type=click.FloatRange(0.01),
    help="Seconds a job stays claimed without a heartbeat: a job whose worker died or hung "
    "goes back to the queue this long after its last one.",
)
@click.option(
    "--stall-limit",
    default=core_defaults.STALL_LIMIT,
    show_default=True,
    type=click.IntRange(0),
    help="Times a job may lose its worker and go back to the queue; one more and it fails.",
)
@click.option(
    "-p",
    "--processes",
    default=1,
    show_default=True,
    type=click.IntRange(1, 1024),
    help="Worker processes to run under one supervisor, which restarts any that dies.",
)
@click.option(
    "--id",
    "worker_id",
    envvar="KUE_WORKER_ID",
    metavar="ID",
    help="The worker id to register under, the same across restarts (letters, digits and "
    ". _ : @ -, up to 100 characters); refused (exit 2) while a live process has it. With "
    "--processes N, process k is ID-k. [env: KUE_WORKER_ID; default: host:pid:random]",
)
@click.option(
    "--version-tag",
    "version",
    envvar="KUE_VERSION_TAG",
    metavar="VERSION",
    help="The version this worker runs, for the history's deploy markers (printable, no "
    "spaces, up to 100 characters). [env: KUE_VERSION_TAG; default: the version of the "
    "installed package that provides HANDLER's module, else kue's]",
)
@click.option(
    "--otel",
    is_flag=True,
    envvar="KUE_OTEL",
    help="OpenTelemetry traces: a span per attempt, in its producer's trace, to the global "
    'tracer provider (see README; pip install "kue[otel]"). [env: KUE_OTEL]',
)
@main.redis_options
@main.failing
def worker(
    handler: str,
    types: tuple[str, ...],
    list_only: bool,
    concurrency: int,
    shared: bool,
    reserve: str | None,
    isolation: str,
    runtime: str | None,
    burst: bool,
    shutdown_timeout: float,
    lease: float,
    stall_limit: int,
    processes: int,
    worker_id: str | None,
    version: str | None,
    otel: bool,
    redis_url: str | None,
    prefix: str,
) -> None:
    """Run HANDLER on jobs of each --type until SIGTERM, SIGINT or kue stop-worker (or, with
    --burst, until their work has run out), then shut down gracefully: claim nothing more, let
    running jobs finish, give back the rest.

    HANDLER is MODULE:FUNC, a MODULE whose typed tasks (@queue.task) to serve, or
    MODULE:TASK, one typed task (no --type: it serves its own)."""
    if reserve is not None and not shared:
        raise BadUsage("--reserve goes with --shared")
    if burst and processes > 1:
        raise BadUsage("--burst runs one worker process: leave out --processes")
    if otel:
        tracing.enable()  # KueError (exit 2) when OpenTelemetry is not installed
    fn = main.load_handler(handler, modules=True)
    tasks = None
    if isinstance(fn, ModuleType):
        tasks = task_list.of_module(fn, types)
    elif task_list.is_task(fn):  # MODULE:TASK, one typed task: its own type
        tasks = task_list.of_task(fn, handler, types)
    if tasks is not None:
        if list_only:
            click.echo(task_list.describe(tasks))
            return
        given = click.get_current_context().get_parameter_source
        for option, flag in (("shared", "--shared"), ("isolation", "--isolation")):
            if given(option) is ParameterSource.COMMANDLINE:
                raise BadUsage(f"{flag} is for a MODULE:FUNC handler: a task has its own")
        if given("concurrency") is not ParameterSource.COMMANDLINE:
            concurrency = 0  # each task's own
        types = tuple(tasks)
    elif list_only:
        raise BadUsage("--list lists the tasks of a MODULE, not a MODULE:FUNC handler")
    elif not types:
        raise BadUsage("give the job types to process with --type (-t)")
    for job_type in types:
        validate_type(job_type)  # all of them, before any worker starts
    if worker_id is not None and processes > 1:
        check_worker_id(f"{worker_id}-{processes}")  # the longest a child gets
    own_id = worker_id if processes == 1 else None
    if version is None:
        version = installed_version(handler.partition(":")[0])
    options: dict[str, Any] = {
        "lease_ms": round(lease * 1000),
        "stall_limit": stall_limit,
        "worker_id": own_id,
        "version": version,
        "runtime": runtime,
    }
    queue, url = main.connect(redis_url, prefix, **options)
    if processes > 1:
        queue.close()  # the children connect for themselves
        argv = [sys.executable, "-m", "kue_cli", "worker", handler]
        argv += [f"--type={t}" for t in types]
        if tasks is None:
            argv += [f"--concurrency={concurrency}", f"--isolation={isolation}"]
        elif concurrency:
            argv += [f"--concurrency={concurrency}"]
        argv += [f"--shutdown-timeout={shutdown_timeout}", f"--lease={lease}"]
        argv += [f"--stall-limit={stall_limit}", f"--version-tag={version}"]
        if runtime is not None:
            argv += [f"--runtime={runtime}"]
        if shared:
            argv += ["--shared", f"--reserve={reserve or 'ordered'}"]
        if otel:
            argv += ["--otel"]
        level = logging.getLevelName(logging.getLogger().getEffectiveLevel())
        env = {
            **os.environ,
            "KUE_REDIS_URL": url,
            core_defaults.PREFIX_ENV: prefix,
            "KUE_LOG_LEVEL": level,
        }
        env.pop("KUE_WORKER_PROCESSES", None)
        env.pop("KUE_WORKER_ID", None)  # each child gets its own: --id=ID-k
        code = supervisor.Supervisor(argv, env, processes, shutdown_timeout, worker_id).run()
        click.get_current_context().exit(code)
    on_stop = "Running jobs return to the queue when their leases expire."
    # Caught before the first process() registers this worker: a SIGTERM that comes as soon as
    # it is listed in queue.workers() still shuts it down gracefully, and it leaves the list.
    caught = main.catch_signals(on_stop)
    if tasks is not None:
        queue.include_tasks(*tasks.values())
        queue.process_tasks(types, concurrency=concurrency or None)
    elif shared:
        queue.process(
            list(types), concurrency, fn, isolation=isolation, reserve=reserve or "ordered"
        )
    else:
        for job_type in types:
            queue.process(job_type, concurrency, fn, isolation=isolation)
    log = logging.getLogger(__name__)
    log.info(
        "worker pid %d, id %s: serving %s on %s, prefix %s",
        os.getpid(),
        queue.worker_id,
        serving(types, concurrency, tasks, shared, reserve, isolation),
        connection.redact(url),
        prefix,
    )
    done = queue_drained(queue) if burst else None
    name = main.wait_for_signal(on_stop, queue.stopped_remotely, caught, done)
    if name is None and not queue.stopped_remotely.is_set():
        log.info("burst: no work left; stopping")
        queue.shutdown(shutdown_timeout)
    elif name is None:  # the queue has shut its workers down already
        log.info("stopped remotely (kue stop-worker, or its worker id taken over)")
    else:
        log.info("%s: stopping; running jobs get %g s to finish", name, shutdown_timeout)
        queue.shutdown(shutdown_timeout)
    queue.close()
    log.info("stopped")


def serving(
    types: tuple[str, ...],
    concurrency: int,
    tasks: dict[str, Any] | None,
    shared: bool,
    reserve: str | None,
    isolation: str,
) -> str:
    """What a worker serves, for its start line: ``charge x4, receipt x1, digest x2 (process)``
    (each type with its slots, and its isolation unless threads); ``email, sms x4 shared
    (ordered)`` for one pool of slots."""
    if shared:
        how = ", ".join([reserve or "ordered"] + ([isolation] if isolation != "thread" else []))
        return f"{', '.join(types)} x{concurrency} shared ({how})"
    parts = []
    for job_type in types:
        task = tasks[job_type] if tasks is not None else None
        slots = concurrency or (task.concurrency if task is not None else 1)
        isolated = task.isolation if task is not None else isolation
        parts.append(f"{job_type} x{slots}" + (f" ({isolated})" if isolated != "thread" else ""))
    return ", ".join(parts)
