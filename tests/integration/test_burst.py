"""Burst mode: ``queue.run(burst=True)`` (and ``run_tasks(burst=True)``) serves until the work
of its types has run out, then shuts down gracefully and returns None: the waiting jobs are
run, a retry whose backoff is due soon is waited for and run, a dependent job freed by its
dependency is run; a job delayed to later, a paused type's jobs and another type's jobs are
not waited for; nothing is left active and the worker leaves the list of workers."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from kue_core import InvalidWorkerConfig, Job, NoRetry, Queue
from tests.conftest import never, wait_for

#: A burst that has not returned by then has hung: the test stops it remotely, and fails.
DEADLINE = 30.0


@pytest.fixture
def wq(redis_url: str, prefix: str) -> Iterator[Queue]:
    # A lease no load outlasts: the tests count runs and attempts, none lets a lease expire,
    # and a process held up past a short one (two cores, under coverage) rightly has its jobs
    # run again.
    q = Queue(redis_url, prefix=prefix, lease_ms=30_000)
    yield q
    q.close()


def burst(queue: Queue, run: Callable[[], str | None] | None = None) -> float:
    """Run the burst; fail unless it returned by itself (not by the watchdog's remote stop)
    within the deadline; the seconds it took."""
    watchdog = threading.Timer(DEADLINE, queue.stopped_remotely.set)
    watchdog.start()
    began = time.monotonic()
    try:
        result = (run or (lambda: queue.run(burst=True)))()
    finally:
        watchdog.cancel()
    took = time.monotonic() - began
    assert not queue.stopped_remotely.is_set(), "the burst did not end by itself"
    assert result is None
    return took


def test_a_burst_runs_every_waiting_job_and_returns(wq: Queue) -> None:
    done: list[int] = []
    jobs = [wq.create_job("email", {"n": n}).save() for n in range(6)]
    wq.process("email", 2, lambda job: done.append(job.data["n"]) or job.data["n"] * 10)
    burst(wq)
    assert sorted(done) == list(range(6))
    for job in jobs:
        assert job.refresh().state == "complete" and job.result == job.data["n"] * 10
    assert wq.counts("email")["active"] == 0 and wq.counts("email")["inactive"] == 0
    assert wq.workers() == []  # shut down: left the list


def test_a_burst_on_an_empty_queue_returns_at_once(wq: Queue) -> None:
    wq.process("email", lambda job: None)
    assert burst(wq) < 5


def test_a_retry_whose_backoff_is_due_soon_is_run(wq: Queue) -> None:
    def flaky(job: Job) -> str:
        if job.attempts_made < 2:  # attempts_made counts the earlier attempts
            raise RuntimeError(f"attempt {job.attempts_made + 1} fails")
        return "third time lucky"

    job = wq.create_job("flaky", {}).attempts(3).backoff({"type": "fixed", "delay": 300})
    job.save()
    wq.process("flaky", flaky)
    burst(wq)
    job.refresh()
    assert (job.state, job.result, job.attempts_made) == ("complete", "third time lucky", 3)


def test_a_job_that_fails_for_good_ends_the_burst_failed(wq: Queue) -> None:
    def hopeless(job: Job) -> None:
        raise NoRetry("the address does not exist")

    job = wq.create_job("bounce", {}).attempts(3).backoff({"type": "fixed", "delay": 60_000})
    job.save()
    wq.process("bounce", hopeless)
    assert burst(wq) < 10  # not the minute of a backoff: NoRetry fails it for good
    job.refresh()
    assert job.state == "failed" and "the address does not exist" in (job.error or "")
    assert job.attempts_made == 1


def test_a_retry_with_a_long_backoff_is_waited_for_only_as_long_as_it_is_delayed(
    wq: Queue,
) -> None:
    # The retry of an attempt failed here is part of the work: the burst waits out its
    # backoff. Moved out of delayed by hand (here: cancelled), it is no longer waited for.
    job = wq.create_job("slow-retry", {}).attempts(2).backoff({"type": "fixed", "delay": 60_000})
    job.save()
    failed = threading.Event()
    returned = threading.Event()
    waited: list[bool] = []

    def fails(j: Job) -> None:
        failed.set()
        raise RuntimeError("down")

    def cancel_once_delayed() -> None:
        failed.wait(DEADLINE)
        wait_for(lambda: wq.get_job(job.id).state == "delayed")
        waited.append(never(returned.is_set, 0.5))  # several looks of the burst: it waits
        wq.cancel(job.id, "enough")

    helper = threading.Thread(target=cancel_once_delayed)
    helper.start()
    wq.process("slow-retry", fails)
    try:
        burst(wq)
    finally:
        returned.set()
        helper.join()
    assert waited == [True]
    assert job.refresh().state == "failed"


def test_delayed_jobs_not_due_paused_types_and_other_types_are_not_waited_for(
    wq: Queue,
) -> None:
    later = wq.create_job("email", {"n": "later"}).delay(60_000).save()
    now = wq.create_job("email", {"n": "now"}).save()
    other = wq.create_job("sms", {}).save()
    wq.pause("fax")
    paused = wq.create_job("fax", {}).save()
    wq.process("email", lambda job: "sent")
    wq.process("fax", lambda job: "faxed")
    assert burst(wq) < 10
    assert now.refresh().state == "complete"
    assert later.refresh().state == "delayed"
    assert other.refresh().state == "inactive"
    assert paused.refresh().state == "inactive"


def test_a_dependent_job_freed_during_the_burst_is_run(wq: Queue) -> None:
    first = wq.create_job("step", {"n": 1}).save()
    second = wq.create_job("step", {"n": 2}).depends_on(first).save()
    assert second.state == "blocked"
    order: list[int] = []
    wq.process("step", lambda job: order.append(job.data["n"]))
    burst(wq)
    assert order == [1, 2]
    assert second.refresh().state == "complete"


def test_a_delayed_job_already_due_is_run(wq: Queue, r: Any) -> None:
    job = wq.create_job("email", {}).delay(200).save()
    due = wq.get_job(job.id).promote_at or 0
    wait_for(lambda: r.time()[0] * 1000 + r.time()[1] // 1000 > due)  # due by Redis's clock
    wq.process("email", lambda j: "sent")
    burst(wq)
    assert job.refresh().state == "complete"


def test_run_tasks_in_a_burst(wq: Queue) -> None:
    @wq.task
    def add(a: int, b: int) -> int:
        return a + b

    jobs = [add.enqueue(n, 1) for n in range(3)]
    burst(wq, lambda: wq.run_tasks(burst=True))
    assert [j.refresh().result for j in jobs] == [1, 2, 3]


def test_burst_must_be_a_bool(wq: Queue) -> None:
    wq.process("email", lambda job: None)
    with pytest.raises(InvalidWorkerConfig, match="burst is True or False"):
        wq.run(burst="yes")  # type: ignore[arg-type]
    wq.shutdown(1)


def test_a_worker_remembers_a_bounded_number_of_retries_to_follow(
    wq: Queue, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker that never runs a burst notes its failed attempts too (a burst may begin after
    them): the newest BURST_FOLLOW, never more, however many fail."""
    from kue_core import defaults

    monkeypatch.setattr(defaults, "BURST_FOLLOW", 3)
    later = {"type": "fixed", "delay": 60_000}
    jobs = [wq.create_job("email").attempts(2).backoff(later).save() for _ in range(5)]

    def fail(job: Job) -> None:
        raise ValueError("down")

    wq.process("email", fail)
    wait_for(lambda: all(j.refresh().state == "delayed" for j in jobs), timeout=20)
    workers = wq._workers
    assert workers is not None
    retrying = workers.state.retrying
    assert len(retrying) == 3
    newest = sorted(retrying.items(), key=lambda item: item[1])
    assert [job_id for job_id, _ in newest] == list(retrying)  # oldest first
    wq.shutdown()
