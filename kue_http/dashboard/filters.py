"""The dashboard's template filters: times, spans, counts, priorities, job titles and the
like, as the pages show them."""

from __future__ import annotations

import json
import time
from typing import Any

from kue_core import Job, priority_name

from .. import redaction
from .base import CANCELLED, dashboard


@dashboard.app_template_filter("completed_at")
def completed_at(job: Any) -> int | None:
    """When a complete job's last attempt ended: its start plus its duration (a job completed
    by Kue without them: its last update)."""
    if job.started_at and job.duration is not None:
        return int(job.started_at) + int(job.duration)
    return int(job.updated_at) if job.updated_at else None


@dashboard.app_template_filter("ago")
def ago(ms: int | None) -> str:
    """``3m ago`` or ``in 2h``: a timestamp (ms) relative to now, in its largest unit."""
    if not ms:
        return ""
    delta = ms / 1000 - time.time()
    text = _span_text(abs(delta), coarse=True)
    return f"in {text}" if delta > 0.5 else f"{text} ago"


@dashboard.app_template_filter("span")
def span(ms: int | float | None) -> str:
    """A duration in milliseconds: ``850ms``, ``2.4s``, ``3m 5s``, ``2h 10m``."""
    if ms is None:
        return ""
    if ms < 1000:
        return f"{ms:.0f}ms"
    return _span_text(ms / 1000, coarse=False)


@dashboard.app_template_filter("ms")
def ms_text(ms: float | None) -> str:
    """A mean or a deviation in milliseconds: ``0.4ms``, ``12ms``, ``2.4s``, ``3m 5s``
    (``""`` for None: no job)."""
    if ms is None:
        return ""
    if ms < 10:
        return f"{ms:.1f}ms"
    return span(ms)


@dashboard.app_template_filter("short_count")
def short_count(n: int) -> str:
    """A count in at most four characters, for the navigation: ``999``, ``1.2k``, ``45k``,
    ``3.1M``, ``12G`` (the exact count goes in the element's title)."""
    if n < 1000:
        return str(n)
    for unit, size in (("k", 1e3), ("M", 1e6), ("G", 1e9)):
        value = n / size
        text = f"{value:.1f}" if value < 9.95 else f"{value:.0f}"
        if float(text) < 1000:
            return text + unit
    return f"{n / 1e12:.0f}T"


def _span_text(seconds: float, *, coarse: bool) -> str:
    if seconds < 60:
        return f"{seconds:.0f}s" if coarse or seconds >= 10 else f"{seconds:.1f}s"
    for unit, size, sub, sub_size in (("d", 86400, "h", 3600), ("h", 3600, "m", 60)):
        if seconds >= size:
            whole, rest = divmod(int(seconds), size)
            return f"{whole}{unit}" if coarse else f"{whole}{unit} {rest // sub_size}{sub}"
    whole, rest = divmod(int(seconds), 60)
    return f"{whole}m" if coarse else f"{whole}m {rest}s"


@dashboard.app_template_filter("iso")
def iso(ms: int | None) -> str:
    if not ms:
        return ""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ms / 1000))


@dashboard.app_template_filter("utc")
def utc(ms: int | None) -> str:
    """A timestamp (ms) as a date and time to the second, in UTC: ``2026-12-01 14:05:09 UTC``."""
    if not ms:
        return ""
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(ms / 1000))


@dashboard.app_template_filter("clock")
def clock(ms: int) -> str:
    """The time of day (UTC) to the millisecond: a log line's."""
    return time.strftime("%H:%M:%S", time.gmtime(ms / 1000)) + f".{ms % 1000:03d}"


@dashboard.app_template_filter("pretty")
def pretty(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False)


@dashboard.app_template_filter("compact")
def compact(value: Any) -> str:
    """A JSON value on one line (escaped by the template, as any text)."""
    return json.dumps(value, ensure_ascii=False)


@dashboard.app_template_filter("first_line")
def first_line(text: str | None) -> str:
    return (text or "").strip().split("\n", 1)[0]


@dashboard.app_template_filter("job_title")
def job_title(job: Job) -> Any:
    """The job's ``data.title`` (Kue's convention for naming a job) as the user may see it,
    or ``""``."""
    return redaction.title(job)


@dashboard.app_template_filter("shown")
def shown(job: Job) -> dict[str, Any]:
    """The job's JSON as the user may see it (kue_http/redaction.py)."""
    return redaction.job_dict(job)


@dashboard.app_template_filter("cancel_reason")
def cancel_reason(error: str | None) -> str | None:
    """The reason of a job cancelled by an operator (its error is ``cancelled: <reason>``,
    or ``cancelled`` without one), or None for any other error."""
    if error == CANCELLED:
        return ""
    if error and error.startswith(CANCELLED + ": "):
        return error[len(CANCELLED) + 2 :]
    return None


@dashboard.app_template_filter("priority")
def priority_label(value: int | None) -> str:
    if value is None:
        return "?"
    return priority_name(value) or str(value)
