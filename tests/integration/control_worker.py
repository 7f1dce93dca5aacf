"""A worker process for the job-control fault tests:
``python -m tests.integration.control_worker URL PREFIX KIND N TYPE...``.

KIND is how its handlers run: ``thread``, ``async`` or ``process`` (isolated). A job whose data
has ``block`` runs until stopped (a thread handler records ``<id>`` in ``<prefix>:started``,
polls ``job.stopping`` and then records ``<id>`` in ``<prefix>:late``; the others are cancelled
or killed); any other job (after
``sleep`` seconds, when its data has it) records ``<id>:<pid>`` in ``<prefix>:ran`` and returns
the pid. Prints ``ready`` once serving, and exits
0 on SIGTERM or once stopped remotely (``queue.stop_worker``). Its lease is 600 ms, or
``$CONTROL_WORKER_LEASE_MS``.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import threading
import time

from kue_core import Job, Queue


def _done(job: Job) -> int:
    if job.data.get("sleep"):
        time.sleep(job.data["sleep"])
    job.queue.client.rpush(f"{job.queue.prefix}:ran", f"{job.id}:{os.getpid()}")
    return os.getpid()


def thread_handler(job: Job) -> int | None:
    if job.data.get("block"):
        job.queue.client.rpush(f"{job.queue.prefix}:started", str(job.id))
        while not job.stopping:
            time.sleep(0.005)
        job.queue.client.rpush(f"{job.queue.prefix}:late", str(job.id))
        return None  # a late result, which is dropped
    return _done(job)


async def async_handler(job: Job) -> int | None:
    if job.data.get("block"):
        await asyncio.sleep(120)
    return _done(job)


def process_handler(job: Job) -> int | None:
    if job.data.get("block"):
        time.sleep(120)
    return _done(job)


HANDLERS = {"thread": thread_handler, "async": async_handler, "process": process_handler}


def main() -> None:
    url, prefix, kind, n, *types = sys.argv[1:]
    queue = Queue(url, prefix=prefix, lease_ms=int(os.environ.get("CONTROL_WORKER_LEASE_MS", 600)))
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *a: stop.set())
    isolation = "process" if kind == "process" else "thread"
    for job_type in types:
        queue.process(job_type, int(n), HANDLERS[kind], isolation=isolation)
    print("ready", flush=True)
    while not stop.is_set() and not queue.stopped_remotely.is_set():
        stop.wait(0.05)
    queue.shutdown(timeout=5)
    queue.close()


if __name__ == "__main__":
    main()
