"""The demo: workers for every example job type and typed task, a listener and a producer on
one queue, schedules, limits and the rules of kue_example/rules.hjson (``kue example`` runs
this beside the dashboard, so that every page of it has something live)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import kue_rules
from kue_core import Queue
from kue_core.store.cluster import SlotPool

from . import handlers, listener, producer
from .tasks import DemoTasks

#: Job type -> (handlers running at once, handler).
WORKERS: dict[str, tuple[int, Callable[..., Any]]] = {
    "email": (4, handlers.send_email),
    "video": (2, handlers.transcode_video),
    "webhook": (2, handlers.deliver_webhook),
    "reminder": (1, handlers.send_reminder),
    "report": (1, handlers.compile_report),
}
RULES = Path(__file__).with_name("rules.hjson")


def plan(queue: Queue) -> None:
    """The schedules and limits of the demo (defining them again changes nothing)."""
    queue.cron("nightly-report", "0 3 * * *", "report", {"title": "nightly report", "pages": 4})
    queue.every("ops-digest", 60_000, "email", {"title": "digest for ops", "to": "ops@example.com"})
    queue.limit("email", rate=(20, 1000))  # at most 20 mails a second, across every worker
    queue.limit("webhook", group_concurrency=1)  # one delivery at a time per receiving user


def start(
    queue: Queue, echo: Callable[[str], Any] = print, rounds_per_second: float = 2.0
) -> Callable[[float], None]:
    """Start the workers, the listener and the producer; returns ``stop(timeout)``, which
    stops the producer and shuts the workers down gracefully."""
    plan(queue)
    for job_type, (n, handler) in WORKERS.items():
        queue.process(job_type, n, handler)
    tasks = DemoTasks(queue)  # typed tasks, beside Kue's handlers above
    queue.process_tasks()
    listener.print_outcomes(queue, echo)
    rules = None
    if isinstance(queue.client.connection_pool, SlotPool):  # Redis Cluster
        echo("kue example: no rules on a cluster (their lists live outside the queue's slot)")
    else:
        rules = kue_rules.Rules(kue_rules.load(RULES, prefix=queue.prefix), queue).start()
    stopping = threading.Event()
    thread = threading.Thread(
        target=producer.produce,
        args=(queue, stopping, rounds_per_second, rules is not None, tasks),
        name="kue-producer",
    )
    thread.start()

    def stop(timeout: float) -> None:
        stopping.set()
        thread.join()
        if rules is not None:
            rules.stop(timeout)
        queue.shutdown(timeout)

    return stop
