"""A worker held up between a claim and its handler's start (frozen by SIGSTOP, a long pause,
a suspended machine) past its lease: the job went back to the queue and another worker ran
it; the held-up worker must not start the handler a second time (#42). In a thread held up
on purpose, and in a worker process stopped by SIGSTOP right after the call that claimed."""

from __future__ import annotations

import logging
import signal
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from typing import Any

import psutil
import pytest

from kue_core import Job, Queue, doctor
from tests.conftest import after_worker_calls, wait_for

LEASE_MS = 400


@pytest.fixture
def frozen(redis_url: str, prefix: str) -> Iterator[Queue]:
    q = Queue(redis_url, prefix=prefix, lease_ms=LEASE_MS, worker_id="frozen")
    yield q
    q.close()


@pytest.fixture
def other(redis_url: str, prefix: str) -> Iterator[Queue]:
    q = Queue(redis_url, prefix=prefix, lease_ms=LEASE_MS, worker_id="other")
    yield q
    q.close()


def test_a_claim_held_up_past_its_lease_is_not_run(
    frozen: Queue,
    other: Queue,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    ran: dict[str, list[int]] = {"frozen": [], "other": []}
    claimed, thaw = threading.Event(), threading.Event()
    calls = [0]

    def claim_then_freeze(c: Any, reply: Any) -> None:
        if c.name != "claim":
            return
        calls[0] += 1
        if isinstance(reply, tuple) and not claimed.is_set():
            claimed.set()
            loop = frozen._workers.loop  # type: ignore[union-attr]
            if loop is not None and not loop.here():
                # A def slot served by a thread of its own (the only slot): the loop, the
                # keeper's task with it, stands still too, as a frozen process's would.
                loop.loop.call_soon_threadsafe(thaw.wait, 30)
            thaw.wait(30)  # the whole slot stands still, as a frozen process's would

    after_worker_calls(monkeypatch, frozen, claim_then_freeze)

    def handler(name: str) -> Any:
        def run(job: Job) -> str:
            ran[name].append(job.id)  # type: ignore[arg-type]
            return name

        return run

    caplog.set_level(logging.WARNING, logger="kue_core.worker")
    frozen.process("t", handler("frozen"))
    job = frozen.create_job("t").save()
    assert claimed.wait(10)
    # Past the lease, the job goes back to the queue, and the other worker runs it.
    other.process("t", handler("other"))
    wait_for(lambda: frozen.get_job(job.id).state == "complete", timeout=20)  # type: ignore[arg-type]
    assert frozen.get_job(job.id).result == "other"  # type: ignore[arg-type]
    before = calls[0]
    thaw.set()
    wait_for(lambda: calls[0] > before)  # the held-up slot has gone on to its next claim
    assert ran == {"frozen": [], "other": [job.id]}
    assert any(
        f"job {job.id} (t): claimed" in r.getMessage() and "not run here" in r.getMessage()
        for r in caplog.records
    )
    assert frozen.get_job(job.id).state == "complete"  # type: ignore[arg-type]
    assert doctor.check(frozen).findings == []


def test_a_claim_held_up_within_its_lease_runs(
    frozen: Queue, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Asked of Redis once the lease may have lapsed, the job is still this worker's (nothing
    recovered it): its lease is renewed and it runs."""
    ran: list[int] = []
    held = threading.Event()

    def claim_then_wait(c: Any, reply: Any) -> None:
        if c.name == "claim" and isinstance(reply, tuple) and not held.is_set():
            held.set()
            threading.Event().wait(LEASE_MS / 1000 / 2)  # a hold-up, shorter than the lease

    after_worker_calls(monkeypatch, frozen, claim_then_wait)
    frozen.process("t", lambda job: ran.append(job.id))
    job = frozen.create_job("t").save()
    wait_for(lambda: frozen.get_job(job.id).state == "complete")  # type: ignore[arg-type]
    assert ran == [job.id]


# A worker process of one slot: a job whose data has "hold" runs until <prefix>:go exists;
# every job records "<id>:<pid>" in <prefix>:ran and returns the pid. With "freeze" as its
# fourth argument, the process stops itself (SIGSTOP) as soon as a report of a finished job
# has claimed a job whose data has "freeze": between that claim and the handler's start. The
# thread that stopped it goes on only once SIGCONT came (every thread blocks SIGCONT, and
# that one waits for it): a stop takes effect a moment after the kill that asked for it.
FREEZING_WORKER = """
import os, signal, sys, threading, time
from kue_core import Queue
from kue_core.store.aio_transport import AsyncTransport
from kue_core.store.transport import Transport

url, prefix, lease, mode = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
if mode == "freeze":
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGCONT})  # before any thread starts
    real = Transport.call

    def complete_then_stop(self, c):
        reply = real(self, c)
        claimed = reply.next_job if c.name == "complete" else None
        if isinstance(claimed, tuple) and "freeze" in claimed[1].get("data", ""):
            os.kill(os.getpid(), signal.SIGSTOP)
            signal.sigwait({signal.SIGCONT})
        return reply

    Transport.call = complete_then_stop
    real_async = AsyncTransport.call

    async def complete_then_stop_async(self, c):  # runtime="loop": on the worker's loop
        reply = await real_async(self, c)
        claimed = reply.next_job if c.name == "complete" else None
        if isinstance(claimed, tuple) and "freeze" in claimed[1].get("data", ""):
            os.kill(os.getpid(), signal.SIGSTOP)
            signal.sigwait({signal.SIGCONT})
        return reply

    AsyncTransport.call = complete_then_stop_async
queue = Queue(url, prefix=prefix, lease_ms=lease)
stop = threading.Event()
signal.signal(signal.SIGTERM, lambda *a: stop.set())

def handler(job):
    while job.data.get("hold") and not queue.client.exists(prefix + ":go"):
        time.sleep(0.005)
    queue.client.rpush(prefix + ":ran", f"{job.id}:{os.getpid()}")
    return os.getpid()

queue.process("t", 1, handler)
print("ready", flush=True)
stop.wait()
queue.shutdown(timeout=5)
queue.close()
"""


class _Worker:
    """A worker subprocess whose stderr is read as it comes."""

    def __init__(self, redis_url: str, prefix: str, mode: str) -> None:
        argv = [sys.executable, "-c", textwrap.dedent(FREEZING_WORKER), redis_url, prefix]
        argv += [str(LEASE_MS * 2), mode]
        self.proc = subprocess.Popen(
            argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        self.err: list[str] = []
        assert self.proc.stdout is not None and self.proc.stdout.readline().strip() == "ready"
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.err.append(line)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=10)


@pytest.mark.slow
def test_a_process_stopped_between_its_claim_and_the_handler_does_not_run_the_job(
    redis_url: str, prefix: str, queue: Queue
) -> None:
    ran = f"{prefix}:ran"
    frozen = _Worker(redis_url, prefix, "freeze")
    workers = [frozen]
    try:
        first = queue.create_job("t", {"hold": True}).save()
        wait_for(lambda: queue.get_job(first.id).state == "active")  # type: ignore[arg-type]
        job = queue.create_job("t", {"freeze": True}).save()  # waits: the only slot is busy
        queue.client.set(f"{prefix}:go", 1)  # the first ends; its report claims the second
        wait_for(lambda: psutil.Process(frozen.proc.pid).status() == psutil.STATUS_STOPPED)
        assert queue.get_job(job.id).state == "active"  # type: ignore[arg-type]
        # Past its lease the job goes back to the queue, and another worker runs it.
        other = _Worker(redis_url, prefix, "plain")
        workers.append(other)
        wait_for(lambda: queue.get_job(job.id).state == "complete", timeout=20)  # type: ignore[arg-type]
        assert queue.get_job(job.id).result == other.proc.pid  # type: ignore[arg-type]
        frozen.proc.send_signal(signal.SIGCONT)
        wait_for(lambda: any("not run here" in line for line in frozen.err))
        assert f"job {job.id} (t): claimed" in "".join(frozen.err)
        after = queue.create_job("t").save()  # and both go on working
        wait_for(lambda: queue.get_job(after.id).state == "complete")  # type: ignore[arg-type]
        runs = queue.client.lrange(ran, 0, -1)
        assert [r for r in runs if r.startswith(f"{job.id}:")] == [f"{job.id}:{other.proc.pid}"]
        assert f"{first.id}:{frozen.proc.pid}" in runs
        for w in workers:
            w.proc.send_signal(signal.SIGTERM)
            assert w.proc.wait(timeout=15) == 0
        assert doctor.check(queue).findings == []
    finally:
        for w in workers:
            w.close()
