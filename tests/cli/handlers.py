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
    """Prints ``started job <id>``, then runs for ``data.seconds``, so that a test can stop
    the worker meanwhile (once the handler runs: a job is active from its claim)."""
    print(f"started job {job.id}", flush=True)
    time.sleep(job.data["seconds"])
    return {"slept": job.data["seconds"]}


def whoami(job: Job) -> dict[str, Any]:
    """For fan-out jobs: prints ``started job <id> on <worker>``, runs for ``data.seconds``
    (default 0), ending early once its attempt is stopped, prints ``finished job <id> on
    <worker>`` (and `` (stopped)`` when its attempt
    was) and returns the worker id the claim
    gave the run (``job.worker_id``) and this process's pid."""
    print(f"started job {job.id} on {job.worker_id}", flush=True)
    deadline = time.monotonic() + job.data.get("seconds", 0)
    while time.monotonic() < deadline and not job.stopping:
        time.sleep(0.01)
    stopped = " (stopped)" if job.stopping else ""
    print(f"finished job {job.id} on {job.worker_id}{stopped}", flush=True)
    return {"worker": job.worker_id, "pid": os.getpid()}


def fails_on(job: Job) -> dict[str, Any]:
    """:func:`whoami`, except on the workers ``data.fail_on`` names: there it waits until
    ``data.live`` workers are live and ``data.running`` runs of the job are running (so that
    the others run while it fails), then raises."""
    if job.worker_id not in job.data["fail_on"]:
        return whoami(job)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        running = [r for r in job.runs() if r["state"] == "running"]
        if len(job.queue.workers()) >= job.data["live"] and len(running) >= job.data["running"]:
            break
        time.sleep(0.01)
    raise RuntimeError(f"no GPU on {job.worker_id}")
