"""The attempt decides once how it ended, whoever asks, from any number of threads."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from kue_core import Job, Stopped
from kue_core.worker.attempt import Attempt, Reason


def _attempt(ttl_ms: int = 0) -> Attempt:
    job = Job.__new__(Job)
    job.id = 7
    return Attempt(job, "1", ttl_ms)


def test_only_the_first_end_wins_across_threads() -> None:
    attempt = _attempt()
    barrier = threading.Barrier(8)
    wins: list[Reason] = []
    reasons = [Reason.DONE, Reason.TTL, Reason.LEASE_LOST, Reason.RELEASED] * 2

    def end(reason: Reason) -> None:
        barrier.wait()
        if attempt.end(reason):
            wins.append(reason)

    threads = [threading.Thread(target=end, args=(r,)) for r in reasons]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(wins) == 1 and attempt.reason == wins[0]


@pytest.mark.parametrize("reason", list(Reason))
def test_the_handler_is_stopped_only_when_it_did_not_end_itself(reason: Reason) -> None:
    stops: list[Any] = []
    attempt = _attempt()
    attempt.stop_with(lambda: stops.append(1))
    assert attempt.end(reason)
    assert bool(stops) is attempt.stopped is (reason not in (Reason.DONE, Reason.FAILED))
    assert not attempt.end(Reason.TTL) and len(stops) <= 1


def test_a_stop_given_after_the_end_runs_at_once() -> None:
    stops: list[int] = []
    attempt = _attempt()
    attempt.end(Reason.CANCELLED)
    attempt.stop_with(lambda: stops.append(1))
    assert stops == [1]


def test_the_job_sees_its_attempt_end() -> None:
    attempt = _attempt()
    job = attempt.job
    assert not job.stopping
    attempt.end(Reason.TTL)
    assert job.stopping
    with pytest.raises(Stopped):
        job.progress(1, 2)
    with pytest.raises(Stopped):
        job.log("late")


def test_the_ttl_counts_from_the_start() -> None:
    attempt = _attempt(ttl_ms=1000)
    first = attempt.deadline
    assert first is not None
    later = Attempt(attempt.job, "1", 1000, grace=30.0)
    assert later.deadline is not None and later.deadline >= first + 29
    later.started()
    assert later.deadline < first + 29
    assert _attempt().deadline is None
