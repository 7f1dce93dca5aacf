"""A worker process of one slot claims its next job while a quick handler runs
(``kue_core.worker.ahead``: ``QUICK_S``, ``HOLD_S``), an ``async def`` slot on the event loop
and a ``def`` slot in its thread alike: the job claimed ahead runs next, goes back when the
handler turns out slow, is not run once cancelled, goes back at shutdown, and comes back
through its lease when the process is killed."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from kue_core import Job, Queue, doctor
from kue_core.store.transport import Transport
from kue_core.worker import ahead
from tests.conftest import kill_worker_when, wait_for


@pytest.fixture(params=["async", "def"])
def kind(request: pytest.FixtureRequest) -> str:
    """The slot's handler: ``async def`` (on the loop) or ``def`` (in the slot's thread)."""
    return str(request.param)


@pytest.fixture
def lq(redis_url: str, prefix: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[Queue]:
    # Every handler counts as quick, whatever the machine's load does to its time.
    monkeypatch.setattr(ahead, "QUICK_S", 60.0)
    q = Queue(redis_url, prefix=prefix, lease_ms=5000, runtime="loop")
    yield q
    q.close()


class Blocking:
    """A handler quick on every job but the one of ``data["i"] == stop``, which waits for
    ``go``; it records the ids it ran, in order."""

    def __init__(self, stop: int = 2) -> None:
        self.stop = stop
        self.ran: list[int] = []
        self.began = threading.Event()
        self.go = threading.Event()

    def __call__(self, job: Job) -> None:
        self.ran.append(job.id)  # type: ignore[arg-type]
        if job.data["i"] == self.stop:
            self.began.set()
            assert self.go.wait(30)


def _jobs(q: Queue, n: int) -> list[Job]:
    return q.save_many([q.create_job("t", {"i": i}) for i in range(n)])


def _state(q: Queue, job: Job) -> str:
    return q.get_job(job.id).state  # type: ignore[arg-type]


def _held_ahead(
    lq: Queue, monkeypatch: pytest.MonkeyPatch, kind: str
) -> tuple[list[Job], Blocking]:
    """Five jobs on one slot: job 2 blocks until ``handler.go``, and job 3 is claimed ahead,
    held behind it (``HOLD_S`` long)."""
    monkeypatch.setattr(ahead, "HOLD_S", 60.0)
    jobs = _jobs(lq, 5)
    handler = Blocking()
    lq.process("t", 1, _of(kind, handler))
    assert handler.began.wait(15)
    wait_for(lambda: _state(lq, jobs[3]) == "active")
    return jobs, handler


def test_the_next_job_is_claimed_while_a_quick_one_runs(
    lq: Queue, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    jobs, handler = _held_ahead(lq, monkeypatch, kind)
    # Job 2 runs, and job 3 is held ahead for the slot: two active jobs with one slot.
    assert lq.count("active") == 2 and _state(lq, jobs[4]) == "inactive"
    handler.go.set()
    wait_for(lambda: lq.count("complete") == 5)
    assert handler.ran == [j.id for j in jobs]
    assert all(lq.get_job(j.id).attempts_made == 1 for j in jobs)  # type: ignore[arg-type]
    assert doctor.check(lq).findings == []


def test_a_job_claimed_ahead_goes_back_when_the_handler_is_slow(
    lq: Queue, redis_url: str, prefix: str, kind: str
) -> None:
    """Behind a handler past ``HOLD_S``, the job claimed ahead waits again, for any worker:
    here another process's slot runs it while the slow handler still runs."""
    jobs = _jobs(lq, 5)
    handler = Blocking()
    lq.process("t", 1, _of(kind, handler))
    assert handler.began.wait(15)
    wait_for(lambda: _state(lq, jobs[3]) == "inactive" and lq.count("active") == 1)
    history = lq.history(jobs[3].id)  # type: ignore[arg-type]
    assert any(h.get("released") for h in history), history
    ran: list[int] = []
    with Queue(redis_url, prefix=prefix, runtime="loop") as other:
        other.process("t", 1, lambda j: ran.append(j.id))
        wait_for(lambda: len(ran) == 2)
        other.shutdown()
    assert ran == [jobs[3].id, jobs[4].id]
    handler.go.set()
    wait_for(lambda: lq.count("complete") == 5)
    assert handler.ran == [j.id for j in jobs[:3]]
    assert lq.get_job(jobs[3].id).attempts_made == 1  # type: ignore[arg-type]


def _of(kind: str, handler: Blocking) -> Any:
    """``handler`` as a ``def`` function, or as an ``async def`` one whose blocking job awaits
    ``go`` in a thread."""
    if kind == "def":
        return handler

    async def run(job: Job) -> None:
        handler.ran.append(job.id)  # type: ignore[arg-type]
        if job.data["i"] == handler.stop:
            handler.began.set()
            assert await asyncio.to_thread(handler.go.wait, 30)

    return run


def test_a_job_cancelled_while_claimed_ahead_is_not_run(
    lq: Queue, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    jobs, handler = _held_ahead(lq, monkeypatch, kind)
    key = (jobs[3].id, lq.client.hget(lq.keys.job(jobs[3].id), "lease"))  # type: ignore[arg-type]
    lq.cancel(jobs[3].id, "not wanted")  # type: ignore[arg-type]
    # The worker hears of it on its control channel, a moment later, and notes it for when
    # the job comes up.
    state = lq._workers.state  # type: ignore[union-attr]
    wait_for(lambda: key in state.ended_early)
    handler.go.set()
    wait_for(lambda: lq.count("complete") == 4)
    assert jobs[3].id not in handler.ran
    assert _state(lq, jobs[3]) == "failed"
    assert doctor.check(lq).findings == []


def test_shutdown_gives_back_a_job_claimed_ahead(
    lq: Queue, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    jobs, handler = _held_ahead(lq, monkeypatch, kind)
    stopping = threading.Thread(target=lq.shutdown, args=(0.2,))
    stopping.start()
    stopping.join(30)
    handler.go.set()
    assert not stopping.is_alive()
    # The running job and the one claimed ahead wait again, no attempt counted for either.
    assert [_state(lq, j) for j in jobs[2:]] == ["inactive"] * 3
    assert [lq.get_job(j.id).attempts_made for j in jobs[2:4]] == [0, 0]  # type: ignore[arg-type]
    assert doctor.check(lq).findings == []


WORKER = """
import asyncio, sys, threading, time
from kue_core import Queue
from kue_core.worker import ahead
ahead.QUICK_S = ahead.HOLD_S = 600.0  # claims ahead, and holds the job claimed
prefix = sys.argv[2]
queue = Queue(sys.argv[1], prefix=prefix, lease_ms=800, runtime="loop")

async def handler(job):  # job 2 runs until <prefix>:go is set
    queue.client.rpush(prefix + ":ran", job.id)
    while job.data.get("i") == 2 and not queue.client.exists(prefix + ":go"):
        await asyncio.sleep(0.01)

def def_handler(job):
    queue.client.rpush(prefix + ":ran", job.id)
    while job.data.get("i") == 2 and not queue.client.exists(prefix + ":go"):
        time.sleep(0.01)

queue.process("t", 1, handler if sys.argv[3] == "async" else def_handler)
print("ready", flush=True)
threading.Event().wait()
"""


@pytest.mark.slow
@pytest.mark.parametrize("handler", ["async", "def"])
def test_jobs_claimed_ahead_by_a_killed_worker_come_back(
    queue: Queue, redis_url: str, handler: str
) -> None:
    """A worker killed (SIGKILL) while it runs one job and holds the next: both come back
    once its lease expires, and complete elsewhere, once each; the doctor finds nothing."""
    prefix = queue.prefix
    jobs = _jobs(queue, 5)

    def holding() -> bool:  # three ran, the third runs, and the fourth is held ahead
        ran = queue.client.llen(f"{prefix}:ran")
        return bool(ran == 3 and queue.count("active") == 2)

    kill_worker_when(WORKER, holding, redis_url, prefix, handler)
    ran: list[Any] = []
    with Queue(redis_url, prefix=prefix, runtime="loop") as other:
        other.process("t", 2, lambda j: ran.append(j.id))
        wait_for(lambda: queue.count("complete") == 5, timeout=30)
        other.shutdown()
    assert sorted(ran) == [j.id for j in jobs[2:]]
    found = doctor.check(queue).findings
    assert [f.kind for f in found] in ([], ["gone-worker"])


def test_jobs_that_come_one_by_one_are_not_claimed_ahead(
    lq: Queue, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    """An idle slot's jobs, saved one at a time, are not claimed ahead: such a claim would
    find nothing, and cost Redis a call a job."""
    made: list[object] = []

    class Counted(ahead.Ahead):
        def __init__(self, *args: Any) -> None:
            super().__init__(*args)
            made.append(self)

    posting = Transport.post

    def post(self: Transport, *args: Any) -> Any:
        made.append(args)
        return posting(self, *args)

    monkeypatch.setattr(ahead, "Ahead", Counted)
    monkeypatch.setattr(Transport, "post", post)
    lq.process("t", 1, _of(kind, Blocking(stop=-1)))
    for i in range(4):
        job = lq.create_job("t", {"i": i}).save()
        wait_for(lambda job=job: _state(lq, job) == "complete")  # type: ignore[misc]
    assert made == []
    # A backlog is claimed ahead (the same worker, the same handler).
    _jobs(lq, 6)
    wait_for(lambda: lq.count("complete") == 10)
    assert made


@pytest.mark.slow
@pytest.mark.parametrize("handler", ["async", "def"])
def test_a_job_claimed_ahead_by_a_worker_paused_past_its_lease_is_not_run_there(
    queue: Queue, redis_url: str, handler: str
) -> None:
    """A worker stopped (SIGSTOP) past its lease while it runs one job and holds the next:
    both go back and complete elsewhere; resumed, the worker does not run the job it held,
    and goes on with new ones; the doctor finds nothing."""
    prefix = queue.prefix
    jobs = _jobs(queue, 5)
    argv = [sys.executable, "-c", WORKER, redis_url, prefix, handler]
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        # Three ran, the third runs, and the fourth is held ahead.
        wait_for(lambda: queue.client.llen(f"{prefix}:ran") == 3 and queue.count("active") == 2)
        proc.send_signal(signal.SIGSTOP)
        ran: list[Any] = []
        try:
            with Queue(redis_url, prefix=prefix, runtime="loop") as other:
                other.process("t", 2, lambda j: ran.append(j.id))
                wait_for(lambda: sorted(ran) == [j.id for j in jobs[2:]], timeout=30)
                other.shutdown()
        finally:
            queue.client.set(f"{prefix}:go", 1)
            proc.send_signal(signal.SIGCONT)
        after = queue.create_job("t", {"i": 5}).save()  # run by the resumed worker only
        wait_for(lambda: _state(queue, after) == "complete", timeout=30)
        frozen = [int(i) for i in queue.client.lrange(f"{prefix}:ran", 0, -1)]
        assert frozen == [*(j.id for j in jobs[:3]), after.id]  # not the one it held
        assert all(_state(queue, j) == "complete" for j in jobs)
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=15)
    finally:
        if proc.poll() is None:
            proc.kill()
    found = doctor.check(queue).findings
    assert [f.kind for f in found] in ([], ["gone-worker"])
