"""The demo that ``kue example`` runs (kue_example.demo), in this process, on a server and on a
cluster: its jobs flow and it stops cleanly; on a cluster it runs without the rules, whose
lists live outside the queue's slot, and says so."""

from __future__ import annotations

from kue_core import Queue
from kue_core.store.cluster import SlotPool
from kue_example import demo
from tests.conftest import wait_for


def test_the_demo_runs_and_stops(queue: Queue) -> None:
    said: list[str] = []
    stop = demo.start(queue, said.append, 5)
    try:
        assert wait_for(lambda: queue.count("complete", "email") >= 3, timeout=30)
        assert wait_for(lambda: queue.count("complete", "report") >= 1, timeout=30)
        # Its typed tasks too: an invoice's data is the call's arguments, its result the
        # function's Invoice written as JSON.
        assert wait_for(lambda: queue.count("complete", "invoice") >= 1, timeout=30)
        invoice = queue.range_by_type("invoice", "complete", 0, 0)[0]
        assert set(invoice.data) == {"customer", "lines", "currency"}
        assert invoice.result["number"] == f"INV-{invoice.id}"
        assert invoice.result["total_cents"] == sum(
            line["qty"] * line["cents"] for line in invoice.data["lines"]
        )
    finally:
        stop(10)
    assert queue.count("active") == 0 and queue.workers() == []
    assert {s["key"] for s in queue.schedules()} == {"nightly-report", "ops-digest"}
    on_cluster = isinstance(queue.client.connection_pool, SlotPool)
    assert any("no rules on a cluster" in line for line in said) is on_cluster
    assert any(line.startswith("complete  #") for line in said)
