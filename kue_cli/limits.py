"""Flow control from the command line: ``kue limits`` lists the types' limits and whether
they hold a type back now, ``kue limit TYPE`` sets (or ``--remove``\\ s) them, and
``kue groups TYPE`` lists a type's groups in their turn; on the ``cli`` group (imported by
the package, so that they join it). See :mod:`kue_core.features.limits`.

Exit codes as for every command: bad input (a rate that does not parse, a cap below 1) is bad
usage (2), and nothing is written; a Redis that cannot be reached is unavailable (3).
"""

from __future__ import annotations

import json
import re
from typing import Any

import click

from kue_core import defaults as core_defaults

from . import cli as main
from .control import _queue
from .errors import BadUsage

_COLUMNS = ("type", "rate", "concurrency", "group rate", "group concurrency", "held")
_NAMES = ("rate", "concurrency", "group_rate", "group_concurrency")
_RATE = re.compile(r"(\d+)/(\d+)(ms|s|m|h)?")
_UNIT_MS = {"h": 3_600_000, "m": 60_000, "s": 1000, "ms": 1}
#: Not given (None means: remove it).
_KEEP: Any = object()


def per_text(ms: int) -> str:
    """A window for people: ``1s``, ``5m``, ``250ms``, ``1h``."""
    for unit in ("h", "m", "s"):
        if ms % _UNIT_MS[unit] == 0:
            return f"{ms // _UNIT_MS[unit]}{unit}"
    return f"{ms}ms"


def rate_text(rate: Any) -> str:
    """``(10, 1000) -> 10/1s``; ``-`` for none."""
    return "-" if not rate else f"{rate[0]}/{per_text(int(rate[1]))}"


def _parse_rate(ctx: click.Context, param: click.Parameter, text: str | None) -> Any:
    """``MAX/PERIOD`` (period in ms, s, m or h; plain: ms) -> ``(max, per_ms)``; ``none`` ->
    None (remove it); not given -> kept."""
    if text is None:
        return _KEEP
    if text.strip().lower() == "none":
        return None
    m = _RATE.fullmatch(text.strip())
    if not m or int(m.group(1)) < 1 or int(m.group(2)) < 1:
        raise click.BadParameter(
            f"a rate is MAX/PERIOD (10/1s, 100/5m, 5/250ms; period in ms, s, m or h) or none, "
            f"got {text!r}"
        )
    return int(m.group(1)), int(m.group(2)) * _UNIT_MS[m.group(3) or "ms"]


def _parse_cap(ctx: click.Context, param: click.Parameter, text: str | None) -> Any:
    """A number of jobs >= 1, or ``none`` (remove it); not given -> kept."""
    if text is None:
        return _KEEP
    if text.strip().lower() == "none":
        return None
    if not text.strip().isascii() or not text.strip().isdigit() or int(text) < 1:
        raise click.BadParameter(f"a number of jobs is a whole number >= 1 or none, got {text!r}")
    return int(text)


def _held(status: dict[str, Any]) -> str:
    held, wait = status["held"], status["wait_ms"]
    if held is None:
        return "-"
    return f"{held} ({wait} ms)" if wait is not None else held


def _row(job_type: str, limits: dict[str, Any], status: dict[str, Any]) -> tuple[str, ...]:
    caps = [str(limits[n]) if limits[n] is not None else "-" for n in _NAMES]
    return (
        job_type,
        rate_text(limits["rate"]),
        caps[1],
        rate_text(limits["group_rate"]),
        caps[3],
        _held(status),
    )


def _table(rows: list[tuple[str, ...]], columns: tuple[str, ...]) -> None:
    rows = [columns, *rows]
    widths = [max(len(r[i]) for r in rows) for i in range(len(columns))]
    for r in rows:
        click.echo("  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip())


def _describe(job_type: str, limits: dict[str, Any]) -> str:
    """One type's limits, as ``kue limit`` prints them."""
    parts = [
        f"rate {rate_text(limits['rate'])}",
        f"concurrency {limits['concurrency'] or '-'}",
        f"group rate {rate_text(limits['group_rate'])}",
        f"group concurrency {limits['group_concurrency'] or '-'}",
    ]
    if limits.get("held_until"):
        parts.append(f"held back until {limits['held_until']} (ms, by RateLimited)")
    return f"limits of {job_type}: {', '.join(parts)}"


@main.cli.command(short_help="List the job types' limits, and what holds them back now.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@main.redis_options
def limits(as_json: bool, redis_url: str | None, prefix: str) -> None:
    """Every job type with a limit: its rate (MAX/PERIOD: at most MAX jobs start in any
    PERIOD), its concurrency (jobs active at once), the same per group, and whether a limit
    holds its waiting jobs back now (paused, remote: a handler raised RateLimited,
    concurrency, rate) and for how long."""
    with _queue(redis_url, prefix, reads_only=True) as queue:
        found = queue.limits()
        status = {t: queue.limit_status(t) for t in found}
    if as_json:
        report = {
            t: {**limits, "held": status[t]["held"], "wait_ms": status[t]["wait_ms"]}
            for t, limits in found.items()
        }
        click.echo(json.dumps(report, indent=2))
        return
    if not found:
        click.echo("no limits")
        return
    _table([_row(t, limits, status[t]) for t, limits in found.items()], _COLUMNS)


@main.cli.command(short_help="Set (or --remove) the limits of a job type.")
@click.argument("job_type", metavar="TYPE")
@click.option(
    "--rate",
    callback=_parse_rate,
    metavar="MAX/PERIOD",
    help="At most MAX jobs start in any PERIOD (10/1s, 100/5m, 5/250ms), across every "
    "worker; none removes it.",
)
@click.option(
    "--concurrency",
    callback=_parse_cap,
    metavar="N",
    help="At most N jobs active at once, across every worker; none removes it.",
)
@click.option("--group-rate", callback=_parse_rate, metavar="MAX/PERIOD", help="--rate, per group.")
@click.option(
    "--group-concurrency", callback=_parse_cap, metavar="N", help="--concurrency, per group."
)
@click.option("--remove", is_flag=True, help="Remove every limit of TYPE (and a RateLimited hold).")
@main.redis_options
def limit(
    job_type: str,
    rate: Any,
    concurrency: Any,
    group_rate: Any,
    group_concurrency: Any,
    remove: bool,
    redis_url: str | None,
    prefix: str,
) -> None:
    """Set the limits of TYPE that are given (the others are kept), enforced in Redis across
    every worker process, and print them."""
    given = {
        n: v
        for n, v in zip(_NAMES, (rate, concurrency, group_rate, group_concurrency), strict=True)
        if v is not _KEEP
    }
    if remove and given:
        raise BadUsage("--remove goes alone (it removes every limit)")
    if not remove and not given:
        raise BadUsage(
            "give --rate, --concurrency, --group-rate or --group-concurrency (or --remove)"
        )
    with _queue(redis_url, prefix) as queue:
        if remove:
            queue.remove_limits(job_type)
            click.echo(f"removed the limits of {job_type}")
            return
        limits = queue.limit(job_type, **given)
    click.echo(_describe(job_type, limits))


@main.cli.command(short_help="List a job type's groups, in their turn.")
@click.argument("job_type", metavar="TYPE")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@click.option(
    "--from", "start", type=click.IntRange(0), default=0, show_default=True, metavar="N",
    help="Skip the first N groups.",
)  # fmt: skip
@click.option(
    "--count",
    type=click.IntRange(1, core_defaults.MAX_GROUPS_PAGE),
    default=50,
    show_default=True,
    metavar="N",
    help="Show N groups.",
)
@main.redis_options
def groups(
    job_type: str, as_json: bool, start: int, count: int, redis_url: str | None, prefix: str
) -> None:
    """The groups of TYPE with jobs waiting or running: those waiting in their turn (the next
    served first), then those with running jobs only; with their jobs waiting and active."""
    with _queue(redis_url, prefix, reads_only=True) as queue:
        found = queue.groups(job_type, start, count)
    if as_json:
        click.echo(json.dumps(found, indent=2))
        return
    total, rows = found["total"], found["groups"]
    if not rows:
        more = f" from {start + 1} (there are {total})" if total else " waiting or running"
        click.echo(f"no groups of {job_type}{more}")
        return
    _table(
        [(g["group"], str(g["waiting"]), str(g["active"])) for g in rows],
        ("group", "waiting", "active"),
    )
    click.echo(f"groups {start + 1} to {start + len(rows)} of {total}")
