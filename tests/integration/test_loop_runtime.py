"""The worker runtime on one event loop: its batches, its def slots' threads, its clients, and
what only it does; the rest of what a worker does is tested by the worker tests."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis

from kue_core import InvalidJob, Job, Queue, doctor
from kue_core.store.aio_transport import AsyncTransport
from kue_core.worker import tasks
from kue_core.worker.slots import BRIEF_S
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
    with pytest.raises(InvalidJob, match="runtime must be one of loop, got 'fibers'"):
        Queue(redis_url, prefix=prefix, runtime="fibers")
    with pytest.raises(InvalidJob, match="runtime 'thread' was removed"):
        Queue(redis_url, prefix=prefix, runtime="thread")


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

    def reported() -> int:  # the last reply may be recorded a moment after Redis counted it
        return sum(n for name, n in seen if name in ("complete_batch", "complete"))

    wait_for(lambda: reported() >= 400)
    assert reported() == 400
    batched = [n for name, n in seen if name == "complete_batch"]
    assert batched and max(batched) > 1  # several completions in one call
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


def _threaded(q: Queue) -> list[bool]:
    """Whether each slot of ``q``'s workers is served by a thread of its own."""
    workers = q._workers
    assert workers is not None
    return [s.thread is not None and s.thread.is_alive() for s in workers.state.slots]


def test_def_slots_go_on_in_threads_of_their_own_while_a_handler_blocks(
    lq: Queue, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Brief def handlers run in the loop's hand-off threads, their slots served on the loop;
    once handlers waited past BRIEF_S twice (within SLOW_AGAIN calls: once is a hiccup, and
    changes nothing), each def slot goes on in a thread of its own
    (named after the slot) at the end of its job, and the loop takes them back once no
    handler took long for THREADS_S."""
    seen: list[tuple[int, str]] = []

    def handler(job: Job) -> None:
        seen.append((job.data["i"], threading.current_thread().name))
        if job.data.get("slow"):
            threading.Event().wait(20 * BRIEF_S)  # took long: a blocking call, say

    fed = iter(range(1, 10_000))

    def feed(until: Callable[[], bool]) -> Callable[[], bool]:
        def more() -> bool:  # one brief job each look, until both slots moved
            if until():
                return True
            lq.create_job("t", {"i": next(fed)}).save()
            return False

        return more

    lq.process("t", 2, handler)
    lq.create_job("t", {"i": 0}).save()
    wait_for(lambda: len(seen) == 1)
    assert seen[0][1].startswith("kue-run-") and _threaded(lq) == [False, False]
    lq.create_job("t", {"i": 0, "slow": True}).save()
    wait_for(lambda: len(seen) == 2)
    wait_for(lambda: lq.count("complete") == 2)
    lq.create_job("t", {"i": 0}).save()  # the next brief job, after the hiccup
    wait_for(lambda: len(seen) == 3)
    assert seen[-1][1].startswith("kue-run-") and _threaded(lq) == [False, False]
    lq.create_job("t", {"i": 0, "slow": True}).save()  # slow again, soon
    wait_for(feed(lambda: _threaded(lq) == [True, True]), timeout=30)
    count = len(seen)
    lq.create_job("t", {"i": -1}).save()
    wait_for(lambda: len(seen) > count)
    assert seen[-1][1] in ("kue-t-1", "kue-t-2"), seen[-1]

    monkeypatch.setattr(tasks, "THREADS_S", 0.0)  # long enough: the loop takes them back
    wait_for(feed(lambda: _threaded(lq) == [False, False]), timeout=30)
    count = len(seen)
    lq.create_job("t", {"i": -2}).save()
    wait_for(lambda: len(seen) > count)
    assert seen[-1][1].startswith("kue-run-"), seen[-1]
    wait_for(lambda: lq.count("complete") == len(seen))
    assert doctor.check(lq).findings == []


def test_the_only_def_slot_of_a_process_is_served_by_a_thread_of_its_own(lq: Queue) -> None:
    """With one def slot, batching its calls gains nothing: it claims and reports on a
    connection of its own, in its own thread, as on the thread runtime."""
    names: list[str] = []
    lq.process("t", 1, lambda job: names.append(threading.current_thread().name))
    jobs = [lq.create_job("t", {}).save() for _ in range(3)]
    wait_for(lambda: lq.count("complete") == 3)
    assert names == ["kue-t-1"] * 3 and _threaded(lq) == [True]
    assert all(lq.get_job(j.id).state == "complete" for j in jobs)  # type: ignore[union-attr]


def test_a_client_on_a_blocking_pool_gets_a_loop_too(redis_url: str, prefix: str) -> None:
    if "+" in redis_url.partition("://")[0]:
        pytest.skip("a cluster's client is made from its URL")
    pool = redis.BlockingConnectionPool.from_url(redis_url, decode_responses=True)
    with Queue(client=redis.Redis(connection_pool=pool), prefix=prefix) as q:
        job = q.create_job("t", {"x": 1}).save()
        q.process("t", 2, lambda j: j.data["x"] + 1)
        assert job.wait(15) == 2


def test_a_client_the_loop_cannot_copy_is_refused_clearly(redis_url: str, prefix: str) -> None:
    """A pool of another class (a Sentinel's own, say): the worker cannot make its loop's
    connection, and says what it needs; nothing was registered."""
    if "+" in redis_url.partition("://")[0]:
        pytest.skip("a cluster's client is made from its URL")

    class OwnPool(redis.ConnectionPool):
        pass

    pool = OwnPool.from_url(redis_url, decode_responses=True)
    with Queue(client=redis.Redis(connection_pool=pool), prefix=prefix) as q:
        with pytest.raises(InvalidJob, match="a worker needs a client made from a URL"):
            q.process("t", 1, lambda j: None)
        assert q.workers() == []


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
