"""The dashboard's Audit page: the changes made through the API and the dashboard, newest
first, filtered by action and by who (a user or an address), a page at a time (see
``kue_core.features.audit``)."""

from __future__ import annotations

from flask import request, url_for

from ..api import queue
from .base import dashboard, render_page

#: Entries on one page.
PAGE = 50


@dashboard.get("/audit")
def audit() -> str:
    action = request.args.get("action", "").strip() or None
    who = request.args.get("who", "").strip() or None
    before = request.args.get("before") or None
    entries = queue().audit(count=PAGE + 1, before=before, action=action, who=who)
    more = len(entries) > PAGE
    entries = entries[:PAGE]
    return render_page(
        "audit.html",
        url_for("kue_api.events"),
        entries=entries,
        action=action or "",
        who=who or "",
        before=before,
        older=entries[-1]["id"] if more else None,
    )
