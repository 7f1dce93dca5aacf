"""Flow control on the API blueprint (``kue_core.features.limits``): the limits of each job type,
whether a type is held back by them right now, and its groups (tenants).

``GET /limits`` reads every type with a limit or a hold, ``PUT /limits/<type>`` sets the
limits given in its body (null removes one, the others are kept), ``DELETE /limits/<type>``
removes them all and ends a hold asked by a handler's ``RateLimited``, and ``GET
/groups/<type>`` lists the groups with jobs waiting or running, in their turn.

Names are ``POST /job``'s style (``groupRate``, ``perMs``); kue_core's are the Python ones
(``group_rate``, ``(max_jobs, per_ms)``)."""

from __future__ import annotations

from typing import Any

from flask import Response, jsonify, request

from kue_core import InvalidJob, Queue, defaults

from .api import api, int_arg, queue

#: The limits a body may give, REST names -> ``queue.limit``'s.
LIMITS = {
    "rate": "rate",
    "concurrency": "concurrency",
    "groupRate": "group_rate",
    "groupConcurrency": "group_concurrency",
}
_RATES = ("rate", "groupRate")
#: ``queue.limit_status`` -> the ``status`` of an answer.
_STATUS = {
    "held": "held",
    "wait_ms": "waitMs",
    "active": "active",
    "waiting": "waiting",
    "started_in_window": "startedInWindow",
}


@api.get("/limits")
def list_limits() -> Response:
    """Every type with a limit, or held back by a handler's ``RateLimited`` now: type -> its
    limits and whether they hold it back right now."""
    q = queue()
    return jsonify({"limits": {job_type: _entry(q, job_type) for job_type in q.limits()}})


@api.get("/limits/<rest:job_type>")
def get_limits(job_type: str) -> Response:
    """One type's limits and status (every limit null for a type without any)."""
    return jsonify(_entry(queue(), job_type))


@api.put("/limits/<rest:job_type>")
def put_limits(job_type: str) -> Response:
    """Set the limits the body gives (``null`` removes one; those not given are kept):
    ``{"rate": {"max": n, "perMs": ms}, "concurrency": n, "groupRate": {...},
    "groupConcurrency": n}``, at least one. Checked whole before anything is written."""
    body = request.get_json()  # 400 when malformed
    q = queue()
    q.limit(job_type, **_changes(body))
    return jsonify(_entry(q, job_type))


@api.delete("/limits/<rest:job_type>")
def remove_limits(job_type: str) -> Response:
    """Remove every limit of the type, and end a hold asked by ``RateLimited``."""
    queue().remove_limits(job_type)
    return jsonify({"message": f"limits of {job_type} removed"})


@api.get("/groups/<rest:job_type>")
def groups(job_type: str) -> Response:
    """The type's groups with jobs waiting or running, the next served first, then those
    with only running jobs: ``{"total", "groups": [{"group", "waiting", "active"}]}``, a page
    from ``offset`` of ``count`` (default 50)."""
    offset, count = int_arg("offset", 0), int_arg("count", 50)
    if offset < 0:
        raise InvalidJob(f"offset must be at least 0, got {offset}")
    if not 1 <= count <= defaults.MAX_GROUPS_PAGE:
        raise InvalidJob(f"count must be from 1 to {defaults.MAX_GROUPS_PAGE}, got {count}")
    return jsonify(queue().groups(job_type, offset, count))


def _changes(body: Any) -> dict[str, Any]:
    """``body``'s limits under ``queue.limit``'s names; ``queue.limit`` checks the values."""
    if not isinstance(body, dict) or not body:
        names = ", ".join(LIMITS)
        raise InvalidJob(f"limits are a JSON object with at least one of {names}")
    unknown = set(body) - set(LIMITS)
    if unknown:
        known = ", ".join(LIMITS)
        raise InvalidJob(f"unknown limit(s) {', '.join(sorted(unknown))}; limits are: {known}")
    return {
        LIMITS[name]: _rate(name, value) if name in _RATES else value
        for name, value in body.items()
    }


def _rate(name: str, value: Any) -> tuple[Any, Any] | None:
    if value is None:
        return None
    if not isinstance(value, dict) or set(value) != {"max", "perMs"}:
        raise InvalidJob(f'{name} is {{"max": jobs, "perMs": ms}} or null, got {value!r:.100}')
    return value["max"], value["perMs"]


def _entry(q: Queue, job_type: str) -> dict[str, Any]:
    """A type's limits and status, under REST names."""
    status = q.limit_status(job_type)
    limits = status["limits"]
    return {
        "rate": _window(limits["rate"]),
        "concurrency": limits["concurrency"],
        "groupRate": _window(limits["group_rate"]),
        "groupConcurrency": limits["group_concurrency"],
        "heldUntil": limits["held_until"],
        "status": {rest: status[name] for name, rest in _STATUS.items()},
    }


def _window(rate: tuple[int, int] | None) -> dict[str, int] | None:
    return None if rate is None else {"max": rate[0], "perMs": rate[1]}
