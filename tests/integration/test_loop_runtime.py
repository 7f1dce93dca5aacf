"""The worker runtime on one event loop (``runtime="loop"``): what only it does. Everything the
two runtimes share is tested by the worker tests, which CI runs under each
(``KUE_RUNTIME=loop`` for its Valkey pass)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from kue_core import InvalidJob, Job, Queue, doctor
from kue_core.store.aio_transport import AsyncTransport
from kue_core.worker.loop import BRIEF_S
from tests.conftest import kill_worker_when, wait_for


@pytest.fixture
def lq(redis_url: str, prefix: str) -> Iterator[Queue]:
    # A lease no load outlasts: each job is to complete once, and a process held up past a
    # short lease (two cores, under coverage) rightly has the jobs it held run again.
    q = Queue(redis_url, prefix=prefix, lease_ms=30_000, runtime="loop")
    yield q
    q.close()


def _record_calls(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int]]:
    """(script, jobs in it) of every call the loop's transport makes from now on."""
    seen: list[tuple[str, int]] = []
    real = AsyncTransport.call

    async def call(self: AsyncTransport, c: Any) -> Any:
        reply = await real(self, c)
        if c.name == "complete_batch":
            seen.append((c.name, len(reply.reports)))
        elif c.name == "claim_batch":
            seen.append((c.name, len(reply.jobs)))
        else:
            seen.append((c.name, 1))
        return reply

    monkeypatch.setattr(AsyncTransport, "call", call)
    return seen


def test_the_runtime_is_checked(redis_url: str, prefix: str) -> None:
    with pytest.raises(InvalidJob, match="runtime must be one of thread, loop"):
        Queue(redis_url, prefix=prefix, runtime="fibers")


def test_completions_made_while_a_call_is_away_go_together(
    lq: Queue, monkeypatch: pytest.MonkeyPatch
) -> None:
    """16 async slots on 400 jobs: completions and claims go out many to a call, each job
    completes once, and the queue is left consistent."""
    seen = _record_calls(monkeypatch)
    jobs = lq.save_many([lq.create_job("t", {"i": i}) for i in range(400)])
    done: list[int] = []

    async def handler(job: Job) -> int:
        await asyncio.sleep(0)
        done.append(job.data["i"])
        return int(job.data["i"])

    lq.process("t", 16, handler)
    wait_for(lambda: lq.count("complete") == 400)
    assert sorted(done) == list(range(400))
    assert all(lq.get_job(j.id).result == j.data["i"] for j in jobs[::37])  # type: ignore[union-attr,index]
    batched = [n for name, n in seen if name == "complete_batch"]
    assert batched and max(batched) > 1  # several completions in one call
    assert sum(batched) + sum(1 for name, _ in seen if name == "complete") == 400
    lq.shutdown()
    assert doctor.check(lq).findings == []


def test_def_handlers_run_off_the_loop(lq: Queue) -> None:
    """A def handler runs in the loop's thread pool, never on the loop's thread: one that
    blocks holds its own slot only."""
    names: list[str] = []
    release = threading.Event()

    def handler(job: Job) -> None:
        names.append(threading.current_thread().name)
        if job.data["block"]:
            release.wait(30)

    blocked = lq.create_job("t", {"block": True}).save()
    wait_for(lambda: lq.get_job(blocked.id).state == "inactive")  # type: ignore[union-attr]
    lq.process("t", 2, handler)
    wait_for(lambda: lq.get_job(blocked.id).state == "active")  # type: ignore[union-attr]
    quick = [lq.create_job("t", {"block": False}).save() for _ in range(5)]
    wait_for(lambda: all(lq.get_job(j.id).state == "complete" for j in quick))  # type: ignore[union-attr]
    release.set()
    wait_for(lambda: lq.get_job(blocked.id).state == "complete")  # type: ignore[union-attr]
    assert names and all(n.startswith("kue-run") for n in names)


def test_a_def_handler_that_took_long_is_no_longer_taken_as_brief(lq: Queue) -> None:
    """A slot's def calls are brief at first (run in turn with the others, the loop waiting
    for them); after a call that took longer than BRIEF_S, the slot's next is not (a thread
    is woken for it at once, and the loop does not wait for it)."""
    seen: list[tuple[int, str, list[bool]]] = []

    def handler(job: Job) -> None:
        workers = lq._workers
        assert workers is not None
        briefs = [slot.brief for slot in workers.state.slots]
        seen.append((job.data["i"], threading.current_thread().name, briefs))
        if job.data["i"] == 0:
            threading.Event().wait(20 * BRIEF_S)  # took long: a blocking call, say

    for i in range(2):
        lq.create_job("t", {"i": i}).save()  # claimed in turn: 0, then 1
    lq.process("t", 1, handler)
    wait_for(lambda: len(seen) == 2)
    assert [(i, briefs) for i, _, briefs in seen] == [(0, [True]), (1, [False])]
    assert all(name.startswith("kue-run-") for _, name, _ in seen), seen


def test_a_client_of_ones_own_gets_a_loop_of_its_own(redis_url: str, prefix: str) -> None:
    """A queue made with a client (not a URL) runs the loop on a copy of that client's
    connection settings."""
    if "+" in redis_url.partition("://")[0]:
        pytest.skip("a cluster's client is made from its URL")
    own = redis.Redis.from_url(redis_url, decode_responses=True)
    with Queue(client=own, prefix=prefix, runtime="loop") as q:
        job = q.create_job("t", {"x": 1}).save()
        q.process("t", 2, lambda j: j.data["x"] + 1)
        assert job.wait(15) == 2


WORKER = """
import os, sys, threading
from kue_core import Queue
queue = Queue(sys.argv[1], prefix=sys.argv[2], lease_ms=800, runtime="loop")
hold = threading.Event()

def handler(job):
    queue.client.rpush(sys.argv[2] + ":started", job.id)
    hold.wait(60)

queue.process("t", 8, handler)
print("ready", flush=True)
threading.Event().wait()
"""


@pytest.mark.slow
def test_jobs_claimed_in_a_batch_by_a_killed_worker_come_back(queue: Queue, redis_url: str) -> None:
    """A worker killed (SIGKILL) while 8 jobs it claimed in batches run: every one comes back
    through its lease and completes elsewhere, once; the doctor finds nothing."""
    prefix = queue.prefix
    jobs = queue.save_many([queue.create_job("t", {"i": i}) for i in range(8)])
    started = f"{prefix}:started"
    kill_worker_when(WORKER, lambda: queue.client.llen(started) == 8, redis_url, prefix)
    ran: list[int] = []
    with Queue(redis_url, prefix=prefix, runtime="loop") as other:
        other.process("t", 4, lambda j: ran.append(j.id))
        wait_for(lambda: queue.count("complete") == 8, timeout=30)
        other.shutdown()
    assert sorted(ran) == sorted(j.id for j in jobs)
    # The killed process is still listed, until its registration expires or is repaired.
    found = doctor.check(queue).findings
    assert [f.kind for f in found] in ([], ["gone-worker"])
