"""The dashboard's Workers page: every live worker process with its host, pid, version, the
types it serves and its slots, what it runs (with progress and how long), abandoned threads,
types paused in it, its last heartbeat, and a stop button (``POST /api/workers/<id>/stop``);
for each type it serves, the limits in force and whether the queue pauses it. The overview's
workers panel reads the same (:func:`live`)."""

from __future__ import annotations

from typing import Any

from flask import url_for

from kue_core import Job, Queue, defaults

from ..api import queue
from .base import dashboard, render_page
from .limits import HELD

#: Active jobs read to show what each worker runs.
RUNNING_SHOWN = 500


def live(q: Queue) -> dict[str, Any]:
    """The live workers, the jobs each runs (from the active jobs themselves: a worker's own
    list is only as fresh as its heartbeat), the jobs pinned to each and waiting, and the
    workers jobs are pinned to that do not run."""
    workers = q.workers()
    running: dict[str, list[Job]] = {}
    for j in q.page("active", count=RUNNING_SHOWN):
        for holder in j.running_on() if j.fan_out() else [j.worker_id or ""]:
            running.setdefault(holder, []).append(j)
    pinned = q.pinned_waits(RUNNING_SHOWN)  # worker id -> jobs pinned to it, waiting
    ids = {w["id"] for w in workers}
    return {
        "workers": workers,
        "running": running,
        "pinned": pinned,
        "pinned_elsewhere": {w: jobs for w, jobs in sorted(pinned.items()) if w not in ids},
        "stop_timeout": defaults.SHUTDOWN_TIMEOUT,
    }


@dashboard.get("/workers")
def workers() -> str:
    q = queue()
    found = live(q)
    served = sorted({t for w in found["workers"] for t in w.get("types") or {}})
    limits = q.limits()
    paused = set(q.paused())
    rules = {}
    for job_type in served:
        status = q.limit_status(job_type) if job_type in limits or job_type in paused else None
        rules[job_type] = {
            "limits": limits.get(job_type),
            "paused": job_type in paused,
            "held": HELD.get(status["held"] or "") if status and status["held"] else None,
        }
    now = q.client.time()
    return render_page(
        "workers.html",
        url_for("kue_api.events"),
        rules=rules,
        now_ms=int(now[0]) * 1000 + int(now[1]) // 1000,
        **found,
    )
