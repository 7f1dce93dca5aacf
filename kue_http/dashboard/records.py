"""The dashboard's job records pages and parts: the tags and a tag's jobs, the search page
through the index, and the overview's tracked jobs, retention and Redis memory (routes on the
``dashboard`` blueprint; imported by the app so that they join it)."""

from __future__ import annotations

import math
import re
from typing import Any

from flask import redirect, request, url_for
from werkzeug.wrappers import Response as WerkzeugResponse

from kue_core import STATES, JobNotFound

from ..api import queue
from .base import dashboard, int_arg, render_page

#: Jobs and tags per page.
PAGE = 25
_UNITS = (("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1000), ("ms", 1))


@dashboard.app_template_filter("age")
def age_text(ms: int) -> str:
    """``7d``, ``36h``, ``90s``: the largest unit that divides it."""
    return next(f"{ms // size}{unit}" for unit, size in _UNITS if ms % size == 0)


@dashboard.app_template_filter("policy")
def _policy(kept: Any) -> str:
    """A retention policy in words: ``removed`` (a job's own ``true``), ``newest 5, at most
    7d old``, ``every job``."""
    if kept is True:
        return "removed at once"
    parts = []
    if kept.get("count") is not None:
        parts.append(f"newest {kept['count']:,}")
    if kept.get("age") is not None:
        parts.append(f"at most {age_text(kept['age'])} old")
    return ", ".join(parts) or "every job"


@dashboard.app_template_filter("bytes")
def bytes_text(n: int) -> str:
    """``512 B``, ``1.5 MB``..."""
    size = float(n)
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    raise AssertionError("unreachable")


def overview_context() -> dict[str, Any]:
    """What the overview shows of the records: tracked jobs first, retention, memory."""
    q = queue()
    return {"tracked": q.tracked(), "retention": q.retention(), "memory": q.memory()}


def _pages(total: int) -> tuple[int, int]:
    """(this page, number of pages) from ``?page=``."""
    pages = max(1, math.ceil(total / PAGE))
    return min(max(int_arg("page", 1), 1), pages), pages


@dashboard.get("/tags")
def tags() -> str:
    q = queue()
    total = q.tag_count()
    page, pages = _pages(total)
    found = q.tags((page - 1) * PAGE, PAGE)
    return render_page(
        "tags.html", url_for("kue_api.events"), tags=found, total=total, page=page, pages=pages
    )


@dashboard.get("/tags/<tag>")
def tag(tag: str) -> str:
    q = queue()
    total = q.tagged(tag, 0, 0).total  # InvalidJob (bad tag): 400
    page, pages = _pages(total)
    found = q.get_jobs(q.tagged(tag, (page - 1) * PAGE, PAGE))
    return render_page(
        "tag.html",
        url_for("kue_api.events"),
        tag=tag,
        jobs=found,
        total=total,
        page=page,
        pages=pages,
    )


@dashboard.get("/search")
def search() -> str | WerkzeugResponse:
    """The header's box: a job id opens that job; words list the jobs every one finds (see
    ``Queue.search``), with state and type filters, a page at a time."""
    text = request.args.get("q", "").strip()
    q = queue()
    if re.fullmatch(r"#?[1-9]\d{0,17}", text):
        try:
            return redirect(url_for(".job", job_id=q.get_job(text.lstrip("#")).id))
        except JobNotFound:
            pass
    state = request.args.get("state") or None
    job_type = request.args.get("type") or None
    page, found, total, exact = 1, [], 0, True
    if text:
        first = q.search(text, state=state, job_type=job_type, count=0)
        page, pages = _pages(first.total)
        hits = q.search(text, state=state, job_type=job_type, offset=(page - 1) * PAGE, count=PAGE)
        found, total, exact = q.get_jobs(hits), hits.total, hits.exact
    pages = max(1, math.ceil(total / PAGE))
    return render_page(
        "search.html",
        url_for("kue_api.events"),
        text=text,
        jobs=found,
        total=total,
        exact=exact,
        state=state,
        job_type=job_type,
        all_states=STATES,
        types=q.types(),
        page=page,
        pages=pages,
    )
