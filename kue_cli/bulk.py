"""``kue bulk ACTION``: retry, remove, promote or cancel every job a filter matches (a state;
a type, a tag, words, a least age), as ``POST /api/jobs/bulk`` and the lists' bulk form do
(``kue_core.features.bulk``). It says how many match and asks first (``--yes`` does not ask;
``--count`` only counts), then acts on that many (when the filter matches another number by
then, it does nothing, says so and asks again with the new count; ``--expect N`` is a count a
script confirmed), in batches, showing its progress; Ctrl-C stops it after its batch, what it
did staying done."""

from __future__ import annotations

import json
import threading
import uuid
from typing import Any

import click

from kue_core import BULK_ACTIONS, STATES, BulkCountChanged, BulkNotFound, Queue

from . import cli as main
from .control import _queue
from .errors import Refused
from .records_text import age_ms


@main.cli.command(short_help="Retry, remove, promote or cancel every job a filter matches.")
@click.argument("action", type=click.Choice(list(BULK_ACTIONS)))
@click.option(
    "-s", "--state", required=True, type=click.Choice(list(STATES)), help="Of this state."
)
@click.option("-t", "--type", "job_type", help="Of this type.")
@click.option("--tag", help="With this tag.")
@click.option("--words", help="Found by every one of these whole words.")
@click.option("--min-age", metavar="AGE", help="Created at least this long ago: 90m, 12h, 7d.")
@click.option("--reason", default="", help="For cancel: the jobs' error is 'cancelled: REASON'.")
@click.option("--count", "count_only", is_flag=True, help="Only say how many match.")
@click.option("-y", "--yes", is_flag=True, help="Do not ask first.")
@click.option(
    "--expect",
    type=click.IntRange(0),
    metavar="N",
    help="Do not ask: act only if the filter matches N jobs, as --count said (else exit 1).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the outcome as JSON.")
@main.redis_options
def bulk(
    action: str,
    state: str,
    job_type: str | None,
    tag: str | None,
    words: str | None,
    min_age: str | None,
    reason: str,
    count_only: bool,
    yes: bool,
    expect: int | None,
    as_json: bool,
    redis_url: str | None,
    prefix: str,
) -> None:
    """ACTION every job of --state that the other options also match, in batches."""
    given: dict[str, Any] = {"state": state}
    for name, value in (("type", job_type), ("tag", tag), ("words", words)):
        if value is not None:
            given[name] = value
    if min_age is not None:
        given["min_age_ms"] = age_ms(min_age)  # BadUsage when it is no age
    with _queue(redis_url, prefix) as queue:
        found = queue.bulk_match(given)
        if count_only:
            click.echo(json.dumps(found) if as_json else f"{found['matched']} jobs match")
            return
        if expect is not None:  # confirmed by a script: no question, and no second one
            try:
                outcome = _run(queue, action, given, reason, expect, as_json)
            except BulkCountChanged as e:
                raise Refused(str(e)) from None
        else:
            outcome = _confirmed_run(queue, action, given, reason, found, yes, as_json)
    if as_json:
        click.echo(json.dumps(outcome, indent=2))
        return
    click.echo(
        f"{action}: {outcome['done']} of {outcome['matched']} matched jobs ({outcome['state']})"
    )


def _confirmed_run(
    queue: Queue,
    action: str,
    given: dict[str, Any],
    reason: str,
    found: dict[str, Any],
    yes: bool,
    as_json: bool,
) -> dict[str, Any]:
    """Ask with the count (unless ``yes``) and act on that count; when the filter matches
    another number by the time the action starts, nothing was done: say so and ask again."""
    while True:
        if not yes and not click.confirm(f"{action} {_which(found)}?", err=True):
            raise click.exceptions.Exit(1)
        expect = None if yes else found["matched"]
        try:
            return _run(queue, action, given, reason, expect, as_json)
        except BulkCountChanged as e:
            click.echo(f"{e}", err=True)
            found = queue.bulk_match(given)


def _run(
    queue: Queue,
    action: str,
    given: dict[str, Any],
    reason: str,
    expect: int | None,
    as_json: bool,
) -> dict[str, Any]:
    """The action, in a thread, its progress shown; Ctrl-C stops it after its batch."""
    run_id = uuid.uuid4().hex
    outcome: dict[str, Any] = {}
    failed: list[Exception] = []

    def run() -> None:
        try:
            outcome.update(queue.bulk(action, given, reason=reason, run_id=run_id, expect=expect))
        except Exception as e:  # raised again below, where its exit code is chosen
            failed.append(e)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    try:
        while worker.is_alive():
            worker.join(0.5)
            if worker.is_alive() and not as_json:
                try:
                    status = queue.bulk_status(run_id)
                except BulkNotFound:  # still counting, before its first batch
                    continue
                click.echo(f"\r{status['done']} of {status['matched']} so far", err=True, nl=False)
    except KeyboardInterrupt:
        queue.stop_bulk(run_id)
        worker.join()
    if failed:
        raise failed[0]
    return outcome


def _which(found: dict[str, Any]) -> str:
    """``4 jobs (3, 5, 7, 9)``, ``1,500 jobs (12, 13, 14, 15, 16 and 1,495 more)``."""
    ids, matched = found["examples"], found["matched"]
    jobs = f"{matched:,} job{'' if matched == 1 else 's'}"
    if not ids:
        return jobs
    more = f" and {matched - len(ids):,} more" if matched > len(ids) else ""
    return f"{jobs} ({', '.join(map(str, ids))}{more})"
