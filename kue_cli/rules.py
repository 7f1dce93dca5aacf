"""``kue rules CONFIG``: run a Resc configuration (JSON or Hjson) against the queue's Redis,
until SIGTERM or Ctrl-C; see :mod:`kue_rules`. On the ``cli`` group (imported by the package).

A configuration with an error is refused before anything starts (bad usage, 2), naming the
file, the rule and the reason. ``--check`` stops there; ``--retry-failed`` puts the failed
events of every watcher back on its input and exits.
"""

from __future__ import annotations

import logging

import click

from kue_core import KueError
from kue_rules import ConfigError, Rules, Store, load

from . import cli as main
from .errors import BadUsage


@main.cli.command(name="rules")
@click.argument("config_file", metavar="CONFIG", type=click.Path(dir_okay=False))
@click.option(
    "--redis",
    "redis_url",
    envvar="KUE_REDIS_URL",
    metavar="URL",
    help="Redis to use instead of the configuration's redis.url [env: KUE_REDIS_URL].",
)
@click.option(
    "--prefix",
    default=None,
    help="Key prefix of the kue queue (default: the configuration's prefix, else q).",
)
@click.option(
    "--log-level",
    type=click.Choice(["debug", "info", "warning", "error"], case_sensitive=False),
    default=None,
    help="warning (the default here) logs failures; info each event's tasks and jobs; debug "
    "which rules fired.",
)
@click.option("--check", is_flag=True, help="Check the configuration, print its watchers, exit.")
@click.option(
    "--retry-failed",
    is_flag=True,
    help="Put every watcher's failed events back on its input, then exit.",
)
@main.failing
def rules(
    config_file: str,
    redis_url: str | None,
    prefix: str | None,
    log_level: str | None,
    check: bool,
    retry_failed: bool,
) -> None:
    """Turn events on Redis lists (or kue job events) into tasks and jobs by the rules of a
    Resc configuration. Every watcher runs in a thread; SIGTERM or Ctrl-C lets each finish its
    event (or leave it in its taken list, replayed at the next start)."""
    # kue_rules's modules log under the package's name (kue_rules.watcher, ...): one level
    # for them all.
    logging.getLogger("kue_rules").setLevel((log_level or "warning").upper())
    try:
        config = load(config_file, prefix)
    except ConfigError as e:
        raise BadUsage(str(e)) from None
    if check:
        for w in config.watchers:
            click.echo(f"{w.label}: taken {w.taken}, failed {w.failed}")
            for r in w.rules:
                made = "jobs" if r.make.job else "tasks"
                click.echo(f"  {r.name}: on {r.on.pattern!r}, {len(r.fetch)} fetch, makes {made}")
        return
    url = redis_url or config.redis_url
    if url and url.split("://", 1)[0].endswith("+cluster"):
        raise BadUsage(
            "kue rules needs one Redis server (or Sentinel): on a Redis Cluster, Resc's lists "
            "are outside the queue's slot, and one script ends each event across them"
        )
    queue, _ = main.connect(url, config.prefix)
    try:
        if retry_failed:
            store = Store(queue)
            for w in config.watchers:
                try:
                    moved = store.retry_failed(w.input)
                except KeyError:
                    moved = 0  # never run: nothing failed
                click.echo(f"{w.label}: {moved} failed events back on {w.input}")
            return
        try:
            running = Rules(config, queue).start()
        except KueError as e:
            raise BadUsage(str(e)) from None
        on_stop = "Events being handled stay taken."
        caught = main.catch_signals(on_stop)  # before the line that says it runs
        click.echo(f"kue rules: {len(config.watchers)} watchers of {config.path} running", err=True)
        signal_name = main.wait_for_signal(on_stop, caught=caught)
        click.echo(f"{signal_name}: stopping after the events being handled", err=True)
        running.stop()
    finally:
        queue.close()
