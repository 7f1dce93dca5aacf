"""What every dashboard page shares: the blueprint (with its templates and static files),
the states' labels, the template context, rendering a page with its header's counts, and
reading query arguments."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from flask import Blueprint, current_app, render_template, request

from kue_core import PRIORITIES, STATES

from .. import redaction, security
from ..api import queue


def _assets(name: str) -> str:
    """``templates/`` or ``static/``: inside the package when installed from a wheel, at the
    top of the source tree when run from a checkout."""
    package = Path(__file__).resolve().parent.parent  # kue_http
    for folder in (package / name, package.parent / name):
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
    "suspended": "Suspended",
}
#: States shown only while they hold jobs: a queue that never suspends a job (signals) gives
#: it no room in the header and the overview.
WHEN_USED = ("suspended",)
PAGE_SIZES = (25, 50, 100)
#: The error of a cancelled job, before ``: <reason>``.
CANCELLED = "cancelled"
#: The states whose jobs can be cancelled and whose data can be edited from the dashboard.
CANCELLABLE = ("inactive", "delayed", "active", "blocked", "pinned", "suspended")
EDITABLE = ("inactive", "delayed", "failed", "blocked", "pinned", "suspended")


@dashboard.app_context_processor
def _context() -> dict[str, Any]:
    readonly = current_app.config["KUE_READONLY"] or not security.user().may("operator")
    return {
        # No button that writes for a read-only app, nor for a viewer; none that changes the
        # queue's settings or a job's data but for an admin (kue_http/security.py).
        "readonly": readonly,
        "configures": not readonly and security.user().may("admin"),
        "may_reveal": not current_app.config["KUE_READONLY"] and redaction.may_reveal(),
        "labels": LABELS,
        "states": STATES,
        "priorities": PRIORITIES,
        "cancellable": CANCELLABLE,
        "editable": EDITABLE,
    }


def render_page(template: str, events: str, **context: Any) -> str:
    """A page, with the counts of every state for its header; ``events`` is the event stream
    whose events make it refresh. A state of :data:`WHEN_USED` is shown (a tab, a card, a
    column) only while it holds jobs or is the state of the page's jobs."""
    counts = queue().counts()
    job, state = context.get("job"), context.get("state")
    here = {getattr(job, "state", None), state if isinstance(state, str) else None}
    states = [s for s in STATES if s not in WHEN_USED or counts.get(s) or s in here]
    return render_template(template, nav_counts=counts, events_url=events, states=states, **context)


def int_arg(name: str, default: int) -> int:
    text = request.args.get(name, "")
    return int(text) if re.fullmatch(r"\d{1,9}", text) else default


def choice(name: str, allowed: tuple[int, ...]) -> int:
    """An integer query argument from ``allowed`` (the first one otherwise)."""
    value = int_arg(name, allowed[0])
    return value if value in allowed else allowed[0]
