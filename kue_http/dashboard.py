"""The dashboard: server-rendered pages over ``kue_core.Queue``.

Every page is complete HTML (escaped by Jinja), so it works without script and is quick to
first paint. ``static/kue.js`` makes it live: it listens to the event stream and, when
something happens, fetches the page again and swaps in the parts marked ``data-live``, at
most about once a second however many events arrive. Actions are ``fetch`` calls to the JSON
API, which checks them (read-only mode, CSRF) as it checks any client: retry, remove,
priority, pause, and job control (cancel, move, edit a job's data, stop a worker process).
A job's dependencies and dependents are shown by ``dashboard_flows``.
"""

from __future__ import annotations

import json
import math
import re
import time
from pathlib import Path
from typing import Any

from flask import Blueprint, abort, current_app, render_template, request, url_for

from kue_core import (
    PRIORITIES,
    STATES,
    Job,
    defaults,
    priority_name,
    validate_type,
)

from .api import queue
from .dashboard_flows import job_dependencies


def _assets(name: str) -> str:
    """``templates/`` or ``static/``: inside the package when installed from a wheel, at the
    top of the source tree when run from a checkout."""
    here = Path(__file__).resolve().parent
    for folder in (here / name, here.parent / name):
        if folder.is_dir():
            return str(folder)
    raise RuntimeError(f"the dashboard's {name}/ folder is missing from the installation")


dashboard = Blueprint(
    "kue_dashboard",
    __name__,
    template_folder=_assets("templates"),
    static_folder=_assets("static"),
    static_url_path="/static",
)

#: What the dashboard calls each state (Kue's names in the URLs and in Redis).
LABELS = {
    "inactive": "Queued",
    "active": "Active",
    "failed": "Failed",
    "complete": "Complete",
    "delayed": "Delayed",
    "blocked": "Blocked",
    "pinned": "Pinned",
}
PAGE_SIZES = (25, 50, 100)
#: Chart windows offered on the overview, in minutes; each chart has at most _BARS bars.
CHART_WINDOWS = (60, 360, 1440)
_BARS = 60
#: Active jobs read to show what each worker runs.
_RUNNING_SHOWN = 500
#: The error of a cancelled job, before ``: <reason>``.
CANCELLED = "cancelled"
#: The states whose jobs can be cancelled and whose data can be edited from the dashboard.
CANCELLABLE = ("inactive", "delayed", "active", "blocked", "pinned")
EDITABLE = ("inactive", "delayed", "failed", "blocked", "pinned")
#: Bulk actions per state besides "Remove all": (label, method, API endpoint). Blocked jobs
#: have none: they move on by themselves when their dependencies complete.
BULK = {
    "failed": [("Retry all", "POST", "kue_api.retry_all")],
    "delayed": [("Promote all", "POST", "kue_api.promote_all")],
}
#: The orders of a list (``?order=``: its label), the first the default. Finished jobs are
#: shown newest first, by when they finished; the others as workers take them.
_PRIORITY_ORDERS = {"asc": "Priority, then oldest first", "desc": "Lowest priority, newest first"}
_FINISHED_ORDERS = {"newest": "Newest first", "oldest": "Oldest first", **_PRIORITY_ORDERS}
ORDERS = {
    "default": _PRIORITY_ORDERS,
    "delayed": {"asc": "Soonest due first", "desc": "Latest due first"},
    "complete": _FINISHED_ORDERS,
    "failed": _FINISHED_ORDERS,
}


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
    """The job's ``data.title`` (Kue's convention for naming a job), or ``""``."""
    return job.data.get("title", "") if isinstance(job.data, dict) else ""


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


@dashboard.app_context_processor
def _context() -> dict[str, Any]:
    return {
        "readonly": current_app.config["KUE_READONLY"],
        "labels": LABELS,
        "states": STATES,
        "priorities": PRIORITIES,
        "cancellable": CANCELLABLE,
        "editable": EDITABLE,
    }


def _page(template: str, events: str, **context: Any) -> str:
    """A page, with the counts of every state for its header; ``events`` is the event stream
    whose events make it refresh."""
    return render_template(template, nav_counts=queue().counts(), events_url=events, **context)


# -- pages ---------------------------------------------------------------------------------
@dashboard.get("/")
def overview() -> str:
    from . import dashboard_records  # it builds on this module

    q = queue()
    minutes = _choice("minutes", CHART_WINDOWS)
    by_type = q.counts_by_type()
    paused = q.paused()
    workers = q.workers()
    # From the active jobs themselves: a worker's own list is only as fresh as its heartbeat.
    running: dict[str, list[Job]] = {}
    for j in q.page("active", count=_RUNNING_SHOWN):
        for holder in j.running_on() if j.fan_out() else [j.worker_id or ""]:
            running.setdefault(holder, []).append(j)
    pinned = q.pinned_waits(_RUNNING_SHOWN)  # worker id -> jobs pinned to it, waiting
    live = {w["id"] for w in workers}
    return _page(
        "overview.html",
        url_for("kue_api.events"),
        by_type=by_type,
        paused=paused,
        workers=workers,
        running=running,
        pinned=pinned,
        pinned_elsewhere={w: ids for w, ids in sorted(pinned.items()) if w not in live},
        stop_timeout=defaults.SHUTDOWN_TIMEOUT,
        chart=_chart(q.throughput(minutes)),
        minutes=minutes,
        windows=CHART_WINDOWS,
        durations=_durations(q.totals()["durations"]),
        timings=_timings(q.timings()),
        **dashboard_records.overview_context(),
    )


@dashboard.get("/jobs/<state>")
def jobs(state: str) -> str:
    if state not in STATES:
        abort(404)
    q = queue()
    job_type = request.args.get("type") or None
    if job_type is not None:
        validate_type(job_type)
    size = _choice("size", PAGE_SIZES)
    orders = ORDERS.get(state, ORDERS["default"])
    order = request.args.get("order")
    order = order if order in orders else next(iter(orders))
    total = q.count(state, job_type)
    pages = max(1, math.ceil(total / size))
    page = min(max(_int_arg("page", 1), 1), pages)
    by = "finished" if order in ("newest", "oldest") else "queue"
    desc = order in ("newest", "desc")
    offset = (page - 1) * size
    found = q.page(state, job_type, offset=offset, count=size, desc=desc, by=by)
    args = {"type": job_type, "size": size, "order": order}
    return _page(
        "jobs.html",
        url_for("kue_api.events", type=job_type),
        state=state,
        job_type=job_type,
        types=q.types(),
        jobs=found,
        total=total,
        page=page,
        pages=pages,
        size=size,
        sizes=PAGE_SIZES,
        order=order,
        orders=orders,
        args=args,
        bulk=BULK.get(state, []),
    )


@dashboard.get("/job/<job_id>")
def job(job_id: str) -> str:
    if not re.fullmatch(r"[1-9]\d{0,17}", job_id):
        abort(404)
    q = queue()
    found = q.get_job(job_id)  # JobNotFound: the 404 page
    history = q.history(job_id)
    deps = job_dependencies(q, found)
    # A job linked to others refreshes on their events too (kue.js keeps those it lists).
    events = url_for("kue_api.events") if deps.any else url_for("kue_api.events", id=job_id)
    return _page(
        "job.html",
        events,
        job=found,
        deps=deps,
        info=found.to_dict(),
        types=[t for t in q.types() if t != found.type],
        history=history,
        attempt_errors=[h for h in history if h.get("error")],
        log=q.get_log(job_id),
        trace_url=_trace_url(found.trace_id),
    )


def _trace_url(trace_id: str | None) -> str | None:
    """Where ``KUE_TRACE_URL`` shows the trace (its id is 32 hex digits: safe in a URL)."""
    template = current_app.config.get("KUE_TRACE_URL")
    if trace_id is None or not template:
        return None
    return str(template).replace("{trace_id}", trace_id)


# -- helpers -------------------------------------------------------------------------------
def _int_arg(name: str, default: int) -> int:
    text = request.args.get(name, "")
    return int(text) if re.fullmatch(r"\d{1,9}", text) else default


def _choice(name: str, allowed: tuple[int, ...]) -> int:
    """An integer query argument from ``allowed`` (the first one otherwise)."""
    value = _int_arg(name, allowed[0])
    return value if value in allowed else allowed[0]


def _chart(points: list[dict[str, int]]) -> dict[str, Any]:
    """Per-minute counts folded into at most ``_BARS`` bars, laid out in a 0..100 SVG box."""
    per_bar = max(1, math.ceil(len(points) / _BARS))
    bars: list[dict[str, Any]] = []
    for i in range(0, len(points), per_bar):
        chunk = points[i : i + per_bar]
        bars.append(
            {
                "at": chunk[0]["at"],
                "complete": sum(p["complete"] for p in chunk),
                "failed": sum(p["failed"] for p in chunk),
            }
        )
    return {
        "bars": bars,
        "top": _layout(bars, ("complete", "failed")),
        "minutes_per_bar": per_bar,
        "complete": sum(b["complete"] for b in bars),
        "failed": sum(b["failed"] for b in bars),
    }


def _durations(buckets: list[tuple[int | None, int]]) -> dict[str, Any]:
    """The duration histogram as columns, each labelled with its upper bound."""
    bars: list[dict[str, Any]] = [
        {"label": f"≤ {_bound(b)}" if b else "longer", "complete": n} for b, n in buckets
    ]
    top = _layout(bars, ("complete",))
    return {"bars": bars, "top": top, "total": sum(n for _, n in buckets)}


def _timings(found: dict[str, Any]) -> dict[str, Any]:
    """``Queue.timings()`` of a day as rows: per type with a job that day, wait and run each
    with its count, mean, standard deviation and histogram columns."""
    rows = []
    for job_type, figures in found["types"].items():
        if not (figures["wait"]["count"] or figures["run"]["count"]):
            continue
        row: dict[str, Any] = {"type": job_type}
        for kind in ("wait", "run"):
            summary = figures[kind]
            bars: list[dict[str, Any]] = [
                {"label": f"≤ {_bound(b)}" if b else "longer", "n": n}
                for b, n in summary["buckets"]
            ]
            _layout(bars, ("n",))
            row[kind] = {**summary, "bars": bars}
        rows.append(row)
    return {"day": found["day"], "rows": rows, "days": defaults.TIMINGS_DAYS}


def _bound(ms: int) -> str:
    if ms < 1000:
        return f"{ms}ms"
    return f"{ms / 1000:g}s" if ms < 60_000 else f"{ms / 60_000:g}m"


def _layout(bars: list[dict[str, Any]], parts: tuple[str, ...]) -> int:
    """Give each bar its place in a 0..100 SVG box (``x``, ``w``) and each of its ``parts`` a
    stacked segment (``y_<part>``, ``h_<part>``); returns the largest total, the chart's top."""
    top: int = max([sum(b[p] for p in parts) for b in bars] + [1])
    width = 100 / max(len(bars), 1)
    for i, b in enumerate(bars):
        b["x"] = round(i * width + width * 0.1, 3)
        b["w"] = round(width * 0.8, 3)
        base = 0.0
        for p in parts:
            height = b[p] / top * 100
            b["h_" + p] = round(height, 3)
            b["y_" + p] = round(100 - base - height, 3)
            base += height
    return top
