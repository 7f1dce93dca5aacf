"""``kue audit``: the audit log (``kue_core.features.audit``), newest first: when, the action,
the request, who, from where and how many jobs; filtered by action and by who."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import click

from . import cli as main
from .control import _queue


@main.cli.command(short_help="The changes made through the API and the dashboard.")
@click.option("-n", "--count", default=50, show_default=True, type=click.IntRange(1, 1000))
@click.option("--action", help="Of this action only (create, remove, retry_all, bulk_retry...).")
@click.option("--who", help="By this user, or from this address.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of lines.")
@main.redis_options
def audit(
    count: int,
    action: str | None,
    who: str | None,
    as_json: bool,
    redis_url: str | None,
    prefix: str,
) -> None:
    """The latest changes made through the HTTP API and the dashboard, newest first: when,
    what, the request, who, from where, and how many jobs they touched."""
    with _queue(redis_url, prefix, reads_only=True) as queue:
        entries = queue.audit(count=count, action=action, who=who)
    if as_json:
        click.echo(json.dumps(entries, indent=2))
        return
    if not entries:
        click.echo("no change recorded")
        return
    for e in entries:
        when = datetime.fromtimestamp(e["at"] / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S")
        jobs = "" if e["jobs"] is None else f"  {e['jobs']} job{'' if e['jobs'] == 1 else 's'}"
        by = e["who"] or "-"
        click.echo(
            f"{when}  {e['action']:<14} {e['method']} {e['path']}  by {by} from {e['from']}{jobs}"
        )
        if e.get("detail"):
            click.echo(f"{'':21}{e['detail']}")
