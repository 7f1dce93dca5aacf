"""A job's log lines, stamped with when they were written and the attempt they belong to.

Kue keeps a job's log as a Redis list of plain strings (``<prefix>:job:<id>:log``); it has no
room for a time or an attempt. A line written by ``job.log()`` is stored with both in front of
it, ``[2026-11-29T05:39:41.123Z attempt 2] sending to ada``, so Node Kue's dashboard and
``Job.log`` show them, readable. ``get_log`` (both clients, and ``GET /api/job/<id>/log``)
answers the lines as the handler wrote them, as Kue does; :func:`parse` gives the dashboard
the time (on the clock of the process that wrote the line) and the attempt as well. A line
without the stamp (written by Node Kue, or by an earlier kue) parses with neither.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime

_STAMP = re.compile(r"\[(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z)(?: attempt ([1-9]\d{0,8}))?\] ")


@dataclass(frozen=True)
class LogLine:
    """One line of a job's log: its text as written, when (ms since the epoch) and in which
    attempt (1 for the first) when the line says."""

    text: str
    at: int | None = None
    attempt: int | None = None


def stamp(line: str, at_ms: int, attempt: int | None) -> str:
    """``line`` as stored: its time (UTC, ISO 8601, ms) and attempt (None: not in one) first."""
    when = datetime.fromtimestamp(at_ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")
    where = f" attempt {attempt}" if attempt else ""
    return f"[{when[:-3]}Z{where}] {line}"


def parse(stored: str) -> LogLine:
    """A stored line's text, time and attempt (the last two None for a line not stamped)."""
    m = _STAMP.match(stored)
    if m is None:
        return LogLine(stored)
    at = datetime.strptime(m[1], "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)
    return LogLine(stored[m.end() :], round(at.timestamp() * 1000), int(m[2]) if m[2] else None)


def text(stored: str) -> str:
    """A stored line as its handler wrote it (without its stamp)."""
    return parse(stored).text
