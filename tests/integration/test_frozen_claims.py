"""A worker held up between a claim and its handler's start (frozen by SIGSTOP, a long pause,
a suspended machine) past its lease: the job went back to the queue and another worker ran
it; the held-up worker must not start the handler a second time (#42)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from kue_core import Job, Queue, doctor
from tests.conftest import wait_for

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
    real_claim = frozen.scripts.claim

    def claim_then_freeze(*args: Any, **kwargs: Any) -> Any:
        reply = real_claim(*args, **kwargs)
        calls[0] += 1
        if isinstance(reply, tuple) and not claimed.is_set():
            claimed.set()
            thaw.wait(30)  # the whole slot stands still, as a frozen process's would
        return reply

    monkeypatch.setattr(frozen.scripts, "claim", claim_then_freeze)

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
    real_claim = frozen.scripts.claim
    held = threading.Event()

    def claim_then_wait(*args: Any, **kwargs: Any) -> Any:
        reply = real_claim(*args, **kwargs)
        if isinstance(reply, tuple) and not held.is_set():
            held.set()
            threading.Event().wait(LEASE_MS / 1000 / 2)  # a hold-up, shorter than the lease
        return reply

    monkeypatch.setattr(frozen.scripts, "claim", claim_then_wait)
    frozen.process("t", lambda job: ran.append(job.id))
    job = frozen.create_job("t").save()
    wait_for(lambda: frozen.get_job(job.id).state == "complete")  # type: ignore[arg-type]
    assert ran == [job.id]
