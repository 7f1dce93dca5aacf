"""Typed tasks of the demo, beside the Kue-style handlers of kue_example/handlers.py.

A task is a function with annotations; ``@queue.task`` makes its calls jobs. Each job is an
ordinary Kue job whose data is the call's arguments by name (the dashboard shows
``{"customer": "ada", "lines": [...], "currency": "EUR"}``), checked before it is saved, and
the worker calls the function with them, typed again (``lines`` arrives as ``Line`` objects)::

    tasks = DemoTasks(queue)
    job = tasks.invoice.enqueue("ada", [Line("book", 2, 1_250)])
    tasks.invoice.result(job, timeout=10)        # Invoice(number='INV-...', ...)
    queue.process_tasks()                         # a worker serving both tasks

In an application the tasks sit at the top level of a module, on the module's queue, and
``kue worker myapp.tasks`` serves them; the demo makes them on the queue ``kue example`` gives
it, hence ``DemoTasks(queue)``.
"""

from __future__ import annotations

import asyncio
import random
import time
from dataclasses import dataclass
from typing import Any

from kue_core import Queue, current_job


@dataclass
class Line:
    """An invoice line."""

    sku: str
    qty: int
    cents: int


@dataclass
class Invoice:
    number: str
    total_cents: int
    currency: str


def make_invoice(customer: str, lines: list[Line], currency: str = "EUR") -> Invoice:
    """Totals the lines; a current_job() log line says for whom."""
    job = current_job()
    job.log("invoicing %s: %d lines", customer, len(lines))
    time.sleep(random.uniform(0.05, 0.3))  # rendering the PDF
    total = sum(line.qty * line.cents for line in lines)
    return Invoice(f"INV-{job.id}", total, currency)


async def thumbnail(url: str, width: int, height: int | None = None) -> dict[str, Any]:
    """An async def task: runs on the worker's event loop."""
    await asyncio.sleep(random.uniform(0.05, 0.2))  # fetching and scaling the image
    return {"url": url, "size": [width, height or width]}


class DemoTasks:
    """The demo's tasks on ``queue``: ``queue.task(...)(fn)`` is what ``@queue.task(...)``
    does to a function defined under it; each task is typed from its function."""

    def __init__(self, queue: Queue) -> None:
        self.invoice = queue.task("invoice", attempts=3, priority="high", concurrency=2)(
            make_invoice
        )
        self.thumbnail = queue.task("thumbnail", ttl=30_000)(thumbnail)


def a_few(tasks: DemoTasks, rng: random.Random, customer: str) -> None:
    """One round of typed calls: an invoice, and now and then a thumbnail."""
    lines = [Line(rng.choice(("book", "pen", "lamp")), rng.randint(1, 3), rng.choice((250, 1_250)))]
    tasks.invoice.enqueue(customer, lines)
    if rng.random() < 0.3:
        tasks.thumbnail.options(priority="low").enqueue(
            f"https://img.example.com/{customer}.png", 128
        )
