"""The dashboard's own pages: the overview (counts, throughput chart, types, workers,
durations, wait and run times), a state's list of jobs, and a job's page."""

from __future__ import annotations

import math
import re
from typing import Any

from flask import abort, current_app, request, url_for

from kue_core import BULK_ACTIONS, STATES, Queue, defaults, validate_type

from .. import redaction
from ..api import queue
from . import records
from .base import PAGE_SIZES, choice, dashboard, int_arg, render_page
from .flows import flow_tree, job_dependencies
from .history import placed
from .workers import live

#: Chart windows offered on the overview, in minutes; each chart has at most _BARS bars.
#: Up to a day the per-minute counters draw it; beyond, the history (with its deploys).
CHART_WINDOWS = (60, 360, 1440, 10080, 43200)
_HISTORY_WINDOWS = {10080: "7d", 43200: "30d"}
_BARS = 60
#: Bulk actions per state besides "Remove all": (label, method, API endpoint). Blocked jobs
#: have none: they move on by themselves when their dependencies complete.
BULK = {
    "failed": [("Retry all", "POST", "kue_api.retry_all")],
    "delayed": [("Promote all", "POST", "kue_api.promote_all")],
}
#: The ages a bulk action's filter offers: (least age in ms, label); 0: any.
BULK_AGES = (
    (0, "any time"),
    (3_600_000, "over an hour ago"),
    (86_400_000, "over a day ago"),
    (7 * 86_400_000, "over a week ago"),
    (30 * 86_400_000, "over 30 days ago"),
)
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


@dashboard.get("/")
def overview() -> str:
    q = queue()
    minutes = choice("minutes", CHART_WINDOWS)
    by_type = q.counts_by_type()
    paused = q.paused()
    return render_page(
        "overview.html",
        url_for("kue_api.events"),
        by_type=by_type,
        paused=paused,
        **live(q),
        chart=_overview_chart(q, minutes),
        minutes=minutes,
        windows=CHART_WINDOWS,
        durations=_durations(q.totals()["durations"]),
        timings=_timings(q.timings()),
        **records.overview_context(),
    )


@dashboard.get("/jobs/<state>")
def jobs(state: str) -> str:
    if state not in STATES:
        abort(404)
    q = queue()
    job_type = request.args.get("type") or None
    if job_type is not None:
        validate_type(job_type)
    size = choice("size", PAGE_SIZES)
    orders = ORDERS.get(state, ORDERS["default"])
    order = request.args.get("order")
    order = order if order in orders else next(iter(orders))
    total = q.count(state, job_type)
    pages = max(1, math.ceil(total / size))
    page = min(max(int_arg("page", 1), 1), pages)
    by = "finished" if order in ("newest", "oldest") else "queue"
    desc = order in ("newest", "desc")
    offset = (page - 1) * size
    found = q.page(state, job_type, offset=offset, count=size, desc=desc, by=by)
    args = {"type": job_type, "size": size, "order": order}
    return render_page(
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
        bulk_actions=[a for a, states in BULK_ACTIONS.items() if state in states],
        bulk_given={k: request.args.get(k) for k in ("tag", "words") if request.args.get(k)},
        ages=BULK_AGES,
    )


@dashboard.get("/job/<job_id>")
def job(job_id: str) -> str:
    if not re.fullmatch(r"[1-9]\d{0,17}", job_id):
        abort(404)
    q = queue()
    found = q.get_job(job_id)  # JobNotFound: the 404 page
    history = q.history(job_id)
    deps = job_dependencies(q, found)
    info = redaction.job_dict(found)
    # A job linked to others refreshes on their events too (kue.js keeps those it lists).
    events = url_for("kue_api.events") if deps.any else url_for("kue_api.events", id=job_id)
    return render_page(
        "job.html",
        events,
        job=found,
        deps=deps,
        info=info,
        data_hidden=any(h.split(".")[0] == "data" for h in info.get("hidden", ())),
        types=[t for t in q.types() if t != found.type],
        history=history,
        attempt_errors=[h for h in history if h.get("error")],
        last_failure=_last_failure(found.state, history),
        log=q.get_log_lines(job_id),
        trace_url=_trace_url(found.trace_id),
        streams=_streams(q, job_id, found.state),
        stream_hidden=not redaction.view().payloads,
        signal_name_max=defaults.SIGNAL_NAME_MAX,
    )


@dashboard.get("/flow/<job_id>")
def flow(job_id: str) -> str:
    """The whole flow of a job as a tree (``?start=`` a node to page from, ``?offset=`` into
    its children)."""
    if not re.fullmatch(r"[1-9]\d{0,17}", job_id):
        abort(404)
    start = request.args.get("start") or None
    tree = flow_tree(queue(), job_id, start, int_arg("offset", 0))  # JobNotFound: 404
    return render_page("flow.html", url_for("kue_api.events"), tree=tree)


def _last_failure(state: str | None, history: list[dict[str, Any]]) -> dict[str, Any]:
    """The history entry of a failed job's failing for good (with ``no_retry`` when its handler
    raised NoRetry, ``from: blocked`` when a dependency failed); empty when not failed."""
    if state != "failed":
        return {}
    return next((h for h in reversed(history) if h.get("state") == "failed"), {})


def _streams(q: Queue, job_id: str, state: str | None) -> bool:
    """Whether the job's page shows its stream (job.stream()): while it runs, as it may
    stream at any time, and once the stream holds parts (one short read of it: ``Job`` does
    not carry its hash's ``streamed`` field)."""
    if state == "active":
        return True
    return bool(q.read_stream(job_id, block=0.001).parts)


def _trace_url(trace_id: str | None) -> str | None:
    """Where ``KUE_TRACE_URL`` shows the trace (its id is 32 hex digits: safe in a URL)."""
    template = current_app.config.get("KUE_TRACE_URL")
    if trace_id is None or not template:
        return None
    return str(template).replace("{trace_id}", trace_id)


def _overview_chart(q: Queue, minutes: int) -> dict[str, Any]:
    """The throughput chart of the last ``minutes``: from the per-minute counters, or from
    the history past a day (its points an hour or a day long, with deploy markers)."""
    span = _HISTORY_WINDOWS.get(minutes)
    if span is None:
        return _chart(q.throughput(minutes), 1)
    found = q.stats_history(None, span)
    step = found["step_ms"] // 60_000
    chart = _chart(found["points"], step)
    start = found["points"][0]["at"]
    chart["markers"] = placed(found["deploys"], start, start + minutes * 60_000)
    return chart


def _chart(points: list[dict[str, Any]], step: int) -> dict[str, Any]:
    """Counts per ``step`` minutes folded into at most ``_BARS`` bars, laid out in a 0..100
    SVG box."""
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
        "minutes_per_bar": per_bar * step,
        "markers": [],
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
