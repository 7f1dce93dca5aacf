"""kue doctor and the lease per worker process: an active job is stuck when its worker's lease
expired (and recovery has not requeued it yet), or when a claim of ours made it active for a
worker holding no lease; a job of a live worker is not. (The per-job leases of the version
before, and Kue's Node workers, which take none: tests/integration/test_doctor.py.)"""

from __future__ import annotations

import redis

from kue_core import Queue, doctor
from kue_core.store import calls
from tests.integration.test_doctor import check, found, now_ms, repaired, runs_to_completion

LEASE = 60_000


def _claimed_by(queue: Queue, worker: str, register: bool = True) -> int:
    if register:
        start = calls.heartbeat(queue.keys, worker, LEASE, "{}", [], mode="start")
        assert queue.scripts.call(start) == []
    claimed = queue.scripts.call(calls.claim(queue.keys, "email", worker, LEASE))
    assert isinstance(claimed, tuple)
    return claimed[0]


def test_a_live_workers_job_is_not_stuck(queue: Queue, r: redis.Redis) -> None:
    queue.create_job("email").save()
    _claimed_by(queue, "live")
    assert check(queue, r).healthy


def test_a_job_whose_workers_lease_expired(queue: Queue, r: redis.Redis) -> None:
    job = queue.create_job("email").save()
    other = queue.create_job("email").save()
    assert _claimed_by(queue, "dead") == job.id
    assert _claimed_by(queue, "live") == other.id
    r.zadd(queue.keys.worker_leases, {"dead": now_ms(r) - 5_000})
    report = check(queue, r)
    assert found(report) == {("stuck-active", queue.keys.job(job.id), job.id)}  # type: ignore[arg-type]
    problem = report.findings[0].problem
    assert "the lease of worker dead expired" in problem and "recovery has not" in problem
    repaired(queue, r, report)
    assert queue.get_job(job.id).state == "inactive"  # type: ignore[union-attr, arg-type]
    assert r.hget(queue.keys.job(job.id), "stalls") == "1"  # type: ignore[arg-type]
    # Recovery finds nothing more to do: the job was requeued once.
    assert queue.scripts.call(calls.recover(queue.keys, 5, 100)) == (0, 0)
    assert check(queue, r).healthy
    runs_to_completion(queue, "email", [job.id])  # type: ignore[list-item]


def test_a_job_of_ours_whose_worker_holds_no_lease(queue: Queue, r: redis.Redis) -> None:
    """A claim of ours gives the job a fencing token; its worker, were it alive, would hold a
    process lease: without one, nothing will ever recover the job."""
    job = queue.create_job("email").save()
    _claimed_by(queue, "gone", register=False)
    report = check(queue, r)
    assert found(report) == {("stuck-active", queue.keys.job(job.id), job.id)}  # type: ignore[arg-type]
    assert "worker gone holds no lease: its process is gone" in report.findings[0].problem
    # The worker registers before the repair: the job is its own again, left as it is.
    start = calls.heartbeat(queue.keys, "gone", LEASE, "{}", [], mode="start")
    assert queue.scripts.call(start) == []
    assert [o.status for o in doctor.repair(queue, report.findings)] == ["unchanged"]
    assert queue.get_job(job.id).state == "active"  # type: ignore[union-attr, arg-type]
