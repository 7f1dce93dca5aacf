"""Pinned jobs with real ``kue worker --id`` processes: a job pinned to a worker waits for it
while another worker drains the type's other jobs; it runs on its worker once that starts;
when its worker is SIGKILLed mid-run, its lease runs out and it waits pinned again, never
taken by the other worker, until the restarted worker (same id) runs it. kue doctor finds
nothing after."""

from __future__ import annotations

import pytest

from kue_core import Queue
from tests.cli.running import LONG_LEASE, Kue, doctor_finds_nothing, start_worker
from tests.conftest import never, wait_for

pytestmark = [pytest.mark.timeout(120), pytest.mark.single_node]


def test_a_pinned_job_waits_for_its_worker_while_the_others_flow(
    run: list[Kue], redis_url: str, prefix: str, queue: Queue
) -> None:
    pinned = queue.create_job("job", {"n": 21}).priority("critical").only(["gpu-1"]).save()
    plain = [queue.create_job("job", {"n": i}).save() for i in range(10)]
    cpu = start_worker(run, redis_url, prefix, "cpu-1", "echo")
    assert wait_for(lambda: queue.counts("job")["complete"] == 10, timeout=20)
    assert all(queue.get_job(j.id).worker_id == "cpu-1" for j in plain)  # type: ignore[arg-type]
    assert queue.get_job(pinned.id).state == "pinned"  # type: ignore[arg-type]
    start_worker(run, redis_url, prefix, "gpu-1", "echo")
    assert wait_for(lambda: queue.get_job(pinned.id).state == "complete", timeout=20)  # type: ignore[arg-type]
    done = queue.get_job(pinned.id)  # type: ignore[arg-type]
    assert done.worker_id == "gpu-1" and done.result["twice"] == 42
    assert done.result["pid"] != cpu.proc.pid
    doctor_finds_nothing(queue.prefix, redis_url)


def test_a_pinned_job_whose_worker_dies_waits_for_it_again(
    run: list[Kue], redis_url: str, prefix: str, queue: Queue
) -> None:
    start_worker(run, redis_url, prefix, "cpu-1", "sleepy")
    gpu = start_worker(run, redis_url, prefix, "gpu-1", "sleepy")
    job = queue.create_job("job", {"seconds": 1.5}).only(["gpu-1"]).save()
    jid = job.id
    assert jid is not None
    assert wait_for(lambda: queue.get_job(jid).state == "active", timeout=10)
    gpu.kill()  # SIGKILL mid-run
    assert wait_for(lambda: queue.get_job(jid).state == "pinned", timeout=10)
    # The other worker, idle and sweeping the leases, never takes it.
    assert never(lambda: queue.get_job(jid).state != "pinned", window=1.0)
    # Not killed: a lease no load outlasts, as the job is to start once more only (one held
    # up past 0.3 s under load rightly loses the job, which then starts a third time).
    again = start_worker(run, redis_url, prefix, "gpu-1", "sleepy", *LONG_LEASE)
    assert wait_for(lambda: queue.get_job(jid).state == "complete", timeout=20)
    done = queue.get_job(jid)
    assert done.worker_id == "gpu-1" and done.result == {"slept": 1.5}
    history = [e for e in queue.history(jid) if e.get("state") == "active"]
    assert [e["worker"] for e in history] == ["gpu-1", "gpu-1"]
    assert again.proc.poll() is None
    doctor_finds_nothing(queue.prefix, redis_url)
