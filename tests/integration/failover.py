"""The failover scenario the Sentinel and Cluster tests share: workers, two producers (the
blocking and the asyncio client) saving with ``?replicas=1`` and the API run while the
primary is SIGKILLed and a replica promoted; afterwards every acknowledged job is complete,
exactly as saved, on the new primary."""

from __future__ import annotations

import contextlib
from collections.abc import Callable

import redis

from kue_core import Queue, doctor
from kue_http import create_app
from tests.clients import blocking_queue
from tests.conftest import Producer, wait_for


def survives_failover(url: str, prefix: str, fail_over: Callable[[], None], new: int) -> None:
    """Run the scenario on ``url`` (with ``?replicas=1``): ``fail_over`` kills the primary and
    returns once the replica on port ``new`` is promoted and the old node is back as a replica
    in sync (so that saves can be acknowledged again)."""
    worker = Queue(url, prefix=prefix, lease_ms=2000)
    producer_queue = Queue(url, prefix=prefix)
    app = create_app({"KUE_REDIS_URL": url, "KUE_PREFIX": prefix, "KUE_REDIS_TIMEOUT": 2})
    api = app.test_client()
    done: set[int] = set()
    worker.process("task", 4, lambda job: done.add(job.id) or job.data["n"])
    producer = Producer(producer_queue)
    stack = contextlib.ExitStack()
    aproducer = Producer(stack.enter_context(blocking_queue(url, prefix)))  # the asyncio client
    producer.start()
    aproducer.start()
    try:
        wait_for(lambda: len(done) >= 50, timeout=30)
        assert api.get("/api/stats").status_code == 200
        fail_over()
        after = len(producer.acked), len(aproducer.acked)
        wait_for(lambda: len(producer.acked) >= after[0] + 50, timeout=30)
        wait_for(lambda: len(aproducer.acked) >= after[1] + 50, timeout=30)
    finally:
        producer.stop()
        aproducer.stop()
        stack.close()

    try:
        acked = producer.acked + aproducer.acked

        # Every acknowledged job is on the new primary and gets done, exactly as saved. One
        # that was active when the primary died comes back through its lease and runs again,
        # so wait on the acknowledged jobs themselves: saves that raised may have landed too
        # and make the complete count a poor proxy.
        def states() -> list[str]:
            return [j.state for j in producer_queue.get_jobs(acked)]

        wait_for(lambda: states() == ["complete"] * len(acked), timeout=60, interval=0.1)
        jobs = producer_queue.get_jobs(acked)
        assert all(j.result == j.data["n"] for j in jobs)
        assert set(acked) <= done
        # The API, made before the failover, answers from the new primary.
        res = wait_for(lambda: (r := api.get(f"/api/job/{acked[-1]}")).status_code == 200 and r)
        assert res.json["state"] == "complete"
        assert api.get("/api/stats").json["completeCount"] >= len(acked)
        with redis.Redis(port=new) as node:
            assert node.hget(f"{prefix}:job:{acked[-1]}", "state") == b"complete"
        # Once everything saved has run, the indexes agree with the job hashes.
        wait_for(lambda: producer_queue.count("inactive") + producer_queue.count("active") == 0)
        assert doctor.check(producer_queue).findings == []
    finally:
        worker.close()
        producer_queue.close()
