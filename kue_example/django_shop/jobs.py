"""The project's queue, one per process, and jobs saved when their transaction commits."""

from __future__ import annotations

import threading
from typing import Any

from django.conf import settings
from django.db import transaction

from kue_core import Job, Queue

_lock = threading.Lock()
_queue: Queue | None = None


def queue() -> Queue:
    """This process's queue, made at first use from the settings."""
    global _queue
    with _lock:
        if _queue is None:
            _queue = Queue(settings.KUE_REDIS_URL, settings.KUE_PREFIX)
        return _queue


def enqueue_on_commit(job_type: str, data: Any, **options: Any) -> None:
    """Save a ``job_type`` job once the current transaction commits; none if it rolls back.

    A job saved inside the transaction could reach a worker before the rows it names are
    committed (the worker reads nothing, or old rows), and would stay saved after a
    rollback. ``options``: the job's option setters and their values (``priority="high"``).
    The job is checked now, so a bad one fails the request rather than the commit.
    """
    job = queue().create_job(job_type, data)
    for name, value in options.items():
        getattr(job, name)(value)
    job._save_row()  # every check a save makes, before anything is committed
    transaction.on_commit(lambda: _save(job))


def _save(job: Job) -> None:
    job.save()
