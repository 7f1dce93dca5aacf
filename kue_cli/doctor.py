"""``kue doctor [--repair] [--json] [--stuck-after SECONDS]``: where the indexes disagree with
the job hashes (see :mod:`kue_core.doctor`), and the fixes.

Exit codes: 0 healthy (with ``--repair``: every problem repaired, or gone by itself since the
check); 1 problems found and not repaired (with ``--repair``: some need a person); 2 bad usage;
3 Redis unreachable or lost during the run.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import click
import redis

from kue_core import Queue, defaults, doctor
from kue_core.doctor import Finding, Outcome, Report, plural

from .errors import EXIT_FAILED, Unavailable

SHORT_HELP = "Find (and --repair) where the indexes disagree with the jobs."

HELP = """Check that Redis's indexes agree with the job hashes: every member of the job and
state sets has its job, every job is in the sets of its state and type (and no others) with
the right score, each type has a wake-up token per inactive job, no job is stuck active
without a live worker, no blocked job waits for nothing, and the leases, logs, dependencies,
worker list and id counter match the jobs.

Read-only and safe beside running workers. With --repair, fix what it found: each fix is
one atomic step that first checks the problem is still there, so jobs that moved on since
are left as they are. A job hash with a type or data is never deleted.
"""

EPILOG = """\b
Exit codes:
  0  healthy; with --repair, every problem repaired (or gone by itself)
  1  problems found and not repaired; with --repair, some need a person
  2  bad usage
  3  Redis cannot be reached, or stopped answering during the run
"""

#: What a line says after the finding, per outcome of its repair.
_DONE = {
    "repaired": "repaired: {}",
    "unchanged": "nothing left to do (the job changed since the check, or an earlier fix did it)",
    "manual": "by hand: {}",
}


def options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``--repair``, ``--json`` and ``--stuck-after``."""
    fn = click.option(
        "--stuck-after",
        default=defaults.DOCTOR_STUCK_AFTER_MS // 1000,
        show_default=True,
        type=click.IntRange(0),
        metavar="SECONDS",
        help="An active job with no lease (a Kue Node worker's) counts as stuck when it was "
        "not updated (started, or a progress report) for this long, and longer than its ttl.",
    )(fn)
    fn = click.option("--json", "as_json", is_flag=True, help="Print JSON instead of lines.")(fn)
    return click.option("--repair", is_flag=True, help="Fix the problems found.")(fn)


def run(queue: Queue, repair: bool, as_json: bool, stuck_after: int) -> int:
    """Check (and repair) ``queue``; print the report; the exit code."""
    try:
        report = doctor.check(queue, stuck_after_ms=stuck_after * 1000)
        outcomes = doctor.repair(queue, report.findings) if repair else None
    except (redis.RedisError, OSError) as e:
        raise Unavailable(f"Redis stopped answering: {e}") from None
    if as_json:
        click.echo(json.dumps(_json(report, outcomes), indent=2))
    else:
        for line in _lines(report, outcomes):
            click.echo(line)
    if outcomes is None:
        return 0 if report.healthy else EXIT_FAILED
    return EXIT_FAILED if any(o.status == "manual" for o in outcomes) else 0


def _checked(report: Report) -> str:
    return (
        f"{plural(report.jobs, 'job')}, {plural(report.sets, 'index set')} "
        f"({plural(report.members, 'member')}), {plural(report.types, 'job type')}"
    )


def _line(finding: Finding, status: str | None) -> str:
    if status is None:
        verb = "repair: {}" if finding.repairable else "by hand: {}"
    else:
        verb = _DONE[status]
    return f"{finding.kind}: {finding.problem}; {verb.format(finding.repair)}"


def _lines(report: Report, outcomes: list[Outcome] | None) -> list[str]:
    if report.healthy:
        return [f"healthy: checked {_checked(report)}"]
    if outcomes is None:
        lines = [_line(f, None) for f in report.findings]
        kinds = ", ".join(f"{n} {kind}" for kind, n in sorted(report.counts().items()))
        manual = sum(not f.repairable for f in report.findings)
        summary = f"{plural(len(report.findings), 'problem')} ({kinds}) in {_checked(report)}"
        if manual:
            summary += f"; {manual} need a person"
        if manual < len(report.findings):
            summary += f"; kue doctor --repair fixes {'the others' if manual else 'them'}"
        return [*lines, summary]
    lines = [_line(o.finding, o.status) for o in outcomes]
    count = {s: sum(o.status == s for o in outcomes) for s in ("repaired", "unchanged", "manual")}
    summary = (
        f"repaired {count['repaired']} of {plural(len(outcomes), 'problem')}; "
        f"{count['unchanged']} with nothing left to do; {count['manual']} need a person"
    )
    return [*lines, summary + "; run kue doctor again to confirm"]


def _json(report: Report, outcomes: list[Outcome] | None) -> dict[str, Any]:
    out: dict[str, Any] = {
        "healthy": report.healthy,
        "checked": {
            "jobs": report.jobs,
            "sets": report.sets,
            "members": report.members,
            "types": report.types,
        },
        "problems": report.counts(),
        "findings": [f.to_dict() for f in report.findings],
    }
    if outcomes is not None:
        for item, outcome in zip(out["findings"], outcomes, strict=True):
            item["outcome"] = outcome.status
        out["repair"] = {
            s: sum(o.status == s for o in outcomes) for s in ("repaired", "unchanged", "manual")
        }
    return out
