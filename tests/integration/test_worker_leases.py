"""The lease per worker process, with real processes: a worker killed while holding jobs has
them recovered once by another; a worker held up past its lease (SIGSTOP) and woken has its
jobs recovered once, learns it lost them, and goes on with new ones, which are its own; a job
leased the way the version before leased it is still recovered."""

from __future__ import annotations

import signal
from collections.abc import Iterator

import pytest

from kue_core import Queue, doctor
from kue_core.base.keys import zid
from kue_core.store import calls
from tests.conftest import wait_for
from tests.integration.test_worker_faults import LEASE_MS, Workers


@pytest.fixture
def workers(redis_url: str, prefix: str) -> Iterator[Workers]:
    w = Workers(redis_url, prefix)
    yield w
    w.close()


@pytest.fixture
def keeper(redis_url: str, prefix: str) -> Iterator[Queue]:
    """A worker process of another type (this one): its keeper's sweeps recover the jobs of
    the workers of type "t" that stop renewing their lease."""
    q = Queue(redis_url, prefix=prefix, lease_ms=LEASE_MS)
    q.process("other", 1, lambda job: None)
    yield q
    q.shutdown(timeout=5)
    q.close()


def _started(queue: Queue, n: int) -> list[str]:
    started = f"{queue.prefix}:started"
    wait_for(lambda: queue.client.llen(started) == n)
    return queue.client.lrange(started, 0, -1)  # type: ignore[return-value]


def _ran(queue: Queue) -> list[str]:
    return queue.client.lrange(f"{queue.prefix}:ran", 0, -1)  # type: ignore[return-value]


def _state(queue: Queue, job_id: int) -> str | None:
    job = queue.get_job(job_id)
    return None if job is None else job.state


def test_a_killed_workers_jobs_are_recovered_once(queue: Queue, workers: Workers) -> None:
    doomed = workers.start(3)
    jobs = [queue.create_job("t", {"block": True}).save() for _ in range(3)]
    _started(queue, 3)
    (worker,) = [w["id"] for w in queue.workers()]
    assert sorted(queue.workers()[0]["jobs"]) == [j.id for j in jobs]
    doomed.send_signal(signal.SIGKILL)
    doomed.wait(timeout=10)
    for job in jobs:  # their next run completes
        queue.client.hset(queue.keys.job(job.id), "data", "{}")  # type: ignore[arg-type]
    survivor = workers.start(3)
    wait_for(lambda: all(_state(queue, j.id) == "complete" for j in jobs), timeout=15)  # type: ignore[arg-type]
    assert sorted(_ran(queue)) == sorted(f"{j.id}:{survivor.pid}" for j in jobs)
    for job in jobs:
        assert queue.client.hget(queue.keys.job(job.id), "stalls") == "1"  # type: ignore[arg-type]
        stalled = [h for h in queue.history(job.id) if "stalled" in h]  # type: ignore[arg-type]
        assert [h["worker"] for h in stalled] == [worker]
    # The dead worker's lease is gone once its jobs were recovered, and nothing is stuck.
    wait_for(lambda: queue.client.zscore(queue.keys.worker_leases, worker) is None)
    assert not queue.client.exists(queue.keys.recovering)
    # Its entry in the workers' set goes with a live worker's heartbeat once three leases have
    # passed (heartbeat.lua); the doctor rightly reports it as gone until then (once in CI).
    wait_for(lambda: queue.client.zscore(queue.keys.workers, worker) is None)
    assert doctor.check(queue).findings == []


def test_a_worker_held_up_past_its_lease_loses_its_jobs_and_goes_on(
    queue: Queue, workers: Workers, keeper: Queue
) -> None:
    sleepy = workers.start(2)
    held = [queue.create_job("t", {"block": True}).save() for _ in range(2)]
    _started(queue, 2)
    worker = next(w["id"] for w in queue.workers() if w["pid"] == sleepy.pid)
    sleepy.send_signal(signal.SIGSTOP)
    try:
        # Another process's keeper recovers them: back to wait, one stall each.
        wait_for(lambda: all(_state(queue, j.id) == "inactive" for j in held), timeout=10)  # type: ignore[arg-type]
        for job in held:
            queue.client.hset(queue.keys.job(job.id), "data", "{}")  # type: ignore[arg-type]
    finally:
        sleepy.send_signal(signal.SIGCONT)
    # Woken, its heartbeat reports both jobs lost: its two slots leave their blocked handlers
    # (abandoned) and go on; it claims the recovered jobs again and completes them.
    wait_for(lambda: all(_state(queue, j.id) == "complete" for j in held), timeout=15)  # type: ignore[arg-type]
    wait_for(
        lambda: [w["abandoned_threads"] for w in queue.workers() if w["id"] == worker] == [2],
        timeout=10,
    )
    assert sorted(_ran(queue)) == sorted(f"{j.id}:{sleepy.pid}" for j in held)
    for job in held:
        assert queue.client.hget(queue.keys.job(job.id), "stalls") == "1"  # type: ignore[arg-type]
    # Its lease goes on: a job it claims now is its own, never recovered.
    assert queue.client.zscore(queue.keys.worker_leases, worker) is not None
    later = queue.create_job("t", {"block": True}).save()
    wait_for(lambda: queue.client.llen(f"{queue.prefix}:started") == 3)
    assert keeper.scripts.call(calls.recover(keeper.keys, 1, 100)) == (0, 0)
    assert _state(queue, later.id) == "active"  # type: ignore[arg-type]
    assert queue.client.hget(queue.keys.job(later.id), "stalls") is None  # type: ignore[arg-type]
    assert [w["jobs"] for w in queue.workers() if w["id"] == worker] == [[later.id]]
    assert doctor.check(queue).findings == []


def test_a_job_leased_by_a_worker_of_the_version_before(queue: Queue, workers: Workers) -> None:
    """Upgrade: a worker of the version before leased each job in <p>:leases and died; a
    worker of this version recovers it from there, and runs it."""
    job = queue.create_job("t").save()
    claimed = queue.scripts.call(calls.claim(queue.keys, "t", "old-worker", 60_000))
    assert isinstance(claimed, tuple) and claimed[0] == job.id
    queue.client.zadd(queue.keys.leases, {zid(job.id): 1})  # type: ignore[arg-type]
    survivor = workers.start()
    wait_for(lambda: _state(queue, job.id) == "complete", timeout=10)  # type: ignore[arg-type]
    assert _ran(queue) == [f"{job.id}:{survivor.pid}"]
    assert queue.client.hget(queue.keys.job(job.id), "stalls") == "1"  # type: ignore[arg-type]
    assert queue.client.zcard(queue.keys.leases) == 0
    assert doctor.check(queue).findings == []


def test_a_claim_whose_reply_was_lost_is_given_back_by_its_live_worker(
    redis_url: str, prefix: str
) -> None:
    """A claim that ran in Redis but whose reply never reached the worker (here: made in the
    worker's name, as a cut connection would leave it): the job is active under a live
    worker, which renews its lease. Once a call of that worker has failed for want of Redis,
    and a lease has passed, its keeper gives the job back (no attempt counted), and a job
    running there is left alone."""
    import threading

    from redis import ConnectionError as Cut

    lease_ms = 600
    started, go = threading.Event(), threading.Event()
    with Queue(redis_url, prefix=prefix, lease_ms=lease_ms) as q:
        running = q.create_job("t").save()
        q.process("t", 1, lambda job: started.set() or go.wait(30))
        # Running, not only claimed: a job claimed a lease ago and not running yet (its slot
        # held up under load) is one the keeper rightly gives back.
        assert started.wait(15)
        workers = q._workers
        assert workers is not None
        lost = q.create_job("u").save()
        claimed = q.scripts.call(calls.claim(q.keys, ["u"], workers.id, lease_ms))
        assert isinstance(claimed, tuple) and claimed[0] == lost.id
        workers.state.report(Cut("the connection was cut"))  # what the lost reply raised
        wait_for(lambda: q.get_job(lost.id).state == "inactive", timeout=10)  # type: ignore[arg-type]
        job = q.get_job(lost.id)  # type: ignore[arg-type]
        assert job.attempts_made == 0
        assert q.get_job(running.id).state == "active"  # type: ignore[arg-type]
        go.set()
        wait_for(lambda: q.get_job(running.id).state == "complete")  # type: ignore[arg-type]
        q.shutdown(timeout=5)
