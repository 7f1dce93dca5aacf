"""Typed tasks for ``kue worker MODULE`` (tests/cli/test_tasks_cli.py). The queue they are
defined on is never reached: the worker serves them on its own (``--redis``, ``--prefix``),
and the tests enqueue their calls there (``task.on(queue)``)."""

from __future__ import annotations

import os

from kue_core import Queue, current_job

queue = Queue("redis://127.0.0.1:1/0", prefix="unused")


@queue.task("add", concurrency=2, priority="high")
def add(a: int, b: int = 0) -> int:
    current_job().log("pid %d", os.getpid())
    return a + b


@queue.task("shout")
async def shout(text: str) -> str:
    return text.upper()


@queue.task("nightly", cron="0 3 * * *", tz="Europe/Paris")
def nightly(kind: str = "full") -> str:
    return kind
