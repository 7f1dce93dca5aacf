"""An example listener: events come from every process on the queue (through Redis), so
this hears the completions of workers on other machines too."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from kue_core import JobNotFound, Queue


def print_outcomes(queue: Queue, echo: Callable[[str], Any] = print) -> None:
    """Print each outcome once: a job that completes, an attempt that failed and will be
    retried, a job that failed for good."""

    def complete(job_id: int, result: Any = None) -> None:
        echo(f"complete  #{job_id}  {json.dumps(result)}")

    def retrying(job_id: int, error: Any = None, made: Any = 0) -> None:
        try:  # for its most attempts, which the event does not carry
            of = f" of {queue.get_job(job_id).attempts()}"
        except JobNotFound:  # removed meanwhile
            of = ""
        echo(f"retrying  #{job_id}  (attempt {int(made) + 1}{of})  {error}")

    def failed(job_id: int, error: Any = None) -> None:
        echo(f"failed    #{job_id}  {error}")

    queue.on("job complete", complete)
    queue.on("job failed attempt", retrying)
    queue.on("job failed", failed)
