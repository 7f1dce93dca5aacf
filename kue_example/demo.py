"""The demo: workers for every example job type, a listener and a producer on one queue
(``kue example`` runs this beside the dashboard)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from kue_core import Queue

from . import handlers, listener, producer

#: Job type -> (handlers running at once, handler).
WORKERS: dict[str, tuple[int, Callable[..., Any]]] = {
    "email": (4, handlers.send_email),
    "video": (2, handlers.transcode_video),
    "webhook": (2, handlers.deliver_webhook),
    "reminder": (1, handlers.send_reminder),
}


def start(
    queue: Queue, echo: Callable[[str], Any] = print, rounds_per_second: float = 2.0
) -> Callable[[float], None]:
    """Start the workers, the listener and the producer; returns ``stop(timeout)``, which
    stops the producer and shuts the workers down gracefully."""
    for job_type, (n, handler) in WORKERS.items():
        queue.process(job_type, n, handler)
    listener.print_outcomes(queue, echo)
    stopping = threading.Event()
    thread = threading.Thread(
        target=producer.produce, args=(queue, stopping, rounds_per_second), name="kue-producer"
    )
    thread.start()

    def stop(timeout: float) -> None:
        stopping.set()
        thread.join()
        queue.shutdown(timeout)

    return stop
