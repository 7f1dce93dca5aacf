"""Handlers the command-line tests run with ``kue worker tests.cli.handlers:<name>``."""

from __future__ import annotations

import os
import time
from typing import Any

from kue_core import Job


def echo(job: Job) -> dict[str, Any]:
    """The job's number, doubled, and the pid of the process that ran it."""
    return {"twice": job.data["n"] * 2, "pid": os.getpid()}


def sleepy(job: Job) -> dict[str, Any]:
    """Runs for ``data.seconds``, so that a test can stop the worker meanwhile."""
    time.sleep(job.data["seconds"])
    return {"slept": job.data["seconds"]}
