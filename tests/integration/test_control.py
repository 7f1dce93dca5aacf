"""Job control from Python: cancel (wherever the job is), move, edit a waiting job, local
pause, middleware, and stopping a worker process remotely. The real-process faults are in
``test_control_faults.py``."""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from kue_core import InvalidJob, InvalidTransition, Job, JobNotFound, NoRetry, Queue, WorkerNotFound
from tests.conftest import after_worker_calls, never, wait_for
from tests.integration import isolated_handlers


@pytest.fixture
def wq(redis_url: str, prefix: str) -> Iterator[Queue]:
    # A lease no load outlasts: the tests count handlers and middleware calls, none lets a
    # lease expire, and a process held up past a short one (two cores, under coverage)
    # rightly has its jobs run again.
    q = Queue(redis_url, prefix=prefix, lease_ms=30_000)
    yield q
    q.close()


@pytest.fixture
def other(client: Any) -> Any:
    """Another client of the same queue: the operator, apart from the workers; each of
    ``Queue`` and ``AsyncQueue`` in turn (see ``client`` in tests/conftest.py)."""
    return client


def _state(queue: Queue, job: Job) -> str | None:
    assert job.id is not None
    return queue.get_job(job.id).state


# -- cancel ------------------------------------------------------------------------------
@pytest.mark.parametrize("how", ["inactive", "delayed", "failed"])
def test_cancel_a_job_that_is_not_running(queue: Queue, how: str) -> None:
    job = queue.create_job("t", {"n": 1})
    if how == "delayed":
        job.delay(60_000)
    job.save()
    if how == "failed":
        job.set_state("failed")
    heard: list[tuple[Any, ...]] = []
    queue.on("job cancelled", lambda *a: heard.append(("cancelled", *a)))
    queue.on("job failed", lambda *a: heard.append(("failed", *a)))
    job.cancel("customer asked")
    assert job.state == "failed" and job.error == "cancelled: customer asked"
    assert job.id in queue.ids("failed") and job.id not in queue.ids(
        how if how != "failed" else "inactive"
    )
    assert queue.counts("t")[how if how != "failed" else "inactive"] == 0
    last = job.history()[-1]
    assert (
        last["state"] == "failed" and last["from"] == how and last["cancelled"] == "customer asked"
    )
    wait_for(lambda: len(heard) == 2)
    assert heard == [
        ("cancelled", job.id, "customer asked"),
        ("failed", job.id, "cancelled: customer asked"),
    ]


def test_cancel_without_a_reason_and_the_refusals(queue: Queue) -> None:
    job = queue.create_job("t").save()
    assert queue.cancel(job.id).error == "cancelled"  # type: ignore[arg-type]
    done = queue.create_job("t").save()
    done.set_state("complete")
    with pytest.raises(InvalidTransition, match="complete"):
        done.cancel()
    assert _state(queue, done) == "complete"
    with pytest.raises(JobNotFound):
        queue.cancel(10**9)
    waiting = queue.create_job("t").save()
    for bad in (3, "x" * 1001, "\ud800"):
        with pytest.raises(InvalidJob):
            queue.cancel(waiting.id, bad)  # type: ignore[arg-type]
    assert _state(queue, waiting) == "inactive" and len(waiting.history()) == 1


def test_a_cancelled_job_is_not_retried_and_can_be_retried_by_hand(queue: Queue) -> None:
    job = queue.create_job("t").attempts(5).save()
    job.cancel("stop")
    assert queue.count("failed", "t") == 1 and queue.count("inactive", "t") == 0
    job.set_state("inactive")  # an operator's retry
    assert _state(queue, job) == "inactive"


# -- retry and promote ------------------------------------------------------------------
def test_retry_a_failed_or_complete_job_and_promote_a_delayed_one(queue: Queue) -> None:
    failed = queue.create_job("t").attempts(2).save()
    failed.set_state("failed")
    done = queue.create_job("t").save()
    done.set_state("complete")
    later = queue.create_job("t").delay(3_600_000).save()
    heard: list[Any] = []
    queue.on("job enqueue", lambda *a: heard.append(a[0]))
    assert failed.retry() is failed and failed.state == "inactive"
    assert failed.attempts_made == 0 and failed.history()[-1]["from"] == "failed"
    assert queue.retry(done.id).state == "inactive"  # type: ignore[arg-type]
    assert later.promote().state == "inactive" and queue.ids("delayed") == []
    assert queue.ids("inactive", "t") == [failed.id, done.id, later.id]
    wait_for(lambda: sorted(heard) == [failed.id, done.id, later.id])


def test_retry_and_promote_refuse_other_states_and_change_nothing(queue: Queue) -> None:
    waiting = queue.create_job("t").save()
    later = queue.create_job("t").delay(3_600_000).save()
    kept = waiting.history(), later.history()
    with pytest.raises(InvalidTransition, match=f"job {waiting.id} is inactive, not failed or"):
        waiting.retry()
    with pytest.raises(InvalidTransition, match=f"job {later.id} is delayed, not failed or"):
        queue.retry(later.id)  # type: ignore[arg-type]
    with pytest.raises(InvalidTransition, match=f"job {waiting.id} is inactive, not delayed"):
        queue.promote(waiting.id)  # type: ignore[arg-type]
    assert (waiting.history(), later.history()) == kept
    assert (_state(queue, waiting), _state(queue, later)) == ("inactive", "delayed")
    with pytest.raises(JobNotFound):
        queue.retry(10**9)
    for bad in ("x", 0, -1, None):
        with pytest.raises(InvalidJob):
            queue.promote(bad)  # type: ignore[arg-type]


def test_a_running_job_is_not_retried_under_its_worker(wq: Queue, other: Queue) -> None:
    """A second retry of a job that a worker took meanwhile is refused by the script that
    would move it: the worker keeps its lease and completes the job."""
    release = threading.Event()
    job = other.create_job("t").save()
    job.set_state("failed")
    wq.process("t", lambda j: release.wait(10))
    other.retry(job.id)
    wait_for(lambda: _state(other, job) == "active")
    with pytest.raises(InvalidTransition, match="is active"):
        other.retry(job.id)
    release.set()
    wait_for(lambda: _state(other, job) == "complete")
    wq.shutdown(1)


def test_cancel_a_running_thread_handler(wq: Queue, other: Queue) -> None:
    started = threading.Event()
    saw_stop: list[float] = []
    results: list[Any] = []

    def handler(job: Job) -> str:
        results.append(threading.get_ident())
        if job.data.get("quick"):
            return "quick"
        started.set()
        while not job.stopping:
            time.sleep(0.005)
        saw_stop.append(time.monotonic())
        return "late result"

    job = wq.create_job("t").save()
    wq.process("t", 1, handler)
    assert started.wait(5)
    asked = time.monotonic()
    other.cancel(job.id, "no longer needed")  # type: ignore[arg-type]
    wait_for(lambda: saw_stop)
    assert saw_stop[0] - asked < 1.0  # pub/sub, not the next heartbeat (every 10 s)
    after = wq.create_job("t", {"quick": True}).save()
    wait_for(lambda: _state(wq, after) == "complete")
    done = wq.get_job(job.id)  # type: ignore[arg-type]
    assert done.state == "failed" and done.error == "cancelled: no longer needed"
    assert "result" not in done.to_dict()  # the late result was refused
    # The handler returned within STOP_GRACE of being told: its slot kept its thread.
    assert wq.workers()[0]["abandoned_threads"] == 0


def test_cancel_a_running_async_handler(wq: Queue, other: Queue) -> None:
    started = threading.Event()
    outcome: list[str] = []

    async def handler(job: Job) -> str:
        if job.data.get("quick"):
            return "quick"
        started.set()
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            outcome.append("cancelled")
            raise
        return "never"

    job = wq.create_job("t").save()
    wq.process("t", 1, handler)
    assert started.wait(5)
    other.cancel(job.id)  # type: ignore[arg-type]
    wait_for(lambda: outcome == ["cancelled"], timeout=2)
    after = wq.create_job("t", {"quick": True}).save()
    wait_for(lambda: _state(wq, after) == "complete")
    assert wq.get_job(job.id).error == "cancelled"  # type: ignore[arg-type]


@pytest.mark.slow
def test_cancel_a_running_process_isolated_handler(wq: Queue, other: Queue) -> None:
    job = wq.create_job("t", {"n": 1}).save()
    wq.process("t", 1, isolated_handlers.hang, isolation="process")
    wait_for(lambda: wq.get_log(job.id), timeout=30)  # type: ignore[arg-type]
    child = int(wq.get_log(job.id)[0].split()[1])  # type: ignore[arg-type]
    other.cancel(job.id, "killed")  # type: ignore[arg-type]
    wait_for(lambda: not _alive(child), timeout=5)
    wq.process("u", 1, isolated_handlers.double, isolation="process")
    after = wq.create_job("t", {"n": 2}).save()
    wait_for(lambda: wq.get_log(after.id), timeout=30)  # the slot took the next job  # type: ignore[arg-type]
    assert wq.get_job(job.id).error == "cancelled: killed"  # type: ignore[arg-type]
    # The next job hangs too: cancelled, so that the worker's shutdown does not wait for it.
    other.cancel(after.id)  # type: ignore[arg-type]
    wait_for(lambda: _state(wq, after) == "failed")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is gone for our purpose
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split()[2] != "Z"
    except OSError:
        return False


def test_cancel_racing_completion_ends_in_exactly_one_outcome(wq: Queue, other: Queue) -> None:
    wq.process("t", 4, lambda job: "done")
    outcomes = []
    for _ in range(40):
        job = other.create_job("t").save()
        with contextlib.suppress(InvalidTransition):  # it may have completed first
            other.cancel(job.id)  # type: ignore[arg-type]
        wait_for(lambda j=job: _state(other, j) in ("complete", "failed"))
        assert never(lambda j=job: _state(other, j) not in ("complete", "failed"), 0.02)
        final = other.get_job(job.id)  # type: ignore[arg-type]
        ends = [h for h in final.history() if h["state"] in ("complete", "failed")]
        assert len(ends) == 1, final.history()
        if final.state == "failed":
            assert final.error == "cancelled" and "result" not in final.to_dict()
        outcomes.append(final.state)
    assert set(outcomes) <= {"complete", "failed"}


# -- move --------------------------------------------------------------------------------
def test_move_a_waiting_job_to_another_type(queue: Queue) -> None:
    job = queue.create_job("a", {"n": 1}).priority("high").save()
    heard: list[tuple[Any, ...]] = []
    queue.on("job moved", lambda *a: heard.append(a))
    job.move("b")
    assert (job.type, job.state, job.priority(), job.data) == ("b", "inactive", -10, {"n": 1})
    assert queue.ids("inactive", "b") == [job.id] and queue.ids("inactive", "a") == []
    assert "b" in queue.types()
    assert job.history()[-1]["moved"] == {"from": "a", "to": "b"}
    wait_for(lambda: heard == [(job.id, "a")])
    done: list[int] = []
    queue.process("b", lambda j: done.append(j.id))
    wait_for(lambda: done == [job.id])


def test_move_keeps_a_delayed_or_failed_job_in_its_state(queue: Queue) -> None:
    delayed = queue.create_job("a").delay(60_000).save()
    failed = queue.create_job("a").save()
    failed.set_state("failed")
    assert delayed.move("b").state == "delayed" and queue.ids("delayed", "b") == [delayed.id]
    assert failed.move("b").state == "failed" and queue.ids("failed", "b") == [failed.id]
    assert queue.counts("a") == {s: 0 for s in queue.counts("a")}
    same = delayed.history()
    delayed.move("b")  # already there: nothing written
    assert delayed.history() == same
    with pytest.raises(InvalidJob):
        delayed.move("")
    with pytest.raises(JobNotFound):
        queue.move(10**9, "b")


def test_move_a_running_job(wq: Queue, other: Queue) -> None:
    started = threading.Event()
    stopped = threading.Event()
    ran_in_b: list[int] = []

    def slow(job: Job) -> None:
        started.set()
        while not job.stopping:
            time.sleep(0.005)
        stopped.set()

    job = wq.create_job("a").save()
    wq.process("a", 1, slow)
    wq.process("b", 1, lambda j: ran_in_b.append(j.id))
    assert started.wait(5)
    with pytest.raises(InvalidTransition, match="running"):
        other.move(job.id, "b")  # type: ignore[arg-type]
    assert _state(other, job) == "active"
    other.move(job.id, "b", force=True)  # type: ignore[arg-type]
    assert stopped.wait(2)
    wait_for(lambda: ran_in_b == [job.id])
    wait_for(lambda: _state(other, job) == "complete")
    assert other.get_job(job.id).type == "b"  # type: ignore[arg-type]


# -- edit --------------------------------------------------------------------------------
def test_edit_the_data_of_a_waiting_or_failed_job(queue: Queue) -> None:
    job = queue.create_job("t", {"to": "a@x"}).save()
    job.update_data({"to": "b@x"})
    assert job.data == {"to": "b@x"} and queue.get_job(job.id).data == {"to": "b@x"}  # type: ignore[arg-type]
    assert job.history()[-1] == {"state": "inactive", "at": job.history()[-1]["at"], "edited": True}
    job.set_state("failed")
    queue.update_data(job.id, [1, 2])  # type: ignore[arg-type]
    assert queue.get_job(job.id).data == [1, 2]  # type: ignore[arg-type]
    with pytest.raises(InvalidJob):
        job.update_data({1, 2})
    job.set_state("complete")
    with pytest.raises(InvalidTransition):
        job.update_data({})
    assert queue.get_job(job.id).data == [1, 2]  # type: ignore[arg-type]


def test_edit_of_a_running_job_is_refused(wq: Queue) -> None:
    release = threading.Event()
    job = wq.create_job("t", {"v": 1}).save()
    wq.process("t", lambda j: release.wait(5))
    wait_for(lambda: _state(wq, job) == "active")
    with pytest.raises(InvalidTransition, match="active"):
        job.update_data({"v": 2})
    release.set()
    wait_for(lambda: _state(wq, job) == "complete")
    assert wq.get_job(job.id).data == {"v": 1}  # type: ignore[arg-type]


# -- middleware --------------------------------------------------------------------------
def test_middleware_wraps_handlers_in_the_order_added(wq: Queue) -> None:
    calls: list[str] = []

    def outer(job: Job, call_next: Any) -> Any:
        calls.append("outer in")
        result = call_next()
        calls.append("outer out")
        return {"outer": result}

    def inner(job: Job, call_next: Any) -> Any:
        calls.append(f"inner {job.data['n']}")
        return call_next()

    wq.use(outer).use(inner)
    assert wq.middleware == (outer, inner)
    job = wq.create_job("t", {"n": 7}).save()
    wq.process("t", lambda j: calls.append("handler") or j.data["n"])
    wait_for(lambda: _state(wq, job) == "complete")
    assert calls == ["outer in", "inner 7", "handler", "outer out"]
    assert wq.get_job(job.id).result == {"outer": 7}  # type: ignore[arg-type]


def test_a_failing_or_refusing_middleware_fails_the_attempt(wq: Queue) -> None:
    ran: list[int] = []

    def refuse_odd(job: Job, call_next: Any) -> Any:
        if job.data["n"] % 2:
            raise NoRetry(f"odd {job.data['n']}")
        return call_next()

    wq.use(refuse_odd)
    a = wq.create_job("t", {"n": 1}).attempts(3).save()
    b = wq.create_job("t", {"n": 2}).save()
    wq.process("t", lambda j: ran.append(j.data["n"]))
    wait_for(lambda: _state(wq, a) == "failed" and _state(wq, b) == "complete")
    assert ran == [2] and wq.get_job(a.id).error.startswith("NoRetry: odd 1")  # type: ignore[arg-type, union-attr]


def test_async_middleware_wraps_async_handlers(wq: Queue) -> None:
    seen: list[str] = []

    def plain(job: Job, call_next: Any) -> Any:
        seen.append("plain")
        return call_next()

    async def awaited(job: Job, call_next: Any) -> Any:
        seen.append("async")
        return [await call_next()]

    async def handler(job: Job) -> int:
        await asyncio.sleep(0)
        return 5

    wq.use(plain).use(awaited)
    job = wq.create_job("t").save()
    wq.process("t", handler)
    wait_for(lambda: _state(wq, job) == "complete")
    assert seen == ["plain", "async"] and wq.get_job(job.id).result == [5]  # type: ignore[arg-type]
    with pytest.raises(InvalidJob, match="async def"):
        wq.process("u", lambda j: None)  # a def handler beside async middleware


def test_async_middleware_is_refused_beside_def_handlers(wq: Queue) -> None:
    async def awaited(job: Job, call_next: Any) -> Any:
        return await call_next()

    wq.process("t", lambda j: None)
    with pytest.raises(InvalidJob, match="async def"):
        wq.use(awaited)
    assert wq.middleware == ()
    for bad in (3, lambda job: None):
        with pytest.raises(InvalidJob):
            wq.use(bad)  # type: ignore[arg-type]


@pytest.mark.slow
def test_middleware_runs_in_the_child_of_an_isolated_handler(wq: Queue) -> None:
    wq.use(isolated_handlers.wrap_with_pid)
    with pytest.raises(InvalidJob, match="importable"):
        Queue(client=wq.client, prefix=wq.prefix).use(lambda j, n: n()).process(
            "x", 1, isolated_handlers.double, isolation="process"
        )
    job = wq.create_job("t", {"n": 4}).save()
    wq.process("t", 1, isolated_handlers.double, isolation="process")
    wait_for(lambda: _state(wq, job) == "complete", timeout=30)
    result = wq.get_job(job.id).result  # type: ignore[arg-type]
    assert result["inner"]["n"] == 8 and result["mw_pid"] == result["inner"]["pid"] != os.getpid()


# -- local pause -------------------------------------------------------------------------
def test_pause_in_one_process_only(redis_url: str, prefix: str) -> None:
    ran: dict[str, list[int]] = {"here": [], "there": []}
    with Queue(redis_url, prefix=prefix) as here, Queue(redis_url, prefix=prefix) as there:
        here.process("t", 2, lambda j: ran["here"].append(j.id))
        assert here.pause("t", local=True) and not here.pause("t", local=True)
        assert "t" not in here.paused()  # nothing changed for other processes
        wait_for(lambda: any(w["paused"] == ["t"] for w in here.workers()))
        jobs = [here.create_job("t").save() for _ in range(5)]
        there.process("t", 1, lambda j: ran["there"].append(j.id))
        wait_for(lambda: len(ran["there"]) == 5)
        assert ran["here"] == []
        # The other process stops: the jobs to come are this one's (a lone slot that claims
        # ahead can drain 20 no-op jobs before this process's slots wake from their pause).
        there.shutdown(10)
        assert here.resume("t", local=True) and not here.resume("t", local=True)
        more = [here.create_job("t").save() for _ in range(20)]
        wait_for(lambda: len(ran["here"]) == 20)  # this process claims again
        assert [j.id for j in jobs] == ran["there"] and {j.id for j in more} == set(ran["here"])
        with pytest.raises(InvalidJob):
            here.pause("t", local="yes")  # type: ignore[arg-type]


def test_a_claim_answered_after_a_local_pause_gives_its_job_back(
    redis_url: str, prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A slot that asked for a job before ``pause(local=True)`` and got it after does not run
    it: the job goes back to wait, no attempt counted, and runs once the type is resumed."""
    ran: list[int] = []
    paused: list[bool] = []
    with Queue(redis_url, prefix=prefix) as q:
        job = q.create_job("t").save()

        def claim_then_pause(c: Any, answer: Any) -> None:
            # A claimed job is this worker's now, and the type is paused here.
            if c.name == "claim" and isinstance(answer, tuple) and not paused:
                paused.append(q.pause("t", local=True))

        after_worker_calls(monkeypatch, q, claim_then_pause)
        q.process("t", 1, lambda j: ran.append(j.id))
        wait_for(lambda: any(w["paused"] == ["t"] for w in q.workers()))
        wait_for(lambda: q.get_job(job.id).state == "inactive")  # type: ignore[union-attr]
        again = q.get_job(job.id)
        assert ran == [] and again is not None and again.attempts_made == 0
        assert q.resume("t", local=True)
        wait_for(lambda: ran == [job.id])


# -- remote stop -------------------------------------------------------------------------
def test_stop_a_worker_remotely(redis_url: str, prefix: str, other: Queue) -> None:
    release = threading.Event()
    finished: list[int] = []

    def handler(job: Job) -> None:
        release.wait(5)
        finished.append(job.id)  # type: ignore[arg-type]

    with Queue(redis_url, prefix=prefix) as worker:
        running = worker.create_job("t").save()
        worker.process("t", 1, handler)
        wait_for(lambda: _state(other, running) == "active" and other.workers())
        [info] = other.workers()
        with pytest.raises(WorkerNotFound):
            other.stop_worker("nobody:1:abc")
        with pytest.raises(InvalidJob):
            other.stop_worker(info["id"], timeout=-1)
        assert info["stopping"] is False
        other.stop_worker(info["id"], timeout=5)
        wait_for(lambda: other.workers()[0]["stopping"])
        waiting = other.create_job("t").save()
        assert not worker.stopped_remotely.is_set()
        release.set()  # the running job finishes within the timeout
        assert worker.stopped_remotely.wait(10)
        assert _state(other, running) == "complete" and finished == [running.id]
        assert _state(other, waiting) == "inactive"  # not claimed after the request
        wait_for(lambda: other.workers() == [])


def test_a_worker_listens_before_it_is_listed(
    redis_url: str, prefix: str, other: Queue, r: redis.Redis
) -> None:
    # A stop sent as soon as a process shows in workers() must reach it: its control channel
    # has a subscriber by the time its registration exists (it had none for a moment once).
    seen: list[int] = []
    listed = threading.Event()

    def watch() -> None:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not listed.is_set():
            ids = r.zrange(other.keys.workers, 0, -1)
            if ids:
                seen.append(r.pubsub_numsub(other.keys.control(ids[0]))[0][1])
                listed.set()

    watcher = threading.Thread(target=watch)
    watcher.start()
    with Queue(redis_url, prefix=prefix) as worker:
        worker.process("t", 1, lambda job: None)
        watcher.join()
        assert seen == [1]
        other.stop_worker(worker.worker_id, timeout=5)
        assert worker.stopped_remotely.wait(10)


def test_bad_control_messages_are_ignored_and_a_second_stop_changes_nothing(
    redis_url: str, prefix: str, other: Queue, r: redis.Redis
) -> None:
    stopped = threading.Event()

    def handler(job: Job) -> None:
        while not job.stopping:
            time.sleep(0.005)
        stopped.set()

    with Queue(redis_url, prefix=prefix) as worker:
        job = worker.create_job("t").save()
        worker.process("t", 1, handler)
        wait_for(lambda: _state(other, job) == "active" and other.workers())
        channel = other.keys.control(other.workers()[0]["id"])
        for bad in (
            "not json",
            '{"op": "end"}',
            '{"op": "bogus"}',
            '{"op": "stop", "timeout": -1}',
        ):
            r.publish(channel, bad)
        other.cancel(job.id)  # type: ignore[arg-type]  # heard after the bad ones
        assert stopped.wait(2)
        assert not other.workers()[0]["stopping"]
        other.stop_worker(other.workers()[0]["id"], timeout=5)
        r.publish(channel, '{"op": "stop", "timeout": 0}')
        assert worker.stopped_remotely.wait(10)
        wait_for(lambda: other.workers() == [])
