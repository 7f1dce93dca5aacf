"""Job control with real worker processes: cancel a running handler of each kind from
another process, stop one of two workers while jobs flow, move jobs under running workers, a
cancel that reaches a worker paused past its lease. Afterwards ``kue doctor`` finds nothing."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from kue_core import Job, Queue, doctor
from tests.conftest import wait_for
from tests.integration.processes import Processes


class Workers(Processes):
    """Worker subprocesses (``tests/integration/control_worker.py``); killed at the end."""

    def start(
        self,
        kind: str = "thread",
        n: int = 1,
        types: tuple[str, ...] = ("t",),
        lease_ms: int = 600,
    ) -> subprocess.Popen[str]:
        argv = [sys.executable, "-m", "tests.integration.control_worker", self.redis_url]
        argv += [self.prefix, kind, str(n), *types]
        env = {**os.environ, "CONTROL_WORKER_LEASE_MS": str(lease_ms)}
        return self.launch(argv, env=env)


@pytest.fixture
def workers(redis_url: str, prefix: str) -> Iterator[Workers]:
    w = Workers(redis_url, prefix)
    yield w
    w.close()


def _ran(queue: Queue) -> list[str]:
    return queue.client.lrange(f"{queue.prefix}:ran", 0, -1)  # type: ignore[return-value]


def _state(queue: Queue, job: Job) -> str | None:
    assert job.id is not None
    return queue.get_job(job.id).state


def _pid(queue: Queue, proc: subprocess.Popen[str]) -> str:
    """The worker id of a worker subprocess, as ``queue.workers()`` shows it."""
    wait_for(lambda: any(w["pid"] == proc.pid for w in queue.workers()), timeout=10)
    return next(w["id"] for w in queue.workers() if w["pid"] == proc.pid)


@pytest.mark.parametrize("kind", ["thread", "async", "process"])
def test_cancel_a_running_handler_from_another_process(
    queue: Queue, workers: Workers, kind: str
) -> None:
    # A lease no load outlasts: the next job is to run once, and a process held up past a
    # short one (two cores, under coverage, a child starting beside it) rightly runs it again.
    proc = workers.start(kind, lease_ms=30_000)
    job = queue.create_job("t", {"block": True}).save()
    wait_for(lambda: _state(queue, job) == "active", timeout=30)
    if kind == "thread":  # its handler has begun (a job cancelled before is not run at all)
        started = f"{queue.prefix}:started"
        wait_for(lambda: queue.client.lrange(started, 0, -1) == [str(job.id)], timeout=10)
    # The running job's lease is renewed: it would never end on its own.
    cancelled_at = time.monotonic()
    queue.cancel(job.id, "operator")  # type: ignore[arg-type]
    nxt = queue.create_job("t").save()
    wait_for(lambda: _state(queue, nxt) in ("active", "complete"), timeout=5)
    assert time.monotonic() - cancelled_at < 1.0  # the slot has taken the next job
    wait_for(lambda: _state(queue, nxt) == "complete", timeout=15)
    assert _ran(queue) == [f"{nxt.id}:{proc.pid}"] if kind != "process" else len(_ran(queue)) == 1
    if kind == "thread":  # the handler saw job.stopping and returned: its result is dropped
        wait_for(lambda: queue.client.lrange(f"{queue.prefix}:late", 0, -1) == [str(job.id)])
    final = queue.get_job(job.id)  # type: ignore[arg-type]
    assert final.state == "failed" and final.error == "cancelled: operator"
    assert "result" not in final.to_dict()
    assert doctor.check(queue).findings == []


def test_a_cancel_reaches_a_worker_paused_past_its_lease(queue: Queue, workers: Workers) -> None:
    proc = workers.start("thread")
    job = queue.create_job("t", {"block": True}).save()
    # Active once claimed, but stopped only once its handler runs: a job claimed before a
    # process was held up past its lease is not started at all (test_frozen_claims.py).
    started = f"{queue.prefix}:started"
    wait_for(lambda: queue.client.lrange(started, 0, -1) == [str(job.id)], timeout=10)
    proc.send_signal(signal.SIGSTOP)
    try:
        queue.cancel(job.id, "while it slept")  # type: ignore[arg-type]
        # The process stays stopped past its lease (600 ms) and its registration's.
        wait_for(lambda: queue.workers() == [], timeout=10)
    finally:
        proc.send_signal(signal.SIGCONT)
    wait_for(lambda: queue.client.lrange(f"{queue.prefix}:late", 0, -1) == [str(job.id)])
    nxt = queue.create_job("t").save()
    wait_for(lambda: _state(queue, nxt) == "complete", timeout=10)
    final = queue.get_job(job.id)  # type: ignore[arg-type]
    assert final.state == "failed" and final.error == "cancelled: while it slept"
    ends = [h for h in final.history() if h["state"] in ("complete", "failed", "inactive")]
    assert len(ends) == 2  # saved, then cancelled: no recovery, no completion
    # Registered again by its keeper's next heartbeat, which a loaded machine may run after
    # the slot has completed the next job.
    wait_for(lambda: [w["pid"] for w in queue.workers()] == [proc.pid], timeout=10)
    assert doctor.check(queue).findings == []


def test_stop_one_of_two_workers_while_jobs_flow(queue: Queue, workers: Workers) -> None:
    # Leases no load outlasts: a process held up past a short one (two cores, under coverage)
    # rightly has the jobs it held run again, and each job is to run once here.
    leaving = workers.start("thread", n=2, lease_ms=30_000)
    staying = workers.start("thread", n=2, lease_ms=30_000)
    leaving_id = _pid(queue, leaving)
    _pid(queue, staying)
    jobs = queue.save_many(queue.create_job("t", {"i": i}) for i in range(100))
    wait_for(lambda: len(_ran(queue)) >= 10, timeout=10)
    queue.stop_worker(leaving_id, timeout=5)
    assert leaving.wait(timeout=15) == 0
    more = queue.save_many(queue.create_job("t", {"i": i}) for i in range(100, 200))
    wait_for(lambda: len(_ran(queue)) == 200, timeout=30)
    ran = [entry.split(":") for entry in _ran(queue)]
    assert sorted(int(jid) for jid, _ in ran) == sorted(j.id for j in jobs + more)  # type: ignore[misc]
    late = {pid for jid, pid in ran if int(jid) in {j.id for j in more}}
    assert late == {str(staying.pid)}  # the stopped one took nothing after it left
    assert [w["pid"] for w in queue.workers()] == [staying.pid]
    # The handler tells of its run before it returns: the last completion may still be on
    # its way.
    wait_for(lambda: queue.counts("t")["complete"] == 200, timeout=10)
    assert doctor.check(queue).findings == []


def test_move_jobs_under_running_workers_of_both_types(queue: Queue, workers: Workers) -> None:
    # Leases no load outlasts: the blocking job is to be stopped twice, by the move and by
    # the cancel, not also by a lease lost to a process held up (two cores, under coverage).
    workers.start("thread", n=2, types=("a",), lease_ms=30_000)
    workers.start("thread", n=2, types=("b",), lease_ms=30_000)
    queue.pause("a")  # so that waiting jobs of a stay waiting while some are moved
    stay = queue.save_many(queue.create_job("a", {"i": i}) for i in range(20))
    go = queue.save_many(queue.create_job("a", {"i": i}) for i in range(20, 40))
    for job in go:
        job.move("b")
    queue.resume("a")
    running = queue.create_job("a", {"block": True}).save()
    wait_for(lambda: queue.counts("a")["complete"] == 20, timeout=20)
    # Its handler has begun, under a, then under b (each time it is stopped): a job is active
    # from its claim, and one moved or cancelled before its handler begins is never run.
    started = f"{queue.prefix}:started"
    wait_for(lambda: queue.client.lrange(started, 0, -1) == [str(running.id)], timeout=10)
    queue.move(running.id, "b", force=True)  # type: ignore[arg-type]
    wait_for(lambda: queue.counts("b")["complete"] == 20 and queue.count("active") == 1, timeout=20)
    # The moved blocking job runs under b now (and blocks there until cancelled).
    wait_for(lambda: queue.get_job(running.id).type == "b" and _state(queue, running) == "active")  # type: ignore[arg-type]
    wait_for(lambda: queue.client.llen(started) == 2, timeout=10)
    assert {queue.get_job(j.id).type for j in stay} == {"a"}  # type: ignore[arg-type]
    assert {queue.get_job(j.id).type for j in go} == {"b"}  # type: ignore[arg-type]
    assert len(set(_ran(queue))) == 40
    queue.cancel(running.id)  # type: ignore[arg-type]
    wait_for(lambda: queue.client.llen(f"{queue.prefix}:late") == 2)  # stopped twice: a, then b
    assert doctor.check(queue).findings == []
