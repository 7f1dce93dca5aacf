"""The dashboard's kue rules page (``kue_rules.store``): one section per watcher a ``kue rules``
process has run under the prefix, with its lists and their lengths, whether a process runs it
now, its counters, its rules with their counters and recent events (the tasks and jobs each
made), and its failed events with a button that puts them back on its input through the JSON
API (``POST /api/rules/retry``). Live as the other pages, and also fetched again every few
seconds: events taken from a plain list make no job event to refresh it. A route on the
``dashboard`` blueprint; imported by the app so that it joins it."""

from __future__ import annotations

from flask import url_for

from kue_rules.store import RULE_COUNTERS, WATCHER_COUNTERS

from ..api import queue
from ..rules import report
from .base import dashboard, render_page

#: Seconds between two fetches of the page while it is open (see the module's docstring).
POLL_SECONDS = 2
#: The counters' names on the page.
COUNTER_LABELS = {
    "events": "events",
    "replayed": "replayed",
    "unmatched": "unmatched",
    "failed": "failed",
    "matched": "matched",
    "tasks": "tasks",
    "jobs": "jobs",
    "duplicates": "duplicates",
    "fetch_errors": "fetch errors",
    "make_errors": "make errors",
}


@dashboard.get("/rules")
def rules() -> str:
    return render_page(
        "rules.html",
        url_for("kue_api.events"),
        watchers=report(queue()),
        watcher_counters=WATCHER_COUNTERS,
        rule_counters=RULE_COUNTERS,
        counter_labels=COUNTER_LABELS,
        retry_url=url_for("kue_api.retry_rules"),
        poll_ms=POLL_SECONDS * 1000,
    )
