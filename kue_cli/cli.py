"""The ``kue`` command line: the group, the options and helpers its commands share, and
``kue example``, ``kue dashboard``, ``kue stats``, ``kue doctor``; ``kue worker`` is in
:mod:`kue_cli.worker`, job control (``kue cancel``, ``kue move``, ``kue stop-worker``) in
:mod:`kue_cli.control`, and each other family of commands in a module of its own.

Its exit codes (:data:`EPILOG`, shown by ``kue --help``) are part of its interface: scripts
and service managers tell a bad invocation (2) from a Redis that is down for now (3).
"""

from __future__ import annotations

import functools
import json
import logging
import os
import pkgutil
import sys
import threading
import traceback
from collections.abc import Callable
from typing import Any, NoReturn

import click
import redis
from flask import Flask

from kue_core import HISTORY_RANGES, STATES, KueError, Queue, connection
from kue_core import defaults as core_defaults
from kue_core.worker.signals import Signals
from kue_example import demo
from kue_http import ConfigError, create_app
from kue_http.rules import report as rules_report

from . import doctor as doctor_cli
from . import history_text, records_text, rules_text, serve, timings
from .errors import BadUsage, Unavailable

EPILOG = """\b
Exit codes:
  0  done, or stopped gracefully by SIGTERM, SIGINT (Ctrl-C) or kue stop-worker
  1  failed while running; kue doctor: problems found (and not repaired);
     kue cancel, move, job: the job's state does not allow it;
     kue job stream: the job failed, or had not ended within --timeout;
     kue remove: jobs are waiting for it (see --cascade)
  2  bad usage: an option, Redis URL, prefix, handler, job or worker id that cannot work
     or does not exist (a job, a worker, a schedule)
  3  unavailable: Redis cannot be reached or the port is taken (try again later)
"""


# -- shared options -------------------------------------------------------------------------
def redis_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``--redis URL`` and ``--prefix``, on every command that reaches Redis."""
    fn = click.option(
        "--prefix",
        envvar=core_defaults.PREFIX_ENV,  # empty counts as unset, as in Queue()
        default=core_defaults.PREFIX,
        show_default=True,
        help=f"Key prefix of the queue (Kue's default is q). [env: {core_defaults.PREFIX_ENV}]",
    )(fn)
    return click.option(
        "--redis",
        "redis_url",
        envvar="KUE_REDIS_URL",
        metavar="URL",
        help="redis://[:password@]host:port/db, rediss://... or unix:///path.sock "
        "[env: KUE_REDIS_URL; default: an embedded Redis with its data in ./.kue].",
    )(fn)


def http_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``--host`` and ``--port``, on every command that serves the dashboard."""
    fn = click.option(
        "--port",
        default=3000,
        show_default=True,
        type=click.IntRange(0, 65535),
        help="Port to listen on (0: any free port).",
    )(fn)
    return click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind.")(
        fn
    )


def connect(
    redis_url: str | None, prefix: str, *, reads_only: bool = False, **options: Any
) -> tuple[Queue, str]:
    """A queue on ``redis_url`` (else the embedded Redis, started if need be, and said so on
    stderr) that answers, and the URL other processes can reach it at; ``options`` go to
    :class:`Queue`. A command that ``reads_only`` does not start an empty embedded Redis in a
    folder that has none: bad usage, saying where it looked."""
    if not redis_url:
        folder = connection.embedded_folder()
        if reads_only and not connection.embedded_exists():
            raise BadUsage(
                f"no embedded Redis in {folder}: give --redis URL (or KUE_REDIS_URL), or run "
                "this in the folder whose .kue holds the jobs (where kue example ran)"
            )
        click.echo(f"kue: the embedded Redis in {folder} (--redis URL for another)", err=True)
    try:
        url = redis_url or connection.embedded_url()
    except KueError as e:  # the embedded Redis would not start
        raise Unavailable(str(e)) from None
    try:
        queue = Queue(url, prefix, **options)
    except KueError as e:  # an invalid URL or prefix
        raise BadUsage(str(e)) from None
    try:
        queue.client.ping()
    except (redis.RedisError, OSError) as e:
        queue.close()
        raise Unavailable(f"cannot reach Redis at {connection.redact(url)}: {e}") from None
    return queue, url


def load_handler(spec: str, modules: bool = False) -> Any:
    """The function named by ``MODULE:FUNC`` (FUNC may be dotted: ``module:obj.method``),
    imported as Python would from the current directory (``pkgutil.resolve_name``); with
    ``modules``, a ``MODULE`` alone too (its module)."""
    module_name, colon, attr = spec.partition(":")
    if modules and not colon and module_name:
        return _import(module_name, module_name)
    if not colon or not module_name or not attr:
        raise BadUsage(f"the handler must be given as MODULE:FUNC, got {spec!r}")
    obj = _import(spec, module_name)
    if not callable(obj):
        raise BadUsage(f"{spec} is not a function: it is of type {type(obj).__name__}")
    return obj


def _import(spec: str, module_name: str) -> Any:
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        obj: Any = pkgutil.resolve_name(spec)
    except ValueError as e:
        if not _raised_by_resolve_name(e):  # the module raised it as it was imported
            raise BadUsage(f"importing {module_name!r} failed:\n{traceback.format_exc()}") from None
        raise BadUsage(
            f"the handler must be given as MODULE:FUNC, dotted Python names, got {spec!r}"
        ) from None
    except ModuleNotFoundError as e:
        if e.name and (module_name + ".").startswith(e.name + "."):
            raise BadUsage(
                f"cannot import {module_name!r}: there is no module {e.name!r} in the current "
                "directory or the installed packages"
            ) from None
        raise BadUsage(f"importing {module_name!r} failed:\n{traceback.format_exc()}") from None
    except AttributeError:
        if module_name not in sys.modules:  # the module raised it as it was imported
            raise BadUsage(f"importing {module_name!r} failed:\n{traceback.format_exc()}") from None
        attr = spec.partition(":")[2]
        raise BadUsage(f"{module_name!r} has no attribute {attr!r}") from None
    except Exception:  # the module itself raised (a syntax error, a failing import...)
        raise BadUsage(f"importing {module_name!r} failed:\n{traceback.format_exc()}") from None
    return obj


def _raised_by_resolve_name(error: BaseException) -> bool:
    """Whether ``pkgutil.resolve_name`` raised ``error`` itself (not code it ran)."""
    tb = error.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    return tb is not None and tb.tb_frame.f_code is pkgutil.resolve_name.__code__


def catch_signals(on_stop: str) -> Signals:
    """SIGTERM and SIGINT caught from now on (see :mod:`kue_core.worker.signals`); a second one
    ends the process at once, saying so and ``on_stop``."""
    return Signals(lambda name: click.echo(f"{name} again: exiting now. {on_stop}", err=True))


def wait_for_signal(
    on_stop: str,
    stopped: threading.Event | None = None,
    caught: Signals | None = None,
    done: Callable[[], bool] | None = None,
) -> str | None:
    """Block until SIGTERM or SIGINT (caught from now on, or by ``caught`` since it was made)
    and return its name, or until ``stopped`` is set or ``done()`` says True and return None
    (see :class:`Signals`)."""
    return (caught or catch_signals(on_stop)).wait(stopped, done)


def failing(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Library errors met while a command starts are bad usage (exit 2), not tracebacks."""

    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except KueError as e:
            raise BadUsage(str(e)) from None

    return run


# -- commands -------------------------------------------------------------------------------
@click.group(epilog=EPILOG)
@click.option(
    "--log-level",
    envvar="KUE_LOG_LEVEL",
    type=click.Choice(["debug", "info", "warning", "error"], case_sensitive=False),
    default="info",
    show_default=True,
    help="debug also logs every job a worker completes. [env: KUE_LOG_LEVEL]",
)
@click.version_option(package_name="kue", prog_name="kue")
def cli(log_level: str) -> None:
    """kue: a priority job queue on Redis, compatible with Kue."""
    logging.basicConfig(
        level=log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    if log_level.lower() != "debug":
        logging.getLogger("werkzeug").setLevel(logging.WARNING)  # one line per request


@cli.command()
@redis_options
@http_options
@click.option(
    "--rate",
    default=2.0,
    show_default=True,
    type=click.FloatRange(0.1, 1000),
    help="Rounds of new jobs per second.",
)
@failing
def example(redis_url: str | None, prefix: str, host: str, port: int, rate: float) -> None:
    """Run the demo: the dashboard, workers for several job types, and a producer that keeps
    creating jobs. Ctrl-C stops it gracefully."""
    queue, url = connect(redis_url, prefix)
    server = serve.start_dev_server(_app(url, prefix), host, port)
    worker_log = logging.getLogger("kue_core.worker")
    if not worker_log.isEnabledFor(logging.DEBUG):
        worker_log.setLevel(logging.WARNING)  # the demo prints each outcome itself, once
    stop = demo.start(queue, click.echo, rate)
    on_stop = "Running jobs return to the queue when their leases expire."
    caught = catch_signals(on_stop)  # before the line that says Ctrl-C stops it
    click.echo(f"kue example: the dashboard is on {server.url}/ (Ctrl-C to stop)")
    name = wait_for_signal(on_stop, caught=caught)
    click.echo(f"{name}: stopping; running jobs get {core_defaults.SHUTDOWN_TIMEOUT:g} s")
    server.shutdown()
    stop(core_defaults.SHUTDOWN_TIMEOUT)
    queue.close()
    click.echo("stopped")


@cli.command()
@redis_options
@http_options
@click.option("--gunicorn", "use_gunicorn", is_flag=True, help="Serve with gunicorn (gthread).")
@click.option(
    "-w",
    "--workers",
    type=click.IntRange(1, 64),
    help="gunicorn worker processes (default 2); needs --gunicorn.",
)
@click.option(
    "--threads",
    default=32,
    show_default=True,
    type=click.IntRange(1, 1000),
    help="Requests and event streams each gunicorn worker serves at once.",
)
@click.option("--readonly", is_flag=True, default=None, help="Refuse every write (405).")
@failing
def dashboard(
    redis_url: str | None,
    prefix: str,
    host: str,
    port: int,
    use_gunicorn: bool,
    workers: int | None,
    threads: int,
    readonly: bool | None,
) -> None:
    """Serve the dashboard at / and the JSON API under /api.

    Without --gunicorn this is a development server in one process. Other settings (KUE_AUTH,
    KUE_API_PREFIX...) come from the environment; see docs/http-api.md.
    """
    if workers is not None and not use_gunicorn:
        raise BadUsage("-w/--workers needs --gunicorn")
    queue, url = connect(redis_url, prefix)
    queue.close()
    config: dict[str, Any] = {"KUE_READONLY": True} if readonly else {}
    app = _app(url, prefix, config)  # checks every setting before anything starts
    api = app.config["KUE_API_PREFIX"]
    if use_gunicorn:
        serve.check_port(host, port)
        click.echo(f"kue dashboard: http://{serve.netloc(host, port)}/ (API under {api})")
        serve.run_gunicorn(
            {**config, "KUE_REDIS_URL": url, core_defaults.PREFIX_ENV: prefix},
            host,
            port,
            workers=workers or 2,
            threads=threads,
        )
        return
    server = serve.start_dev_server(app, host, port)
    caught = catch_signals("")  # before the line that says Ctrl-C stops it
    click.echo(
        f"kue dashboard: {server.url}/ (API under {api}); a development server, "
        "use --gunicorn in production. Ctrl-C to stop."
    )
    wait_for_signal("", caught=caught)
    server.shutdown()
    click.echo("stopped")


@cli.command()
@redis_options
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@click.option(
    "--history",
    "span",
    type=click.Choice(list(HISTORY_RANGES)),
    help="Instead: the history over this range (completed, failed, most waiting, wait and "
    "run percentiles, per type; with -t, point by point) and the deploys in it.",
)
@click.option("-t", "--type", "job_type", help="With --history: of this type only.")
@failing
def stats(
    redis_url: str | None, prefix: str, as_json: bool, span: str | None, job_type: str | None
) -> None:
    """Jobs per state, for every job type and in all; paused types; live workers; the
    retention of finished jobs and the Redis memory used; the watchers of kue rules; how
    long jobs of each type waited and ran today (UTC). With --history, the statistics'
    history instead."""
    if job_type is not None and span is None:
        raise BadUsage("--type goes with --history")
    queue, _ = connect(redis_url, prefix, reads_only=True)
    if span is not None:
        return history_text.print_report(queue, job_type, span, as_json)
    try:
        total, by_type = queue.counts(), queue.counts_by_type()
        paused, workers = queue.paused(), len(queue.workers())
        today = queue.timings()
        kept, memory = queue.retention(), queue.memory()
        watchers = rules_report(queue)
    except (redis.RedisError, OSError) as e:
        raise Unavailable(f"Redis stopped answering: {e}") from None
    finally:
        queue.close()
    if as_json:
        report = {
            "total": total,
            "types": by_type,
            "paused": paused,
            "workers": workers,
            "timings": today,
            "retention": kept,
            "memory": memory,
        }
        if watchers:  # as the text: nothing of kue rules until a watcher is known
            report["rules"] = watchers
        click.echo(json.dumps(report, indent=2))
        return
    rows = [(t + (" (paused)" if t in paused else ""), counts) for t, counts in by_type.items()]
    rows.append(("total", total))
    width = max(len(name) for name, _ in rows)
    # As the dashboard: a column for suspended jobs (signals) only while there are some.
    shown = [s for s in STATES if s != "suspended" or total.get(s)]
    click.echo("type".ljust(width) + "".join(f"{s:>10}" for s in shown))
    for name, counts in rows:
        click.echo(name.ljust(width) + "".join(f"{counts.get(s, 0):>10}" for s in shown))
    click.echo(f"workers: {workers} live worker process{'' if workers == 1 else 'es'}")
    for line in records_text.stats_lines(kept, memory):
        click.echo(line)
    for line in rules_text.stats_lines(watchers):
        click.echo(line)
    click.echo()
    for line in timings.lines(today):
        click.echo(line)


@cli.command(help=doctor_cli.HELP, short_help=doctor_cli.SHORT_HELP, epilog=doctor_cli.EPILOG)
@redis_options
@doctor_cli.options
@failing
def doctor(
    redis_url: str | None, prefix: str, repair: bool, as_json: bool, stuck_after: int
) -> None:
    queue, _ = connect(redis_url, prefix, reads_only=True)
    try:
        code = doctor_cli.run(queue, repair, as_json, stuck_after)
    finally:
        queue.close()
    click.get_current_context().exit(code)


def _app(url: str, prefix: str, config: dict[str, Any] | None = None) -> Flask:
    try:
        return create_app(
            {**(config or {}), "KUE_REDIS_URL": url, core_defaults.PREFIX_ENV: prefix}
        )
    except ConfigError as e:
        raise BadUsage(str(e)) from None


def main() -> NoReturn:
    """The ``kue`` console script."""
    cli.main(prog_name="kue", auto_envvar_prefix="KUE")  # --port of example: KUE_EXAMPLE_PORT
    raise SystemExit(0)  # pragma: no cover - click exits itself
