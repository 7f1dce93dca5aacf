"""With ``runtime="loop"``, the keeper (heartbeats, sweeps, ttl, figures), the promotion timer
and the control listener are tasks of the worker's event loop, on its connection: no thread of
their own, and a heartbeat on time however busy the slots' tasks are."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from kue_core import Job, Queue
from kue_core.store.aio_transport import AsyncTransport
from tests.conftest import wait_for


@pytest.fixture
def lq(redis_url: str, prefix: str) -> Iterator[Queue]:
    q = Queue(redis_url, prefix=prefix, lease_ms=600, runtime="loop")
    yield q
    q.close()


def test_keeper_promoter_and_listener_are_tasks_of_the_loop(
    lq: Queue, queue: Queue, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: set[str] = set()
    real = AsyncTransport.call

    async def call(self: AsyncTransport, c: Any) -> Any:
        seen.add(c.name)
        return await real(self, c)

    monkeypatch.setattr(AsyncTransport, "call", call)
    started = threading.Event()
    outcome: list[str] = []

    async def handler(job: Job) -> None:
        started.set()
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            outcome.append("cancelled")
            raise

    job = lq.create_job("t").delay(100).save()
    lq.process("t", 1, handler)
    names = {t.name for t in threading.enumerate()}
    assert not names & {"kue-keeper", "kue-promoter", "kue-control"}, names
    assert started.wait(10)  # promoted by the loop's promoter, then claimed
    wait_for(lambda: {"heartbeat", "recover", "promote"} <= seen)
    assert [w["id"] for w in queue.workers()] == [lq.worker_id]
    queue.cancel(job.id)  # type: ignore[arg-type]
    wait_for(lambda: outcome == ["cancelled"], timeout=2)  # heard on the loop's listener
    lq.shutdown()
    assert queue.workers() == []


def test_a_heartbeat_is_on_time_while_the_slots_are_busy(redis_url: str, prefix: str) -> None:
    """Sixteen slots keep the loop busy (2 ms of Python a job, 6 s in all) for longer than
    several leases: the long job (4 s, over three leases of 1.2 s) has its lease renewed all the
    while, so it completes at its first attempt, never recovered by a sweep. (A lease of 1.2 s
    rather than the fixture's 600 ms: a CI machine under load once stalled the process past a
    600 ms lease, which is the machine, not the loop.)"""
    q = Queue(redis_url, prefix=prefix, lease_ms=1200, runtime="loop")
    try:
        q.save_many([q.create_job("busy") for _ in range(3000)])
        long = q.create_job("long").save()

        async def busy(job: Job) -> None:
            end = time.perf_counter() + 0.002
            while time.perf_counter() < end:
                pass

        async def slow(job: Job) -> str:
            await asyncio.sleep(4)
            return "done"

        q.process("busy", 16, busy)
        q.process("long", 1, slow)
        ended = ("complete", "failed")
        wait_for(lambda: q.get_job(long.id).state in ended, timeout=30)  # type: ignore[union-attr]
        got = q.get_job(long.id)
        assert got is not None
        assert (got.state, got.result, got.attempts_made) == ("complete", "done", 1), got.history
        assert 0 < q.count("inactive", "busy") < 3000  # the slots were busy all the while
    finally:
        q.close()


def test_the_start_and_the_last_words_go_on_the_loop(
    lq: Queue, queue: Queue, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The registration and the flags of the types paused before the start, and at shutdown
    the release of a running job, the last figures and the registration's removal: all on the
    loop's connection, none on the blocking client. The keeper's last round (a heartbeat held
    up here as the shutdown begins) ends before the removal, so no heartbeat can write the
    worker's key back once it is gone."""
    sent: list[str] = []
    hold, holding = threading.Event(), threading.Event()
    real = AsyncTransport.call

    async def call(self: AsyncTransport, c: Any) -> Any:
        name = f"heartbeat {c.args[2]}" if c.name == "heartbeat" else c.name
        if name == "heartbeat beat" and hold.is_set() and not holding.is_set():
            name = "heartbeat held"
            holding.set()
            await asyncio.sleep(0.5)  # a round under way as the shutdown goes on
        sent.append(name)
        return await real(self, c)

    monkeypatch.setattr(AsyncTransport, "call", call)
    blocking: list[str] = []
    for method in ("call", "batch", "drive", "read"):
        real_method = getattr(lq.scripts, method)

        def spy(*args: Any, _real: Any = real_method, _name: str = method) -> Any:
            blocking.append(_name)
            return _real(*args)

        monkeypatch.setattr(lq.scripts, method, spy)
    queue.pause("held")
    started = threading.Event()

    async def handler(job: Job) -> None:
        started.set()
        await asyncio.sleep(60)

    job = queue.create_job("t").save()
    lq.process(["held", "t"], 1, handler)
    assert sent[:2] == ["heartbeat start", "pause"]
    assert started.wait(10)
    hold.set()
    assert holding.wait(10)  # the keeper beats every 200 ms
    lq.shutdown(0)
    assert blocking == []
    assert sent[-1] == "heartbeat leave"
    assert sent.index("heartbeat held") < sent.index("release") < len(sent) - 1
    assert queue.workers() == [] and not queue.client.exists(queue.keys.worker(lq.worker_id))
    got = queue.get_job(job.id)  # type: ignore[arg-type]
    assert got is not None and got.state == "inactive" and got.attempts_made == 0
