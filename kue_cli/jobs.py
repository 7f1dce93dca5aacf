"""Jobs from the command line: ``kue job
show|list|stream|signal|create|retry|promote|cancel|remove`` (list in :mod:`kue_cli.job_list`,
stream in :mod:`kue_cli.job_stream`, signal in :mod:`kue_cli.job_signal`), a group on the ``cli``
group (imported by the package, so that it joins it).

The commands that change jobs take several ids and check them all before changing any: a
malformed or unknown id is bad usage (2), a job whose state does not allow the action is
refused (1), and in both cases nothing is changed. A job that changed state between that check
and its own call (a worker took it) is refused by that call alone: the others are done, and
the command exits 1 naming it. A Redis that cannot be reached is unavailable (3).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

import click

from kue_core import HasDependents, InvalidTransition, Job, KueError, Queue
from kue_core.base import checks
from kue_core.base.states import PRIORITIES, PROMOTABLE, RETRYABLE, STATES

from . import cli as main
from .control import _queue
from .errors import BadUsage, Refused
from .job_list import list_jobs
from .job_signal import signal
from .job_stream import stream
from .records_text import age_ms, age_text

#: The states each action takes a job from (None: any), as the library checks them.
_FROM: dict[str, tuple[str, ...] | None] = {
    "retry": RETRYABLE,
    "promote": PROMOTABLE,
    "cancel": tuple(s for s in STATES if s != "complete"),
    "remove": None,
}


@main.cli.group(short_help="Show, list, follow, create, retry, cancel or remove jobs.")
def job() -> None:
    """Jobs: list those of a state; by id, show them, follow one's streamed output, give one
    a signal, create one, or retry, promote, cancel or remove several at once. The commands
    that change jobs check every id first and change nothing when one is unknown (exit 2) or
    in a state that does not allow it (exit 1)."""


# -- reading --------------------------------------------------------------------------------
job.add_command(list_jobs)
job.add_command(stream)
job.add_command(signal)


@job.command(short_help="Show jobs: state, attempts, times, data, error, result.")
@click.argument("ids", nargs=-1, required=True, metavar="ID...")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON array of Kue's job objects.")
@click.option("--log", "with_log", is_flag=True, help="Add each job's log lines.")
@main.redis_options
def show(
    ids: tuple[str, ...], as_json: bool, with_log: bool, redis_url: str | None, prefix: str
) -> None:
    """Show each job ID: its type, state, priority, attempts, times, worker, error, data and
    result (with --log, its log lines too). An unknown id is bad usage (exit 2)."""
    wanted = _parse(ids)
    with _queue(redis_url, prefix, reads_only=True) as queue:
        jobs = _found(queue, wanted)
        logs = {j.id: queue.get_log_lines(j.id) for j in jobs} if with_log else {}  # type: ignore[arg-type]
    if as_json:
        texts = {i: [line.text for line in lines] for i, lines in logs.items()}
        out = [{**j.to_dict(), **({"log": texts[j.id]} if with_log else {})} for j in jobs]
        click.echo(json.dumps(out, indent=2))
        return
    for n, found in enumerate(jobs):
        if n:
            click.echo()
        for line in _lines(found.to_dict()):
            click.echo(line)
        for entry in logs.get(found.id, []):
            # When and in which attempt, as the job's page shows them (a line written by
            # Node Kue has neither).
            said = [_when(entry.at), f"attempt {entry.attempt}" if entry.attempt else None]
            click.echo("  log        " + "  ".join(s for s in (*said, entry.text) if s))


def _lines(d: dict[str, Any]) -> list[str]:
    """A job as aligned ``name  value`` lines, most telling first."""
    names = {v: k for k, v in PRIORITIES.items()}
    tried = d["attempts"]
    rows: list[tuple[str, Any]] = [
        ("priority", names.get(d["priority"], d["priority"])),
        ("attempts", f"{tried['made']} of {tried['max']}"),
        ("progress", f"{d['progress']}%" if d.get("progress") else None),
        ("created", _when(d.get("created_at"))),
        ("due", _when(d.get("promote_at")) if d["state"] == "delayed" else None),
        ("started", _when(d.get("started_at"))),
        ("updated", _when(d.get("updated_at"))),
        ("failed", _when(d.get("failed_at"))),
        ("duration", f"{d['duration']} ms" if d.get("duration") is not None else None),
        ("worker", d.get("workerId")),
        ("tags", ", ".join(d["tags"]) if d.get("tags") else None),
        ("schedule", d.get("schedule")),
        ("error", str(d["error"]).splitlines()[0] if d.get("error") else None),
        ("data", _compact(d["data"])),
        ("result", _compact(d["result"]) if "result" in d else None),
    ]
    head = f"job {d['id']}: {d['type']}, {d['state']}"
    return [head] + [f"  {name:<10} {value}" for name, value in rows if value is not None]


def _when(ms: int | None) -> str | None:
    if not ms:
        return None
    at = datetime.fromtimestamp(ms / 1000, UTC)
    return at.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


# -- creating -------------------------------------------------------------------------------
@job.command(short_help="Create a job.")
@click.argument("job_type", metavar="TYPE")
@click.option(
    "--data",
    "data_text",
    default="{}",
    show_default=True,
    metavar="JSON",
    help="The job's data, a JSON value.",
)
@click.option(
    "--priority", metavar="P", help=f"{', '.join(PRIORITIES)}, or an integer (lower runs sooner)."
)
@click.option("--attempts", type=click.IntRange(1), metavar="N", help="Tries before it fails.")
@click.option(
    "--delay",
    metavar="AGE",
    help="Run it after this long: 250ms, 90s, 15m, 2h (a bare number is milliseconds, as "
    "every age of kue's commands).",
)
@click.option("--ttl", metavar="AGE", help="How long one attempt may run: 30s, 5m (or ms).")
@click.option("--tag", "tags", multiple=True, metavar="TAG", help="A tag (repeat for more).")
@click.option(
    "--depends-on",
    "depends",
    multiple=True,
    metavar="ID",
    help="A job it waits for (repeat for more).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the job as JSON.")
@main.redis_options
def create(
    job_type: str,
    data_text: str,
    priority: str | None,
    attempts: int | None,
    delay: str | None,
    ttl: str | None,
    tags: tuple[str, ...],
    depends: tuple[str, ...],
    as_json: bool,
    redis_url: str | None,
    prefix: str,
) -> None:
    """Create and save a job of TYPE. Bad input (data that is not JSON, an unknown priority,
    a job to depend on that does not exist) is bad usage (exit 2) and saves nothing."""
    try:
        data = json.loads(data_text)
    except ValueError as e:
        raise BadUsage(f"--data is not valid JSON: {e}") from None
    with _queue(redis_url, prefix) as queue:
        new = queue.create_job(job_type, data)
        if priority is not None:
            new.priority(int(priority) if re.fullmatch(r"-?\d{1,12}", priority) else priority)
        if attempts is not None:
            new.attempts(attempts)
        if delay is not None:
            new.delay(age_ms(delay))
        if ttl is not None:
            new.ttl(age_ms(ttl))
        if tags:
            new.tag(*tags)
        if depends:
            new.depends_on(*_parse(depends))
        new.save()
    if as_json:
        click.echo(json.dumps(new.to_dict(), indent=2))
    else:
        due = f", due in {age_text(new.delay())}" if new.state == "delayed" else ""
        click.echo(f"created job {new.id}: {new.type}, {new.state}{due}")


# -- changing -------------------------------------------------------------------------------
def _changing(name: str, short: str) -> Callable[[Callable[..., None]], click.Command]:
    """The arguments and options every command that changes jobs takes."""

    def decorate(fn: Callable[..., None]) -> click.Command:
        fn = main.redis_options(fn)
        fn = click.option("--json", "as_json", is_flag=True, help="Print JSON.")(fn)
        fn = click.argument("ids", nargs=-1, required=True, metavar="ID...")(fn)
        return job.command(name, short_help=short)(fn)

    return decorate


@_changing("retry", "Run failed or complete jobs again.")
def retry(ids: tuple[str, ...], as_json: bool, redis_url: str | None, prefix: str) -> None:
    """Run each failed or complete job ID again: it waits now, with its attempts anew."""
    _change(ids, as_json, redis_url, prefix, "retry", lambda q, i: q.retry(i))


@_changing("promote", "Run delayed jobs now.")
def promote(ids: tuple[str, ...], as_json: bool, redis_url: str | None, prefix: str) -> None:
    """Make each delayed job ID wait now instead of at its due time."""
    _change(ids, as_json, redis_url, prefix, "promote", lambda q, i: q.promote(i))


@_changing("cancel", "Cancel jobs, wherever they run.")
@click.option("--reason", default="", help="Why; each job's error becomes 'cancelled: REASON'.")
def cancel(
    ids: tuple[str, ...], reason: str, as_json: bool, redis_url: str | None, prefix: str
) -> None:
    """Cancel each job ID, in any state but complete: it fails at once and is not retried;
    a running one is stopped in its worker process."""
    _change(ids, as_json, redis_url, prefix, "cancel", lambda q, i: q.cancel(i, reason))


@_changing("remove", "Remove jobs (with --cascade, the jobs waiting for them too).")
@click.option(
    "--cascade",
    is_flag=True,
    help="Remove the jobs blocked waiting for them too, and those waiting for those in turn.",
)
def remove(
    ids: tuple[str, ...], cascade: bool, as_json: bool, redis_url: str | None, prefix: str
) -> None:
    """Remove each job ID: its hash, log, history and index entries. A job that others are
    blocked waiting for is kept and named (exit 1) unless --cascade."""
    _change(ids, as_json, redis_url, prefix, "remove", lambda q, i: q.remove(i, cascade=cascade))


def _change(
    ids: tuple[str, ...],
    as_json: bool,
    redis_url: str | None,
    prefix: str,
    action: str,
    call: Callable[[Queue, int], Any],
) -> None:
    """Do ``call`` to the job of each id, once all are known to exist and to be in a state
    that allows ``action``; then report what was done, and refuse what was not."""
    wanted, allowed = _parse(ids), _FROM[action]
    done: list[Any] = []
    refused: list[str] = []
    with _queue(redis_url, prefix) as queue:
        jobs = _found(queue, wanted)
        wrong = [j for j in jobs if allowed is not None and j.state not in allowed]
        if wrong:
            named = "; ".join(f"job {j.id} is {j.state}" for j in wrong)
            raise Refused(
                f"{action} takes {' or '.join(allowed or ())} jobs: {named}; nothing was changed"
            )
        for jid in wanted:
            try:
                done.append(call(queue, jid))
            except HasDependents as e:
                refused.append(f"{e} (--cascade removes them too)")
            except InvalidTransition as e:  # it changed state since the check
                refused.append(str(e))
    _report(action, done, as_json)
    if refused:
        raise Refused("; ".join(refused))


_DONE = {"retry": "retried", "promote": "promoted", "cancel": "cancelled"}


def _report(action: str, done: list[Any], as_json: bool) -> None:
    if action == "remove":
        removed = [i for ids in done for i in ids]
        if as_json:
            click.echo(json.dumps({"removed": removed}))
        elif removed:
            click.echo(f"removed job{'s' if len(removed) > 1 else ''} {_ids(removed)}")
        return
    if as_json:
        click.echo(json.dumps([j.to_dict() for j in done], indent=2))
        return
    for changed in done:
        click.echo(f"{_DONE[action]} job {changed.id}: {changed.type}, now {changed.state}")


def _ids(ids: Sequence[int]) -> str:
    return ", ".join(str(i) for i in ids)


def _parse(ids: Sequence[str]) -> list[int]:
    """The ids, checked, each once, in the order given."""
    try:
        parsed = [checks.job_id(i) for i in ids]
    except KueError as e:
        raise BadUsage(str(e)) from None
    return list(dict.fromkeys(parsed))


def _found(queue: Queue, ids: list[int]) -> list[Job]:
    """The jobs of ``ids``, in that order; bad usage naming those that do not exist."""
    jobs = queue.get_jobs(ids)
    missing = sorted(set(ids) - {j.id for j in jobs})
    if missing:
        raise BadUsage(f"no job {_ids(missing)}; nothing was changed")
    return jobs
