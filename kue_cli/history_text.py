"""``kue stats --history``: the statistics' history over a range, as text: the whole range's
figures per type (or of one type, point by point), and the deploys in it."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import click
import redis

from kue_core import Queue

from .errors import Unavailable

#: Points of one type's table at most (the latest): a 24 h range has 1,440.
POINTS_SHOWN = 60


def print_report(queue: Queue, job_type: str | None, span: str, as_json: bool) -> None:
    """Print the report (as JSON or as :func:`lines`), then close ``queue``."""
    try:
        found = report(queue, job_type, span)
    except (redis.RedisError, OSError) as e:
        raise Unavailable(f"Redis stopped answering: {e}") from None
    finally:
        queue.close()
    click.echo(json.dumps(found, indent=2) if as_json else "\n".join(lines(found)))


def report(queue: Queue, job_type: str | None, span: str) -> dict[str, Any]:
    """The history of all types (with each type's) or of one type."""
    found = queue.stats_history(job_type, span)
    if job_type is None:
        found["types"] = {t: queue.stats_history(t, span)["total"] for t in queue.types()}
    return found


def _ms(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:g}ms" if value < 1000 else f"{value / 1000:.3g}s"


def _backlog(value: int | None) -> str:
    return "-" if value is None else str(value)


_HEAD = ("complete", "failed", "waiting", "wait p95", "run p50", "run p95", "run p99")


def _row(name: str, f: dict[str, Any], width: int) -> str:
    cells = (
        f["complete"], f["failed"], _backlog(f["waiting"]), _ms(f["wait"]["p95_ms"]),
        _ms(f["run"]["p50_ms"]), _ms(f["run"]["p95_ms"]), _ms(f["run"]["p99_ms"]),
    )  # fmt: skip
    return name.ljust(width) + "".join(f"{c:>10}" for c in cells)


def _when(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M")


def lines(found: dict[str, Any]) -> list[str]:
    """The report as lines: a row per type and the total (all types), or a row per point
    (one type, the latest ``POINTS_SHOWN``); then the deploys. Waiting is the most waiting."""
    span = found["range"]
    if found["type"] is None:
        rows = [*found["types"].items(), ("total", found["total"])]
        title = f"history, last {span}, every type (waiting: the most at once):"
    else:
        points = [p for p in found["points"] if p["complete"] or p["failed"] or p["waiting"]]
        rows = [(_when(p["at"]), p) for p in points[-POINTS_SHOWN:]]
        rows.append(("total", found["total"]))
        title = f"history of {found['type']}, last {span} (points with anything in them):"
    width = max(len(name) for name, _ in rows)
    out = [title, "".ljust(width) + "".join(f"{h:>10}" for h in _HEAD)]
    out += [_row(name, f, width) for name, f in rows]
    deploys = found["deploys"]
    out.append(f"deploys: {len(deploys)}" if deploys else "deploys: none in this range")
    for d in deploys:
        was = f" (was {', '.join(d['was'])})" if d["was"] else ""
        out.append(f"  {_when(d['at'])}  {', '.join(d['versions'])}{was}")
    return out
