"""The dashboard's History pages: for all types (``/history``) and for one
(``/history/<type>``), over 1 h, 24 h, 7 d or 30 d, charts of jobs completed and failed,
of the backlog and of wait and run times (p50, p95, p99), with a line where the versions
serving the type changed (a deploy). All types' page lists each type's figures over the range.
Read from ``Queue.stats_history`` (see ``kue_core.features.history``)."""

from __future__ import annotations

import math
from typing import Any

from flask import abort, request, url_for

from kue_core import HISTORY_RANGES, validate_type

from ..api import queue
from .base import dashboard, render_page

#: The ranges offered (the first the default); each chart has at most _COLUMNS columns.
RANGES = ("24h", "1h", "7d", "30d")
_COLUMNS = 120
#: The lines of the times charts: (field, label).
QUANTILES = (("p50_ms", "p50"), ("p95_ms", "p95"), ("p99_ms", "p99"))
#: The types listed with their figures on all types' page, at most.
_TYPES_LISTED = 200


@dashboard.get("/history")
@dashboard.get("/history/<path:job_type>")
def history(job_type: str | None = None) -> str:
    if job_type is not None:
        validate_type(job_type)  # InvalidJob: the 400 page
    span = request.args.get("range") or RANGES[0]
    if span not in HISTORY_RANGES:
        abort(404)
    q = queue()
    found = q.stats_history(job_type, span)
    rows = []
    if job_type is None:
        types = q.types()[:_TYPES_LISTED]
        rows = [(t, q.stats_history(t, span)["total"]) for t in types]
    return render_page(
        "history.html",
        url_for("kue_api.events", type=job_type) if job_type else url_for("kue_api.events"),
        job_type=job_type,
        span=span,
        ranges=RANGES,
        charts=charts(found),
        total=found["total"],
        deploys=found["deploys"],
        rows=rows,
    )


def charts(found: dict[str, Any]) -> dict[str, Any]:
    """The history's points folded into at most ``_COLUMNS`` columns (counts add up; the
    backlog and the times keep each column's highest), laid out in a 0..100 SVG box: the
    throughput as stacked bars, the backlog and the times as lines; deploys as markers."""
    points = found["points"]
    per = max(1, math.ceil(len(points) / _COLUMNS))
    columns = [_fold(points[i : i + per]) for i in range(0, len(points), per)]
    start, step = points[0]["at"], found["step_ms"]
    end = points[-1]["at"] + step
    bars = [{"at": c["at"], "complete": c["complete"], "failed": c["failed"]} for c in columns]
    top = max([b["complete"] + b["failed"] for b in bars] + [1])
    width = 100 / len(bars)
    for i, b in enumerate(bars):
        b["x"], b["w"] = round(i * width + width * 0.1, 3), round(width * 0.8, 3)
        b["h_complete"] = round(b["complete"] / top * 100, 3)
        b["h_failed"] = round(b["failed"] / top * 100, 3)
        b["y_complete"] = round(100 - b["h_complete"], 3)
        b["y_failed"] = round(b["y_complete"] - b["h_failed"], 3)
    return {
        "bars": bars,
        "top": top,
        "step_ms": step * per,
        "start": start,
        "backlog": _lines(columns, (("waiting", "waiting"), ("delayed", "delayed"))),
        "wait": _lines(columns, tuple((f"wait.{f}", n) for f, n in QUANTILES)),
        "run": _lines(columns, tuple((f"run.{f}", n) for f, n in QUANTILES)),
        "markers": placed(found["deploys"], start, end),
    }


def placed(deploys: list[dict[str, Any]], start: int, end: int) -> list[dict[str, Any]]:
    """The deploys between ``start`` and ``end`` (ms), each with its ``x`` in a 0..100 box."""
    span = max(1, end - start)
    return [
        {**d, "x": round((d["at"] - start) / span * 100, 3)}
        for d in deploys
        if start <= d["at"] <= end
    ]


def _fold(points: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {"at": points[0]["at"]}
    out["complete"] = sum(p["complete"] for p in points)
    out["failed"] = sum(p["failed"] for p in points)
    for name in ("waiting", "delayed"):
        out[name] = _highest(p[name] for p in points)
    for kind in ("wait", "run"):
        for f, _ in QUANTILES:
            out[f"{kind}.{f}"] = _highest(p[kind][f] for p in points)
    return out


def _highest(values: Any) -> Any:
    present = [v for v in values if v is not None]
    return max(present) if present else None


def _lines(columns: list[dict[str, Any]], series: tuple[tuple[str, str], ...]) -> dict[str, Any]:
    """Each of ``series`` (field, label) as polylines through the columns' middles, broken
    where a column has no value; scaled to the highest value of them all."""
    top = max([c[f] for c in columns for f, _ in series if c[f] is not None] + [0])
    scale = top if top > 0 else 1
    width = 100 / len(columns)
    out = []
    for f, label in series:
        runs: list[list[str]] = [[]]
        for i, c in enumerate(columns):
            if c[f] is None:
                if runs[-1]:
                    runs.append([])
                continue
            x, y = round((i + 0.5) * width, 3), round(100 - c[f] / scale * 96, 3)
            runs[-1].append(f"{x},{y}")
        last = next((c[f] for c in reversed(columns) if c[f] is not None), None)
        paths = [" ".join(r) if len(r) > 1 else f"{r[0]} {r[0]}" for r in runs if r]
        out.append({"name": label, "paths": paths, "last": last})
    return {"top": top, "series": out, "any": any(s["paths"] for s in out)}
