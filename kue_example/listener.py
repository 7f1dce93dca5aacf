"""An example listener: events come from every process on the queue (through Redis), so
this hears the completions of workers on other machines too."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from kue_core import Queue


def print_outcomes(queue: Queue, echo: Callable[[str], Any] = print) -> None:
    """Print each job that completes, or fails for good."""

    def complete(job_id: int, result: Any = None) -> None:
        echo(f"complete  #{job_id}  {json.dumps(result)}")

    def failed(job_id: int, error: Any = None) -> None:
        echo(f"failed    #{job_id}  {error}")

    queue.on("job complete", complete)
    queue.on("job failed", failed)
