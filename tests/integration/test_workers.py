"""Workers in this process: results, failures and retries, ttl, delayed jobs, shutdown."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from kue_core import InvalidJob, InvalidWorkerConfig, Job, NoRetry, Queue, defaults
from tests.conftest import wait_for


@pytest.fixture
def wq(redis_url: str, prefix: str) -> Iterator[Queue]:
    """A queue whose workers use a lease no load outlasts: these tests count attempts, runs
    and log lines, and none is about recovery; a process held up past a short lease (two
    cores, under coverage) rightly has its jobs run again. What a worker tells of itself
    changes with a heartbeat asked at once, not with the next periodic one."""
    q = Queue(redis_url, prefix=prefix, lease_ms=30_000)
    yield q
    q.close()


def commands_naming(r: redis.Redis, prefix: str, window: float, until: Any = lambda: False) -> int:
    """How many commands clients send Redis in the next ``window`` seconds (or until
    ``until()``) that name a key under ``prefix``, as ``MONITOR`` shows them (commands that
    scripts run inside Redis not counted)."""
    conn = r.connection_pool.get_connection()
    try:
        conn.send_command("MONITOR")
        assert conn.read_response() in (b"OK", "OK")
        heard, mark = 0, f'"{prefix}:'.encode()
        deadline = time.monotonic() + window
        while (left := deadline - time.monotonic()) > 0 and not until():
            if conn.can_read(timeout=min(left, 0.05)):
                line = conn.read_response()
                line = line.encode() if isinstance(line, str) else line
                heard += mark in line and b" lua]" not in line
        return heard
    finally:
        conn.disconnect()
        r.connection_pool.release(conn)


def _state(queue: Queue, job_id: int | None, state: str) -> bool:
    return queue.get_job(job_id).state == state  # type: ignore[arg-type]


def test_handler_result_progress_log_and_events(wq: Queue) -> None:
    heard: list[tuple[Any, ...]] = []
    wq.on("job complete", lambda jid, result: heard.append((jid, result)))

    def handler(job: Job) -> dict[str, Any]:
        job.progress(1, 2, {"step": "half"})
        job.log("working on %s", job.data["to"])
        return {"sent": job.data["to"]}

    job = wq.create_job("email", {"to": "a@b.c"}).save()
    wq.process("email", 1, handler)
    wait_for(lambda: (job.id, {"sent": "a@b.c"}) in heard)
    done = wq.get_job(job.id).to_dict()  # type: ignore[arg-type]
    assert done["state"] == "complete" and done["result"] == {"sent": "a@b.c"}
    assert done["progress"] == 100 and done["progress_data"] == {"step": "half"}
    assert done["attempts"] == {"made": 1, "remaining": 0, "max": 1}
    assert wq.get_log(job.id) == ["working on a@b.c"]  # type: ignore[arg-type]
    # Counted by the worker, soon after, in one pipeline that other reads may interleave with.
    wait_for(lambda: wq.work_time() == done["duration"])
    wait_for(lambda: wq.totals()["complete"] == {"email": 1})


def test_priority_then_fifo_with_one_slot(wq: Queue) -> None:
    order: list[int] = []
    jobs = [wq.create_job("t", {"n": i}).priority(p).save() for i, p in enumerate([0, 10, -10, 0])]
    wq.process("t", 1, lambda job: order.append(job.data["n"]))
    wait_for(lambda: len(order) == 4)
    assert order == [2, 0, 3, 1]
    wait_for(lambda: all(_state(wq, j.id, "complete") for j in jobs))  # the last report


def test_n_slots_run_at_once_sync_and_async(wq: Queue) -> None:
    running = {"sync": 0, "async": 0}
    peak = {"sync": 0, "async": 0}
    lock = threading.Lock()
    release = threading.Event()

    def enter(kind: str) -> None:
        with lock:
            running[kind] += 1
            peak[kind] = max(peak[kind], running[kind])

    def leave(kind: str) -> None:
        with lock:
            running[kind] -= 1

    def sync_handler(job: Job) -> None:
        enter("sync")
        release.wait(5)
        leave("sync")

    async def async_handler(job: Job) -> None:
        enter("async")
        while not release.is_set():
            await asyncio.sleep(0.005)
        leave("async")

    for _ in range(4):
        wq.create_job("s").save()
        wq.create_job("a").save()
    wq.process("s", 3, sync_handler)
    wq.process("a", 3, async_handler)
    wait_for(lambda: peak == {"sync": 3, "async": 3})
    release.set()
    wait_for(lambda: wq.count("complete") == 8)
    assert peak == {"sync": 3, "async": 3}


def _logged(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name.startswith("kue_core.worker.")]


def test_failure_keeps_message_and_traceback_then_retries_with_backoff(
    wq: Queue, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="kue_core.worker")
    attempts: list[str] = []
    wq.on("job failed attempt", lambda jid, msg, n: attempts.append(f"{msg}#{n}"))

    def handler(job: Job) -> None:
        raise ValueError(f"bad input {job.attempts_made + 1}")

    job = wq.create_job("t").attempts(3).backoff({"type": "exponential", "delay": 100}).save()
    wq.process("t", handler)
    wait_for(lambda: _state(wq, job.id, "failed"))
    done = wq.get_job(job.id)  # type: ignore[arg-type]
    assert done.attempts_made == 3
    assert (done.error or "").startswith("ValueError: bad input 3\nTraceback")
    assert "in handler" in (done.error or "")
    assert "kue_core/worker/" not in (done.error or "")  # the handler's frames only
    wait_for(lambda: len(attempts) == 2)
    assert attempts == ["ValueError: bad input 1#1", "ValueError: bad input 2#2"]
    history = wq.history(job.id)  # type: ignore[arg-type]
    delayed = [e for e in history if e["state"] == "delayed"]
    promoted = [e for e in history if e.get("from") == "delayed"]
    # exponential: delay/2 * (2^n - 1) -> 50 ms after the first failure, 150 after the second
    waits = [p["at"] - d["at"] for d, p in zip(delayed, promoted, strict=True)]
    assert len(waits) == 2 and waits[0] >= 50 and waits[1] >= 150  # never promoted early
    # The log says which attempt failed and what comes next, each once.
    last = f"job {job.id} (t) failed for good (attempt 3 of 3): ValueError: bad input 3"
    wait_for(lambda: last in _logged(caplog))
    assert _logged(caplog) == [
        f"job {job.id} (t) failed attempt 1 of 3, retrying (attempt 2 of 3) in 0.05 s: "
        "ValueError: bad input 1",
        f"job {job.id} (t) failed attempt 2 of 3, retrying (attempt 3 of 3) in 0.15 s: "
        "ValueError: bad input 2",
        last,
    ]


def test_no_retry_fails_at_once(wq: Queue, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="kue_core.worker")

    def handler(job: Job) -> None:
        raise NoRetry("card declined")

    job = wq.create_job("t").attempts(5).save()
    wq.process("t", handler)
    wait_for(lambda: _state(wq, job.id, "failed"))
    done = wq.get_job(job.id)  # type: ignore[arg-type]
    assert done.attempts_made == 1 and (done.error or "").startswith("NoRetry: card declined")
    line = f"job {job.id} (t) failed for good (attempt 1 of 5, not retried): NoRetry: card declined"
    wait_for(lambda: line in _logged(caplog))


def test_a_result_that_is_not_json_fails_the_attempt(wq: Queue) -> None:
    job = wq.create_job("t").save()
    wq.process("t", lambda job: object())
    wait_for(lambda: _state(wq, job.id, "failed"))
    error = wq.get_job(job.id).error or ""  # type: ignore[arg-type]
    assert error.startswith("InvalidJob: result must be JSON-serialisable")


def test_ttl_fails_a_sync_handler_and_drops_its_late_result(wq: Queue) -> None:
    release = threading.Event()
    finished = threading.Event()

    def handler(job: Job) -> str:
        release.wait(5)
        finished.set()
        return "late"

    job = wq.create_job("t").ttl(150).save()
    wq.process("t", handler)
    wait_for(lambda: _state(wq, job.id, "failed"))
    assert (wq.get_job(job.id).error or "").startswith("TTL exceeded")  # type: ignore[arg-type]
    release.set()
    wait_for(finished.is_set)
    after = wq.create_job("t").save()  # the slot is free again and keeps working
    wait_for(lambda: _state(wq, after.id, "complete"))
    late = wq.get_job(job.id)  # type: ignore[arg-type]
    assert late.state == "failed" and late.to_dict().get("result") is None


def test_ttl_cancels_an_async_handler_and_retries(wq: Queue) -> None:
    cancelled: list[int] = []

    async def handler(job: Job) -> str:
        if job.attempts_made == 0:
            try:
                await asyncio.sleep(5)
            except asyncio.CancelledError:
                cancelled.append(job.attempts_made)
                raise
        return "second time"

    job = wq.create_job("t").ttl(150).attempts(2).save()
    wq.process("t", handler)
    wait_for(lambda: _state(wq, job.id, "complete"))
    assert cancelled == [0]
    assert wq.get_job(job.id).to_dict()["result"] == "second time"  # type: ignore[arg-type]


def test_delayed_job_starts_on_time(wq: Queue, monkeypatch: pytest.MonkeyPatch) -> None:
    # The promoter has nothing scheduled and sleeps long: the save must wake it.
    monkeypatch.setattr(defaults, "PROMOTE_MAX_WAIT", 30.0)
    started: list[int] = []
    wq.process("t", lambda job: started.append(job.id))
    job = wq.create_job("t").delay(300).save()
    wait_for(lambda: started)
    done = wq.get_job(job.id)  # type: ignore[arg-type]
    lag = done.started_at - done.promote_at  # type: ignore[operator]
    # Not early, and woken by the save: the idle sleep alone would make it seconds late.
    assert 0 <= lag < 1000


def test_shutdown_gives_back_unfinished_jobs_and_lets_quick_ones_finish(wq: Queue) -> None:
    gate = threading.Event()
    began: list[int] = []

    def handler(job: Job) -> None:
        began.append(job.id)  # type: ignore[arg-type]
        if job.data["slow"]:
            gate.wait(5)

    slow = wq.create_job("t", {"slow": True}).save()
    quick = wq.create_job("t", {"slow": False}).save()
    wq.process("t", 2, handler)
    wait_for(lambda: len(began) == 2)
    wq.shutdown(timeout=0.3)
    assert _state(wq, quick.id, "complete")
    back = wq.get_job(slow.id)  # type: ignore[arg-type]
    assert back.state == "inactive" and back.attempts_made == 0
    assert wq.history(slow.id)[-1]["released"] is True  # type: ignore[arg-type]
    assert wq.workers() == []
    gate.set()


def test_idle_workers_shut_down_at_once(wq: Queue) -> None:
    wq.process("t", 4, lambda job: None)
    wait_for(lambda: wq.workers())
    wq.shutdown(timeout=5)  # blocked on Redis: CLIENT UNBLOCK ends their wait
    assert wq.workers() == []


def test_workers_are_listed_with_the_jobs_they_hold(wq: Queue) -> None:
    gate = threading.Event()
    job = wq.create_job("video").save()
    wq.process("video", 2, lambda job: gate.wait(5))
    wq.process("email", 1, lambda job: None)

    def listed() -> list[dict[str, Any]]:
        # The running job shows at once (it comes from the lease); the second process()
        # call's type, with the next heartbeat.
        types = {"video": 2, "email": 1}
        return [w for w in wq.workers() if w["jobs"] == [job.id] and w["types"] == types]

    (me,) = wait_for(listed)
    assert me["pid"] > 0 and me["host"] and me["heartbeat"] > 0
    gate.set()


def test_bad_process_arguments(wq: Queue) -> None:
    with pytest.raises(InvalidJob, match="concurrency"):
        wq.process("t", 0, lambda job: None)
    with pytest.raises(InvalidJob, match="handler"):
        wq.process("t", 1, "not callable")  # type: ignore[arg-type]
    with pytest.raises(InvalidJob, match="type"):
        wq.process("", 1, lambda job: None)
    with pytest.raises(InvalidJob, match="lease_ms"):
        Queue(client=wq.client, lease_ms=0)


def test_pause_stops_claims_without_spinning_and_resume_wakes_workers(
    redis_url: str, prefix: str, r: redis.Redis
) -> None:
    # The default lease: its keeper beats every 10 s and sweeps every 5 s, so what Redis
    # hears while the type is paused is the slots' doing (and a 1 s dependency sweep).
    with Queue(redis_url, prefix=prefix) as q:
        done: list[int] = []
        q.pause("t")
        job = q.create_job("t", {}).save()
        q.process("t", 2, lambda j: done.append(j.id))
        wait_for(lambda: q.workers())  # the worker process is up and has tried to claim

        # Start-up (registration, first sweeps, first claims) settles into quiet, 0.1 s in which
        # Redis hears nothing of this queue: a worker whose slots spun would never get there.
        wait_for(lambda: commands_naming(r, prefix, 0.1) == 0, timeout=10)
        # A window in which nothing may happen: no claim, and the idle slots block on Redis.
        # Counted by what names this queue's keys, not by the server's total: processes and
        # threads of earlier tests may still be talking to the shared test Redis.
        heard = commands_naming(r, prefix, 0.5, until=lambda: bool(done))
        assert not done
        assert heard < 20
        assert q.get_job(job.id).state == "inactive"  # type: ignore[arg-type]
        assert q.resume("t")
        wait_for(lambda: done == [job.id], timeout=2)


def test_run_needs_a_handler_and_the_main_thread(wq: Queue) -> None:
    with pytest.raises(InvalidWorkerConfig, match="give one first"):
        wq.run()
    wq.process("t", lambda job: None)
    errors: list[BaseException] = []

    def elsewhere() -> None:
        try:
            wq.run()
        except InvalidWorkerConfig as e:
            errors.append(e)

    thread = threading.Thread(target=elsewhere)
    thread.start()
    thread.join(10)
    assert len(errors) == 1 and "main thread" in str(errors[0])
    assert isinstance(errors[0], InvalidJob)  # what a wrong worker call raised before
    with pytest.raises(InvalidWorkerConfig, match=r"process\(type, n, handler\)"):
        wq.process("t", 2)  # type: ignore[call-overload]


def test_run_returns_when_the_worker_is_stopped_remotely(wq: Queue) -> None:
    before = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    job = wq.create_job("t").save()
    wq.process("t", lambda job: "done")
    wait_for(lambda: _state(wq, job.id, "complete") and wq.workers() != [])
    stopper = threading.Timer(0.2, wq.stop_worker, (wq.worker_id, 5))
    stopper.start()
    assert wq.run(5) is None  # no signal: stopped by stop_worker
    stopper.join()
    assert wq.workers() == []
    assert {sig: signal.getsignal(sig) for sig in before} == before  # handlers given back


def test_run_says_when_it_catches_signals(wq: Queue) -> None:
    """``ready`` is called once SIGTERM is caught: a supervisor that waits for what it says
    may send SIGTERM then, and gets a graceful stop."""
    before = signal.getsignal(signal.SIGTERM)
    seen: list[object] = []

    def ready() -> None:
        seen.append(signal.getsignal(signal.SIGTERM))
        os.kill(os.getpid(), signal.SIGTERM)  # at once: caught, not Python's default

    wq.process("t", lambda job: None)
    assert wq.run(5, ready=ready) == "SIGTERM"
    assert len(seen) == 1 and seen[0] is not before
    assert signal.getsignal(signal.SIGTERM) is before
    wq.process("t", lambda job: None)
    with pytest.raises(InvalidWorkerConfig, match="ready must be callable"):
        wq.run(5, ready="yes")  # type: ignore[arg-type]
    wq.shutdown(1)
