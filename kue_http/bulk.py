"""Bulk actions on a filter over the API (``kue_core.features.bulk``): ``GET /jobs/match``
counts what a filter matches (for a confirmation); ``POST /jobs/bulk`` retries, removes,
promotes or cancels every job it matches, in batches, in a thread of this process, answering
when done (200) or after ``KUE_BULK_WAIT`` seconds with the progress so far and where to follow
it (202), or 409 when it carries the count confirmed (``expect``) and the filter matches
another number by then; ``GET /jobs/bulk/<id>`` follows it and ``DELETE /jobs/bulk/<id>``
stops it after its batch. The audit log records the POST as ``bulk_<action>`` with its filter
(and the jobs done by the answer's time)."""

from __future__ import annotations

import json
import logging
import threading
import uuid
from typing import Any

from flask import Response, current_app, g, jsonify, request, url_for

from kue_core import BULK_FILTER_FIELDS, BulkNotFound, InvalidJob, KueError, Queue

from . import redaction
from .api import api, queue

log = logging.getLogger(__name__)


def _query_filter() -> dict[str, Any]:
    args = request.args
    found: dict[str, Any] = {k: args[k] for k in BULK_FILTER_FIELDS if k in args}
    if "min_age_ms" in found:
        if not found["min_age_ms"].isdigit() or len(found["min_age_ms"]) > 15:
            raise InvalidJob(
                f"min_age_ms must be a whole number of ms, got {found['min_age_ms']!r}"
            )
        found["min_age_ms"] = int(found["min_age_ms"])
    return found


@api.get("/jobs/match")
def bulk_match() -> Response:
    """How many jobs a filter (query arguments) matches, and ``examples`` of them (5 unless
    given): their ids, types and titles."""
    given = _query_filter()
    examples = request.args.get("examples", "5")
    if not examples.isdigit() or len(examples) > 3:
        raise InvalidJob(f"examples must be a whole number, got {examples!r}")
    q = queue()
    found = q.bulk_match(given, int(examples))
    view, listed = redaction.view(), []
    for job in q.get_jobs(found["examples"]):
        title = redaction.title(job, view) or None
        title = title[:200] if isinstance(title, str) else None
        listed.append({"id": job.id, "type": job.type, "title": title})
    return jsonify({"matched": found["matched"], "filter": given, "examples": listed})


class _Run:
    """A bulk action run in a thread: its outcome, once it has one."""

    def __init__(self, q: Queue, body: dict[str, Any], run_id: str) -> None:
        self.done = threading.Event()
        self.result: dict[str, Any] | None = None
        self.error: Exception | None = None
        self._args = (q, body, run_id)
        threading.Thread(target=self._run, name=f"kue-bulk-{run_id[:8]}", daemon=True).start()

    def _run(self) -> None:
        q, body, run_id = self._args
        action: Any = body.get("action")
        given: Any = body.get("filter")
        try:
            reason, expect = body.get("reason", ""), body.get("expect")
            self.result = q.bulk(action, given, reason=reason, run_id=run_id, expect=expect)
        except KueError as e:  # refused before anything was done, or Redis failed
            self.error = e
        except Exception as e:  # reported, never lost in a thread
            log.exception("bulk action %s failed", run_id)
            self.error = e
        finally:
            self.done.set()


@api.post("/jobs/bulk")
def bulk_start() -> tuple[Response, int]:
    """Retry, remove, promote or cancel every job a filter matches: ``{"action", "filter",
    "reason", "expect"}``; with ``expect`` (the count confirmed), a filter that matches
    another number is a 409 naming it (``matched``), and nothing is done."""
    body = request.get_json(silent=True)
    if not isinstance(body, dict):
        raise InvalidJob('give a JSON object: {"action": ..., "filter": {...}}')
    unknown = sorted(set(body) - {"action", "filter", "reason", "expect"})
    if unknown:
        raise InvalidJob(f"a bulk action has no field {unknown[0]!r}")
    g.audit = _audited(body)
    run_id = uuid.uuid4().hex
    run = _Run(queue(), body, run_id)
    wait = float(current_app.config["KUE_BULK_WAIT"])
    while not run.done.wait(wait):
        try:  # recorded once its filter was checked, before its first batch
            status = queue().bulk_status(run_id)
        except BulkNotFound:
            wait = 0.01
            continue
        follow = url_for("kue_api.bulk_progress", run_id=run_id)
        answer = jsonify({**status, "follow": follow})
        answer.headers["Location"] = follow
        return answer, 202
    if run.error is not None:
        raise run.error
    assert run.result is not None
    return jsonify(run.result), 200


def _audited(body: dict[str, Any]) -> dict[str, str]:
    """The audit entry's action (``bulk_retry``...) and detail (the filter, and the count
    confirmed): recorded only when the action was accepted, so both were checked by then."""
    detail = json.dumps(body.get("filter"), ensure_ascii=False)
    if body.get("expect") is not None:
        detail += f", {body['expect']} confirmed"
    if body.get("reason"):
        detail += f", reason {json.dumps(body['reason'], ensure_ascii=False)}"
    return {"action": f"bulk_{body.get('action')}", "detail": detail}


@api.get("/jobs/bulk/<run_id>")
def bulk_progress(run_id: str) -> Response:
    return jsonify(queue().bulk_status(run_id))


@api.delete("/jobs/bulk/<run_id>")
def bulk_stop(run_id: str) -> Response:
    """Stop a running bulk action after its batch (what it did stays done)."""
    return jsonify(queue().stop_bulk(run_id))
