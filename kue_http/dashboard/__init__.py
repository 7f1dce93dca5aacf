"""The dashboard: server-rendered pages over ``kue_core.Queue``.

Every page is complete HTML (escaped by Jinja), so it works without script and is quick to
first paint. ``static/kue.js`` makes it live: it listens to the event stream and, when
something happens, fetches the page again and swaps in the parts marked ``data-live``, at
most about once a second however many events arrive. Actions are ``fetch`` calls to the JSON
API, which checks them (read-only mode, CSRF) as it checks any client: retry, remove,
priority, pause, and job control (cancel, move, edit a job's data, stop a worker process).
The job page's own parts (its data editor, reveal, signal dialog and stream of output) are
``static/job.js``, which only that page loads.
The package: ``base`` (the blueprint, shared helpers), ``filters``, ``pages`` (overview,
lists, a job), and one module per part: ``flows`` (a job's dependencies), ``records``
(tags, search), ``limits``, ``schedules``, ``rules``, ``audit``, ``history`` (charts of
the statistics' history), ``workers`` (the live worker processes).
"""

from . import (
    audit,
    filters,
    history,
    limits,
    pages,
    records,
    rules,
    schedules,
)  # routes and filters
from .base import LABELS, dashboard

__all__ = [
    "LABELS",
    "audit",
    "dashboard",
    "filters",
    "history",
    "limits",
    "pages",
    "records",
    "rules",
    "schedules",
    "workers",
]
