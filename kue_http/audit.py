"""The audit log on the API blueprint: every change made through the API (and so through the
dashboard, whose buttons call it) is recorded once answered, with who made it and how many
jobs it touched (``kue_core.features.audit``); a route may name more of what it did in
``flask.g.audit`` (a bulk action: ``bulk_retry`` and its filter); ``GET /audit`` reads the log.

A write that was refused (an answer of 400 or more) changed nothing and is not recorded, nor is an
empty ``POST /job`` (204: nothing to create, as in Kue); in read-only mode every write is refused,
so nothing is. Recording never fails the request: a Redis error while recording is logged, and the
answer goes out as it was.
"""

from __future__ import annotations

import logging
from typing import Any

from flask import Response, g, jsonify, request

from . import security
from .api import api, int_arg, queue
from .security import WRITES

log = logging.getLogger(__name__)

#: Answer fields that count the jobs a change touched: a number, or a list of ids.
_COUNTS = ("removed", "retried", "promoted", "cancelled", "moved", "count", "done", "ids")


@api.after_request
def _record(response: Response) -> Response:
    status = response.status_code
    # 204: an empty POST /job, which creates nothing (as in Kue); 4xx, 5xx: refused.
    if request.method not in WRITES or status == 204 or status >= 400 or not request.endpoint:
        return response
    if g.get("audited"):  # recorded by the route, before it answered
        return response
    try:
        queue().add_audit(entry(status, _jobs(response)))
    except Exception:  # the change is made: its answer goes out whatever the log does
        log.exception("could not record %s %s in the audit log", request.method, request.path)
    return response


def entry(status: int, jobs: str) -> dict[str, Any]:
    """The audit entry of the current request, answered ``status``, touching ``jobs``."""
    return {
        "action": (request.endpoint or "").rpartition(".")[2],
        "method": request.method,
        "path": request.full_path.rstrip("?"),
        "who": _who(),
        "from": request.remote_addr or "",
        "status": status,
        "jobs": jobs,
        **g.get("audit", {}),  # what the route says of itself (a bulk action: which, on what)
    }


def record_first(detail: str) -> None:
    """Record the current request before it is answered (a reveal: what it shows goes out only
    once the log holds who saw it); a Redis error fails the request."""
    queue().add_audit({**entry(200, "1"), "detail": detail})
    g.audited = True


def _who() -> str:
    """The authenticated user (a user's name, ``KUE_AUTH``'s basic name or ``token``), or
    empty without authentication."""
    return security.user().name


def _jobs(response: Response) -> str:
    """How many jobs the answer says the change touched (empty when it does not tell)."""
    if not response.is_json:
        return ""
    body: Any = response.get_json(silent=True)
    if not isinstance(body, dict):
        return ""
    for name in _COUNTS:
        value = body.get(name)
        if isinstance(value, list):
            return str(len(value))
        if isinstance(value, int) and not isinstance(value, bool):
            return str(value)
    return "1" if isinstance(body.get("id"), int) else ""


@api.get("/audit")
def audit() -> Response:
    """The latest entries of the audit log, newest first: ``count`` (default 100), ``before``
    (an entry id: the page after it), ``action``, ``who`` (a user or an address), ``since``
    (ms)."""
    since = request.args.get("since")
    entries = queue().audit(
        count=int_arg("count", 100),
        before=request.args.get("before") or None,
        action=request.args.get("action") or None,
        who=request.args.get("who") or None,
        since=None if since is None else int_arg("since", 0),
    )
    return jsonify({"entries": entries})
