"""Tasks at the top level of a module, for the tests of typed tasks that need one: a child
process (``isolation="process"``) finds its task by module and name, as it does a function.

The queue they are defined on is never reached (redis-py connects on first use): the tests
enqueue their calls on their own queue (``task.on(queue)``) and serve them there."""

from __future__ import annotations

import os
from dataclasses import dataclass

from kue_core import Job, Queue, current_job

queue = Queue("redis://127.0.0.1:1/0", prefix="unused")


@dataclass
class Point:
    x: int
    y: int


@queue.task("isolated-shift", isolation="process")
def shift(p: Point, by: int = 1) -> Point:
    job = current_job()
    job.log("child %d", os.getpid())
    return Point(p.x + by, p.y + by)


def steps_then_fail_once(job: Job) -> int:
    """A handler for a child process: a step (its side effect counted in ``<prefix>:fetched``),
    a part streamed, and a failure on the first attempt."""

    def fetch() -> int:
        job.queue.client.incr(f"{job.queue.prefix}:fetched")
        return int(job.data["n"]) + 1

    value = job.step("fetch", fetch)
    job.stream(f"fetched {value}")
    if job.attempts_made == 0:
        raise RuntimeError("once more")
    return int(value) * 10
