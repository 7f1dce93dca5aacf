"""Job records on the API blueprint: search through the index, tags, tracking, retention. Each
route checks its input, then makes one call to ``kue_core.Queue`` (bad input: 400, an unknown
job: 404, nothing changed)."""

from __future__ import annotations

from typing import Any

from flask import Response, jsonify, request

from kue_core import InvalidJob

from . import redaction
from .api import api, done, int_arg, queue, search_args


def _jobs(ids: list[int]) -> list[dict[str, Any]]:
    shown = redaction.view()
    return [redaction.job_dict(job, shown) for job in queue().get_jobs(ids)]


@api.get("/search")
def search_page() -> Response:
    """Jobs every word of ``q`` finds (words of their type, ``data.title``, search keys and
    tags; the last word may be a word's start), newest first: ``{"ids", "total", "exact",
    "jobs"}``; filters ``state`` and ``type``, page ``offset`` and ``count`` (default 25)."""
    found = search_args(25)
    return jsonify({**found.to_dict(), "jobs": _jobs(found)})


@api.get("/tags")
def tags() -> Response:
    """Tags in use, most used first: ``{"total": distinct tags, "tags": {tag: jobs}}``, a
    page from ``offset`` of ``count`` (default 100)."""
    found = queue().tags(int_arg("offset", 0), int_arg("count", 100))
    return jsonify({"total": queue().tag_count(), "tags": found})


@api.get("/tags/<tag>")
def tagged(tag: str) -> Response:
    """Jobs with a tag, most recently tagged first: ``{"tag", "total", "jobs"}``."""
    found = queue().tagged(tag, int_arg("offset", 0), int_arg("count", 25))
    return jsonify({"tag": tag, "total": found.total, "jobs": _jobs(found)})


@api.put("/job/<job_id>/tags/<tag>")
def add_tag(job_id: str, tag: str) -> Response:
    job = queue().tag(job_id, tag)
    return done(f"tagged job {job.id} {tag}", job)


@api.delete("/job/<job_id>/tags/<tag>")
def remove_tag(job_id: str, tag: str) -> Response:
    job = queue().untag(job_id, tag)
    return done(f"untagged job {job.id} {tag}", job)


@api.get("/tracked")
def tracked() -> Response:
    """The tracked jobs, most recently tracked first."""
    shown = redaction.view()
    return jsonify([redaction.job_dict(job, shown) for job in queue().tracked()])


@api.put("/job/<job_id>/track")
def track(job_id: str) -> Response:
    job = queue().track(job_id)
    return done(f"tracking job {job.id}", job)


@api.delete("/job/<job_id>/track")
def untrack(job_id: str) -> Response:
    job = queue().track(job_id, on=False)
    return done(f"no longer tracking job {job.id}", job)


def _retention() -> dict[str, Any]:
    return {**queue().retention(), "memory": queue().memory()}


@api.get("/retention")
def retention() -> Response:
    """The retention in force (``complete``, ``failed``: count, age in ms, source) and the
    Redis memory in use."""
    return jsonify(_retention())


@api.put("/retention")
def set_retention() -> Response:
    """Set the queue's retention: body ``{"complete": policy, "failed": policy}`` (either may
    be left out), a policy being ``{"count": n, "age": ms}``, a count, null (keep every job)
    or ``"default"``."""
    body = request.get_json()  # 400 when malformed, 415 when not JSON
    if not isinstance(body, dict):
        raise InvalidJob("the body must be a JSON object with complete and/or failed")
    queue().set_retention(**body)
    return jsonify(_retention())
