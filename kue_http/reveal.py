"""``POST /job/<id>/reveal``: a job's payload shown whole, to a user whose role may reveal
(``KUE_REVEAL_ROLE``), once the audit log records who revealed which job's fields and when
(see kue_http/redaction.py)."""

from __future__ import annotations

from flask import Response, jsonify

from . import audit, redaction
from .api import api, queue
from .control import object_body


@api.post("/job/<job_id>/reveal")
def reveal(job_id: str) -> Response:
    """The job as ``GET /job/<id>`` gives it, with nothing hidden; ``revealed`` names what the
    user's own view hides (empty when it hides nothing; the reveal is recorded all the same)."""
    object_body(frozenset())
    job = queue().get_job(job_id)
    hidden = redaction.job_dict(job).get("hidden", [])
    audit.record_first("revealed " + (", ".join(hidden) or "nothing hidden"))
    message = f"revealed job {job.id}" if hidden else f"job {job.id} hides nothing from you"
    return jsonify({"message": message, "revealed": hidden, "job": job.to_dict()})
