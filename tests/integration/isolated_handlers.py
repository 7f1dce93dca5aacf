"""Handlers for the ``isolation="process"`` tests: module-level, so a child process can import
them. Each records its process id, so the tests can tell where it ran."""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any

from kue_core import Job, NoRetry


def double(job: Job) -> dict[str, int]:
    job.progress(1, 2)
    job.log("child %d", os.getpid())
    return {"n": job.data["n"] * 2, "pid": os.getpid()}


async def async_double(job: Job) -> dict[str, int]:
    await asyncio.sleep(0)
    return {"n": job.data["n"] * 2, "pid": os.getpid()}


def hang(job: Job) -> None:
    job.log("child %d", os.getpid())
    time.sleep(120)


def crash(job: Job) -> None:
    job.log("child %d", os.getpid())
    os._exit(3)


def explode_in_handler(job: Job) -> None:
    raise ValueError(f"bad input {job.data['n']}")


def refuse(job: Job) -> None:
    raise NoRetry("not worth retrying")


def unserialisable(job: Job) -> Any:
    return {1, 2}


def wrap_with_pid(job: Job, call_next: Any) -> dict[str, Any]:
    """A middleware for the child: what the handler returned, and where it ran."""
    return {"inner": call_next(), "mw_pid": os.getpid()}
