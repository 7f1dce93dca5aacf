"""The dashboard's flow control pages (``kue_core.features.limits``): the limits page, one row per
job type with its rate and concurrency limits, per group too, whether it is held back right now (and
why, and for how long), its active and waiting jobs, and a form to change its limits or a button to
remove them through the JSON API (``PUT``/``DELETE /api/limits/<type>``); and the groups page of a
type, its groups in the order they are served. Routes on the ``dashboard`` blueprint; imported by
the app so that they join it."""

from __future__ import annotations

import math
from typing import Any
from urllib.parse import quote

from flask import current_app, request, url_for
from werkzeug.routing import BuildError

from kue_core import validate_type

from ..api import queue
from .base import PAGE_SIZES, choice, dashboard, int_arg, render_page

#: The API endpoint of a type's limits (PUT sets them, DELETE removes them).
ENDPOINT = "kue_api.put_limits"
#: Units a window reads in, largest first: a window reads in the largest one that divides it.
UNITS = (("h", 3_600_000), ("min", 60_000), ("s", 1000), ("ms", 1))
#: What the page says of each reason a type is held back (``limit_status()["held"]``).
HELD = {
    "paused": "paused",
    "remote": "rate limited by the remote side",
    "concurrency": "at its concurrency limit",
    "rate": "at its rate limit",
}
_NONE: dict[str, Any] = {
    "rate": None,
    "concurrency": None,
    "group_rate": None,
    "group_concurrency": None,
    "held_until": None,
}


def window(per_ms: int) -> tuple[int, str, int]:
    """A window as ``(count, unit, unit_ms)`` in the largest unit that divides it."""
    unit, size = next(u for u in UNITS if per_ms % u[1] == 0)
    return per_ms // size, unit, size


@dashboard.app_template_filter("rate_text")
def rate_text(rate: tuple[int, int] | list[int] | None) -> str:
    """``10 per 1 s``, ``500 per 200 ms``, ``1 per 5 min``; ``""`` for none."""
    if not rate:
        return ""
    count, unit, _ = window(int(rate[1]))
    return f"{rate[0]} per {count} {unit}"


@dashboard.app_template_filter("wait_text")
def wait_text(ms: int | None) -> str:
    """A wait in words: ``450 ms``, ``2.5 s``, ``3 min``, ``2 h``."""
    if ms is None:
        return ""
    if ms < 1000:
        return f"{ms} ms"
    if ms < 60_000:
        return f"{ms / 1000:.3g} s"
    if ms < 3_600_000:
        return f"{ms / 60_000:.2g} min"
    return f"{ms / 3_600_000:.3g} h"


def limit_url(job_type: str) -> str:
    """The API URL of ``job_type``'s limits (``PUT`` sets them, ``DELETE`` removes them): by
    its endpoint, or from the API prefix while that endpoint is not registered."""
    if ENDPOINT in current_app.view_functions:
        try:
            return url_for(ENDPOINT, job_type=job_type)
        except BuildError:
            pass
    prefix = request.script_root + current_app.config["KUE_API_PREFIX"]
    return f"{prefix}/limits/{quote(job_type, safe='/')}"


def _row(status: dict[str, Any]) -> dict[str, Any]:
    """A row of the limits page: ``limit_status()`` with what the form and page show."""
    limits = status["limits"]
    form = {}
    for name in ("rate", "group_rate"):
        pair = limits[name]
        if pair:
            count, _, size = window(int(pair[1]))
            form[name] = {"max": pair[0], "per": count, "unit": size}
        else:
            form[name] = {"max": "", "per": "", "unit": 1000}
    return {
        **status,
        "form": form,
        "limited": any(limits[n] for n in _NONE),
        "held_text": HELD.get(status["held"] or "", status["held"] or ""),
    }


@dashboard.get("/limits")
def limits() -> str:
    q = queue()
    counts = q.counts_by_type()
    found = q.limits()
    paused = set(q.paused())
    rows = []
    for job_type in sorted(set(counts) | set(found)):
        if job_type in found or job_type in paused:
            status = q.limit_status(job_type)
        else:  # nothing can hold it back: its counts are all there is to show
            mine = counts.get(job_type, {})
            status = {
                "type": job_type,
                "held": None,
                "wait_ms": None,
                "active": mine.get("active", 0),
                "waiting": mine.get("inactive", 0),
                "started_in_window": None,
                "limits": _NONE,
            }
        rows.append(_row(status))
    return render_page(
        "limits.html",
        url_for("kue_api.events"),
        rows=rows,
        limit_url=limit_url,
        units=UNITS,
    )


@dashboard.get("/groups/<rest:job_type>")
def groups(job_type: str) -> str:
    validate_type(job_type)  # InvalidJob: the 400 page
    q = queue()
    size = choice("size", PAGE_SIZES)
    page = max(int_arg("page", 1), 1)
    found = q.groups(job_type, start=(page - 1) * size, count=size)
    pages = max(1, math.ceil(found["total"] / size))
    if page > pages:  # past the end (groups come and go): the last page
        page = pages
        found = q.groups(job_type, start=(page - 1) * size, count=size)
    return render_page(
        "groups.html",
        url_for("kue_api.events", type=job_type),
        job_type=job_type,
        groups=found["groups"],
        total=found["total"],
        first=(page - 1) * size,
        page=page,
        pages=pages,
        size=size,
        args={"job_type": job_type, "size": size},
        status=q.limit_status(job_type),
    )
