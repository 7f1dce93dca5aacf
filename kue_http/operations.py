"""Routes Kue lacks, on the same blueprint and in the same style: a job's history and runs,
bulk actions on a state, pausing a type, the live workers, per-minute counts for charts, how
long jobs waited and ran, the statistics' history, a health check."""

from __future__ import annotations

from flask import Response, current_app, jsonify, request

from . import redaction
from .api import api, int_arg, queue


def _type_arg() -> str | None:
    """The optional ``type`` query argument (``Queue`` checks it)."""
    return request.args.get("type")


@api.get("/job/<job_id>/history")
def history(job_id: str) -> Response:
    found = queue().get_job(job_id)  # 404 for an unknown job
    return jsonify(queue().history(found.id))  # type: ignore[arg-type]


@api.get("/job/<job_id>/runs")
def job_runs(job_id: str) -> Response:
    """A fan-out job's runs, ordered by start ([] for a job that does not fan out), their
    results as the user may see them."""
    shown = redaction.job_dict(queue().get_job(job_id))  # 404 for an unknown job
    return jsonify(shown.get("runs", []))


# -- bulk actions ----------------------------------------------------------------------------
def _bulk_done(action: str, state: str, count: int) -> Response:
    job_type = _type_arg()
    which = f"{state} {job_type} jobs" if job_type else f"{state} jobs"
    return jsonify({"message": f"{action} {count} {which}", "count": count})


@api.post("/jobs/failed/retry")
def retry_all() -> Response:
    """Every failed job (``?type=`` for one type) back to inactive, its attempts anew."""
    return _bulk_done("retried", "failed", queue().retry_all(_type_arg()))


@api.post("/jobs/delayed/promote")
def promote_all() -> Response:
    """Every delayed job (``?type=`` for one type) inactive now."""
    return _bulk_done("promoted", "delayed", queue().promote_all(_type_arg()))


@api.delete("/jobs/<state>")
def remove_all(state: str) -> Response:
    """Delete every job in a state other than active (``?type=`` for one type)."""
    return _bulk_done("removed", state, queue().remove_all(state, _type_arg()))


# -- pausing a type --------------------------------------------------------------------------
@api.get("/paused")
def paused() -> Response:
    return jsonify(queue().paused())


@api.put("/paused/<rest:job_type>")
def pause(job_type: str) -> Response:
    """Workers of every process stop claiming jobs of this type; running jobs finish."""
    changed = queue().pause(job_type)
    return jsonify({"message": f"paused {job_type}", "changed": changed})


@api.delete("/paused/<rest:job_type>")
def resume(job_type: str) -> Response:
    changed = queue().resume(job_type)
    return jsonify({"message": f"resumed {job_type}", "changed": changed})


# -- watching --------------------------------------------------------------------------------
@api.get("/workers")
def workers() -> Response:
    return jsonify(queue().workers())


@api.get("/throughput")
def throughput() -> Response:
    """Jobs completed and failed for good per minute (``?minutes=``, default 60)."""
    return jsonify(queue().throughput(int_arg("minutes", 60)))


@api.get("/timings")
def timings() -> Response:
    """How long jobs of every known type waited and ran on a UTC day (``?day=YYYY-MM-DD``,
    default today): count, mean and standard deviation (ms), and a histogram."""
    return jsonify(queue().timings(day=request.args.get("day")))


@api.get("/timings/<rest:job_type>")
def type_timings(job_type: str) -> Response:
    """The same for one type."""
    return jsonify(queue().timings(job_type, day=request.args.get("day")))


@api.get("/history")
def stats_history() -> Response:
    """A type's (``?type=``, else all types') history over ``?range=`` (1h, 24h, 7d, 30d;
    default 24h): jobs completed and failed, the backlog, wait and run percentiles, and the
    changes of the versions serving it."""
    return jsonify(queue().stats_history(_type_arg(), request.args.get("range", "24h")))


@api.get("/health")
def health() -> Response | tuple[Response, int]:
    """200 when Redis answers, else 503; open without authentication, so it tells nothing
    more than that."""
    if not queue().ping():
        current_app.logger.warning("health check: Redis does not answer")
        return jsonify({"status": "unavailable", "redis": "down"}), 503
    return jsonify({"status": "ok", "redis": "up"})
