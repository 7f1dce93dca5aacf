"""How an attempt ends: a ``def`` handler past its ttl does not hold its slot, sees that it
should stop, and is counted; a child's ttl counts from its start of the job; the registry of
workers shows running jobs at once."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from kue_core import Job, Queue, Stopped, defaults
from tests.conftest import never, wait_for
from tests.integration import slow_start_handlers


@pytest.fixture
def wq(redis_url: str, prefix: str) -> Iterator[Queue]:
    # A lease no load outlasts: these tests count the threads left running and the handlers
    # run, and a process held up past a short lease (two cores, under coverage) rightly
    # loses its jobs, which then run again. What a worker tells of its threads changes with a
    # heartbeat asked at once.
    q = Queue(redis_url, prefix=prefix, lease_ms=30_000)
    yield q
    q.close()


def _abandoned(queue: Queue) -> int | None:
    found = queue.workers()
    return found[0]["abandoned_threads"] if found else None


def _job(queue: Queue, job_id: int | None) -> Job:
    assert job_id is not None
    return queue.get_job(job_id)


def test_a_stuck_thread_handler_past_its_ttl_frees_its_slot(wq: Queue) -> None:
    release = threading.Event()
    returned = threading.Event()

    def handler(job: Job) -> str:
        if job.data["stuck"]:
            release.wait(30)  # ignores job.stopping: only release ends it
            returned.set()
            return "late"
        return "quick"

    stuck = wq.create_job("t", {"stuck": True}).ttl(200).save()
    wq.process("t", 1, handler)
    wait_for(lambda: _job(wq, stuck.id).state == "failed")
    assert (_job(wq, stuck.id).error or "").startswith("TTL exceeded")
    # The only slot goes on while the first handler is still running.
    after = wq.create_job("t", {"stuck": False}).save()
    wait_for(lambda: _job(wq, after.id).state == "complete")
    assert not returned.is_set()
    assert wait_for(lambda: _abandoned(wq) == 1)
    release.set()
    wait_for(returned.is_set)
    assert wait_for(lambda: _abandoned(wq) == 0)
    late = _job(wq, stuck.id)
    assert late.state == "failed" and "result" not in late.to_dict()  # its late result dropped


def test_a_cooperative_handler_sees_stopping_and_stopped(wq: Queue) -> None:
    seen: list[Any] = []

    def handler(job: Job) -> None:
        seen.append(job.stopping)
        try:
            while True:  # bounded by the ttl: progress() raises once the attempt is over
                job.progress(1, 2)
        except Stopped as e:
            seen.extend([job.stopping, e])
            job.log("never written")  # raises Stopped too, and is not kept

    job = wq.create_job("t").ttl(150).save()
    wq.process("t", 1, handler)
    wait_for(lambda: len(seen) == 3)
    assert seen[0] is False and seen[1] is True and isinstance(seen[2], Stopped)
    wait_for(lambda: _job(wq, job.id).state == "failed")
    assert wq.get_log(job.id) == []  # type: ignore[arg-type]
    assert wait_for(lambda: _abandoned(wq) == 0)  # it returned: nothing left behind


def test_past_the_cap_a_slot_waits_for_its_stuck_handler(
    wq: Queue, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(defaults, "ABANDONED_THREADS", 1)
    gates = {name: threading.Event() for name in ("a", "b")}
    ran: list[str] = []

    def handler(job: Job) -> None:
        ran.append(job.data["name"])
        gate = gates.get(job.data["name"])
        if gate is not None:
            gate.wait(30)

    a = wq.create_job("t", {"name": "a"}).ttl(200).save()
    b = wq.create_job("t", {"name": "b"}).ttl(200).save()
    c = wq.create_job("t", {"name": "c"}).save()
    wq.process("t", 1, handler)
    wait_for(lambda: _job(wq, b.id).state == "failed")  # a left behind, b ran in a new thread
    assert ran == ["a", "b"] and _job(wq, a.id).state == "failed"
    # One thread is left running already: the slot waits for b's handler, c waits.
    assert never(lambda: _job(wq, c.id).state != "inactive", 0.5)
    gates["b"].set()
    wait_for(lambda: _job(wq, c.id).state == "complete")
    gates["a"].set()
    assert wait_for(lambda: _abandoned(wq) == 0)


@pytest.mark.slow
def test_a_childs_ttl_counts_from_its_start_of_the_job(wq: Queue) -> None:
    # The child takes a second to start; the ttl is half that, and the handler is quick.
    job = wq.create_job("t").ttl(500).save()
    wq.process("t", 1, slow_start_handlers.quick, isolation="process")
    wait_for(lambda: _job(wq, job.id).state in ("complete", "failed"), timeout=20)
    done = _job(wq, job.id)
    assert done.state == "complete", done.error


def test_workers_show_a_running_job_at_once(redis_url: str, prefix: str) -> None:
    # A long lease: the heartbeat comes every 10 s, so only the transitions can show the job.
    q = Queue(redis_url, prefix=prefix, lease_ms=30_000)
    gate = threading.Event()
    try:
        q.process("t", 1, lambda job: gate.wait(30))
        wait_for(lambda: q.workers())
        job = q.create_job("t").save()
        wait_for(lambda: q.workers()[0]["jobs"] == [job.id], timeout=3)
        gate.set()
        wait_for(lambda: q.workers()[0]["jobs"] == [], timeout=3)
    finally:
        gate.set()
        q.close()


@pytest.mark.slow
def test_quick_handlers_never_count_as_left_running(redis_url: str, prefix: str) -> None:
    # The keeper looks for stuck slots while handlers are returning (here without pause, as
    # it may at any moment): none may be taken for stuck, and no claimed job dropped (it would
    # wait for its 30 s lease, far past the deadline below).
    q = Queue(redis_url, prefix=prefix)
    done = threading.Event()
    try:
        jobs = q.save_many([q.create_job("t") for _ in range(3000)])
        q.process("t", 8, lambda job: None)
        workers = q._workers
        assert workers is not None

        def keeper() -> None:
            while not done.is_set():
                workers.keeper.relieve(time.monotonic())

        threading.Thread(target=keeper, daemon=True).start()
        wait_for(lambda: q.count("complete") == len(jobs), timeout=20)
        assert [w["abandoned_threads"] for w in q.workers()] == [0]
    finally:
        done.set()
        q.close()
