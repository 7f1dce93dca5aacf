"""Schedules from the command line: ``kue schedules`` lists them, and ``kue schedule add``,
``remove``, ``trigger``, ``pause`` and ``resume`` steer one, on the ``cli`` group (imported by
the package, so that they join it).

Exit codes as for every command: an unknown schedule or bad input (a definition that cannot
work) is bad usage (2); a Redis that cannot be reached is unavailable (3).
"""

from __future__ import annotations

import datetime
import json
from typing import Any

import click

from . import cli as main
from .control import _queue
from .errors import BadUsage
from .records_text import age_ms

_COLUMNS = ("key", "rule", "state", "next", "runs", "last job")


def _when(ms: int | None) -> str:
    """A due time in UTC, to the second (``-`` for none)."""
    if ms is None:
        return "-"
    at = datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC)
    return at.strftime("%Y-%m-%d %H:%M:%S UTC")


def _rule(s: dict[str, Any]) -> str:
    if s["kind"] == "cron":
        return f"cron {s['cron']} {s['tz']}"
    offset = f" +{s['offset']} ms" if s.get("offset") else ""
    return f"every {s['every']} ms{offset}"


def _state(s: dict[str, Any]) -> str:
    return "ended" if s["ended"] else "paused" if s["paused"] else "active"


def _last(s: dict[str, Any]) -> str:
    last = s["last_job"]
    if last is None:
        return "-"
    return f"{last['id']} ({last['state'] or 'removed'})"


def _row(s: dict[str, Any]) -> tuple[str, ...]:
    return (s["key"], _rule(s), _state(s), _when(s["next"]), str(s["runs"]), _last(s))


def _describe(s: dict[str, Any]) -> list[str]:
    """One schedule, as ``kue schedule add`` and ``resume`` print it."""
    lines = [f"schedule {s['key']}: {_rule(s)}, type {s['type']}, {_state(s)}"]
    if s["upcoming"]:
        label = "next (when resumed)" if s["paused"] else "next"
        lines.append(f"  {label}: {', '.join(_when(t) for t in s['upcoming'])}")
    bounds = [f"{name} {_when(s[name])}" for name in ("start", "end") if s.get(name) is not None]
    if s.get("limit") is not None:
        bounds.append(f"limit {s['limit']}")
    lines.append(f"  catch-up: {s['catch_up']}{'; ' if bounds else ''}{', '.join(bounds)}")
    lines.append(f"  data: {json.dumps(s['data'])}; options: {json.dumps(s['options'])}")
    extra = [f"{s[k]} {k}" for k in ("triggered", "deduplicated") if s.get(k)]
    counts = f" ({', '.join(extra)})" if extra else ""
    lines.append(f"  runs: {s['runs']}{counts}; last job: {_last(s)}")
    return lines


@main.cli.command(short_help="List the schedules.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@main.redis_options
def schedules(as_json: bool, redis_url: str | None, prefix: str) -> None:
    """Every schedule, by key: its rule (every N ms, or a cron expression and time zone), its
    state (active, paused or ended), its next due time, the jobs it made and the last one."""
    with _queue(redis_url, prefix, reads_only=True) as queue:
        found = queue.schedules()
    if as_json:
        click.echo(json.dumps(found, indent=2))
        return
    if not found:
        click.echo("no schedules")
        return
    rows = [_COLUMNS, *(_row(s) for s in found)]
    widths = [max(len(r[i]) for r in rows) for i in range(len(_COLUMNS))]
    for r in rows:
        click.echo("  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip())


@main.cli.group(short_help="Add, remove, trigger, pause or resume a schedule.")
def schedule() -> None:
    """Steer one schedule: jobs made every N ms or by a cron expression."""


def _priority(text: str | None) -> str | int | None:
    if text is None:
        return None
    try:
        return int(text)
    except ValueError:
        return text  # a name: low, normal, medium, high, critical (checked by the queue)


@schedule.command(short_help="Define a schedule (or change it: upserted by KEY).")
@click.argument("key", metavar="KEY")
@click.argument("job_type", metavar="TYPE")
@click.option("--every", metavar="MS", help="Make a job every MS ms (or 90s, 15m, 1h, 1d).")
@click.option("--cron", metavar="EXPR", help="Make a job at each time EXPR (5 fields) matches.")
@click.option("--tz", metavar="TZ", help="IANA time zone of --cron. [default: UTC]")
@click.option("--data", metavar="JSON", help="The jobs' data, as JSON. [default: {}]")
@click.option(
    "--offset", type=click.IntRange(0), metavar="MS", help="Shift the --every timetable by MS."
)
@click.option("--limit", type=click.IntRange(1), metavar="N", help="End after N jobs.")
@click.option(
    "--catch-up",
    type=click.Choice(["one", "all", "none"]),
    default="one",
    show_default=True,
    help="Ticks missed (no worker ran): a job for the latest, for each, or for none.",
)
@click.option("--priority", metavar="P", help="low, normal, medium, high, critical or a number.")
@click.option("--attempts", type=click.IntRange(1), metavar="N", help="Attempts of each job.")
@click.option(
    "--unique",
    metavar="KEY",
    help="No new job while the last one holding the unique KEY has not ended.",
)
@main.redis_options
def add(
    key: str,
    job_type: str,
    every: str | None,
    cron: str | None,
    tz: str | None,
    data: str | None,
    offset: int | None,
    limit: int | None,
    catch_up: str,
    priority: str | None,
    attempts: int | None,
    unique: str | None,
    redis_url: str | None,
    prefix: str,
) -> None:
    """Make a TYPE job every MS ms (--every) or by a cron expression (--cron) under KEY. An
    unchanged definition keeps its timetable; a changed one starts again from now."""
    if (every is None) == (cron is None):
        raise BadUsage("give one of --every MS and --cron EXPR")
    if tz is not None and cron is None:
        raise BadUsage("--tz goes with --cron")
    if offset is not None and every is None:
        raise BadUsage("--offset goes with --every")
    try:
        payload = None if data is None else json.loads(data)
    except ValueError as e:
        raise BadUsage(f"--data is not JSON: {e}") from None
    options: dict[str, Any] = {"limit": limit, "catch_up": catch_up}
    if priority is not None:
        options["priority"] = _priority(priority)
    if attempts is not None:
        options["attempts"] = attempts
    if unique is not None:
        options["unique"] = unique
    with _queue(redis_url, prefix) as queue:
        if every is not None:
            try:
                interval = age_ms(every)
            except BadUsage as e:
                raise BadUsage(f"--every: {e.message}") from None
            found = queue.every(key, interval, job_type, payload, offset=offset, **options)
        else:
            found = queue.cron(key, str(cron), job_type, payload, tz=tz or "UTC", **options)
    for line in _describe(found):
        click.echo(line)


@schedule.command("remove", short_help="Delete a schedule (the jobs it made stay).")
@click.argument("key", metavar="KEY")
@main.redis_options
def remove_(key: str, redis_url: str | None, prefix: str) -> None:
    """Delete schedule KEY; the jobs it made stay."""
    with _queue(redis_url, prefix) as queue:
        queue.remove_schedule(key)
    click.echo(f"removed schedule {key}")


@schedule.command(short_help="Make one job of a schedule now.")
@click.argument("key", metavar="KEY")
@main.redis_options
def trigger(key: str, redis_url: str | None, prefix: str) -> None:
    """Make one job of schedule KEY now (even paused or ended); its timetable is unchanged.
    Prints the job's id."""
    with _queue(redis_url, prefix) as queue:
        job = queue.trigger(key)
    if job.deduplicated:
        click.echo(f"job {job.id} holds the unique key of schedule {key}: no new job")
    else:
        click.echo(f"made job {job.id} ({job.type}) for schedule {key}")


@schedule.command(short_help="Make no more jobs until resumed.")
@click.argument("key", metavar="KEY")
@main.redis_options
def pause(key: str, redis_url: str | None, prefix: str) -> None:
    """Pause schedule KEY: it makes no jobs until resumed; its definition and runs stay."""
    with _queue(redis_url, prefix) as queue:
        queue.pause_schedule(key)
    click.echo(f"paused schedule {key}")


@schedule.command(short_help="Make jobs again, from the next tick after now.")
@click.argument("key", metavar="KEY")
@main.redis_options
def resume(key: str, redis_url: str | None, prefix: str) -> None:
    """Resume schedule KEY from its next tick after now (the ticks while paused are skipped)."""
    with _queue(redis_url, prefix) as queue:
        found = queue.resume_schedule(key)
    click.echo(f"resumed schedule {key}: {_state(found)}, next {_when(found['next'])}")
