"""Job control, on the API blueprint: cancel a job wherever it runs, retry a failed or complete one,
promote a delayed one, move a job to another type, replace the data of a waiting or failed job,
change which workers may run it, give a job a signal, stop a worker process. Each route checks
its input, then makes one call to ``kue_core.Queue``, which refuses what the job's state does
not allow (409) and an unknown job (404) or worker (404)."""

from __future__ import annotations

from typing import Any

from flask import Response, jsonify, request

from kue_core import SIGNAL_MESSAGES, InvalidJob, JobNotFound

from . import redaction
from .api import api, done, queue


def object_body(fields: frozenset[str]) -> dict[str, Any]:
    """The optional JSON object a POST sends (``{}`` when its body is empty), with no fields
    but ``fields``. The content type is JSON: ``security`` refuses a POST without it."""
    if not request.get_data():
        return {}
    body = request.get_json()  # 400 when malformed
    if not isinstance(body, dict):
        raise InvalidJob("the body must be a JSON object")
    unknown = set(body) - fields
    if unknown:
        known = ", ".join(sorted(fields))
        raise InvalidJob(f"unknown field(s): {', '.join(sorted(unknown))}; known: {known}")
    return body


@api.post("/job/<job_id>/cancel")
def cancel(job_id: str) -> Response:
    """End a job in any state but complete: it fails at once (``cancelled: <reason>``), is
    not retried, and a running one is stopped in its worker process. Body: ``{"reason":
    "..."}``, optional."""
    reason = object_body(frozenset({"reason"})).get("reason", "")
    if not isinstance(reason, str):
        raise InvalidJob(f"reason must be a string, got {type(reason).__name__}")
    job = queue().cancel(job_id, reason)
    return done(f"cancelled job {job.id}", job)


@api.post("/job/<job_id>/retry")
def retry(job_id: str) -> Response:
    """Run a failed or complete job again: it waits now, with its attempts anew. A job in
    another state is refused (409) and left as it is."""
    object_body(frozenset())
    job = queue().retry(job_id)
    return done(f"retried job {job.id}", job)


@api.post("/job/<job_id>/promote")
def promote(job_id: str) -> Response:
    """Make a delayed job wait now instead of at its due time; another state is refused (409)."""
    object_body(frozenset())
    job = queue().promote(job_id)
    return done(f"promoted job {job.id}", job)


@api.put("/job/<job_id>/type/<rest:to_type>")
def move(job_id: str, to_type: str) -> Response:
    """Put a job under another type, keeping its id, data, priority and state. A running job
    only with ``?force=true``: its attempt ends as on cancel, and it waits under the new
    type."""
    force = request.args.get("force", "false")
    if force not in ("true", "false"):
        raise InvalidJob(f"force must be true or false, got {force!r}")
    job = queue().move(job_id, to_type, force=force == "true")
    return done(f"moved job {job.id} to {job.type}", job)


@api.put("/job/<job_id>/data")
def update_data(job_id: str) -> Response:
    """Replace the data of an inactive, delayed or failed job with the body (any JSON)."""
    if not request.get_data():
        raise InvalidJob("send the new data as the JSON body")
    data = request.get_json()  # 400 when malformed, 415 when not JSON
    job = queue().update_data(job_id, data)
    return done(f"updated the data of job {job.id}", job)


@api.put("/job/<job_id>/only")
def set_only(job_id: str) -> Response:
    """Change which workers may run a job: body ``{"workers": [ids]}``, or ``{"workers":
    null}`` for any worker. A running job whose worker is no longer allowed is stopped there
    and waits pinned for the new ones; a fan-out job keeps at least k workers."""
    body = object_body(frozenset({"workers"}))
    if "workers" not in body:
        raise InvalidJob('send {"workers": [worker ids]} or {"workers": null}')
    job = queue().set_only(job_id, body["workers"])
    only = job.only()
    return done(f"job {job.id} runs on {', '.join(only) if only else 'any worker'}", job)


@api.post("/workers/<worker_id>/stop")
def stop_worker(worker_id: str) -> Response:
    """Ask a live worker process to shut down as on SIGTERM: it claims nothing more, its
    running jobs get ``timeout`` seconds (body ``{"timeout": s}``, optional), the rest go
    back to the queue."""
    body = object_body(frozenset({"timeout"}))
    if "timeout" in body:
        queue().stop_worker(worker_id, body["timeout"])
    else:
        queue().stop_worker(worker_id)
    return jsonify({"message": f"asked worker {worker_id} to stop"})


@api.post("/job/<job_id>/signal")
def signal(job_id: str) -> Response:
    """Give a job a signal: ``{"name": "approval", "payload": ...}`` (the payload optional,
    any JSON value). A job suspended waiting for it waits for a worker again (``resumed``);
    otherwise it is kept for the job (``kept``); a second signal of a name changes nothing
    (``already``). A job that has ended is refused (409)."""
    body = object_body(frozenset({"name", "payload"}))
    if "name" not in body:
        raise InvalidJob('the body names the signal: {"name": ..., "payload": ...}')
    q = queue()
    outcome = q.signal(job_id, body["name"], body.get("payload"))
    try:
        shown = redaction.job_dict(q.get_job(job_id))
    except JobNotFound:  # resumed, run and removed on completion before this read: done
        shown = None
    told = SIGNAL_MESSAGES[outcome].format(id=int(job_id), name=body["name"])
    return jsonify({"message": told, "outcome": outcome, "job": shown})
