"""Fan-out jobs (``kue_core.features.runs``) run by real workers: three ``Queue(worker_id=...)``
processing in threads each run a fan_out(3) job once; fan_out("all") reaches the live workers;
a run failing past max_failed_runs, or a cancel, ends the others' handlers at once."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from kue_core import Job, Queue, doctor
from tests.clients import blocking_queue
from tests.conftest import wait_for

IDS = ("fan-1", "fan-2", "fan-3")


@pytest.fixture
def queues(redis_url: str, prefix: str) -> Iterator[Callable[..., Queue]]:
    made: list[Queue] = []

    def make(**options: Any) -> Queue:
        queue = Queue(redis_url, prefix=prefix, lease_ms=5_000, **options)
        made.append(queue)
        return queue

    yield make
    for queue in made:
        queue.shutdown(5)
        queue.close()


def _workers(queues: Callable[..., Queue], handler: Callable[[str, Job], Any]) -> list[Queue]:
    out = []
    for wid in IDS:
        q = queues(worker_id=wid)
        q.process("t", lambda job, wid=wid: handler(wid, job))
        out.append(q)
    return out


def _ended(queue: Queue, job_id: int) -> Job:
    return wait_for(lambda: (j := queue.get_job(job_id)).state in ("complete", "failed") and j, 10)


def test_fan_out_3_runs_once_on_each_of_three_workers(
    queues: Callable[..., Queue], redis_url: str, prefix: str
) -> None:
    calls: Counter[str] = Counter()
    lock = threading.Lock()

    def handler(wid: str, job: Job) -> Any:
        with lock:
            calls[wid] += 1
        return {"on": wid, "n": job.data["n"]}

    _workers(queues, handler)
    client = queues()
    job = client.create_job("t", {"n": 5}).fan_out(3).save()
    done = _ended(client, job.id)  # type: ignore[arg-type]
    assert done.state == "complete"
    assert done.result == {wid: {"on": wid, "n": 5} for wid in IDS}
    assert calls == Counter({wid: 1 for wid in IDS})
    assert sorted(run["worker"] for run in done.runs()) == list(IDS)
    with blocking_queue(redis_url, prefix) as aq:  # the asyncio client reads the same runs
        assert aq.get_job(job.id).runs() == aq.runs(job.id) == done.runs()
    assert doctor.check(client).findings == []


def test_fan_out_all_reaches_the_live_workers(queues: Callable[..., Queue]) -> None:
    _workers(queues, lambda wid, job: wid)
    client = queues()
    job = client.create_job("t").fan_out("all").save()
    done = _ended(client, job.id)  # type: ignore[arg-type]
    assert done.result == {wid: wid for wid in IDS}
    assert done.fan_out()["k"] == 3  # type: ignore[index]


def test_a_run_failing_for_good_ends_the_other_runs_at_once(
    queues: Callable[..., Queue],
) -> None:
    stopped: list[str] = []
    started: list[str] = []

    def handler(wid: str, job: Job) -> Any:
        if wid == IDS[0]:  # fails once both others run (a run not begun would never start)
            wait_for(lambda: len(started) == 2, 20)
            raise RuntimeError("no GPU")
        started.append(wid)
        wait_for(lambda: job.stopping, 20)  # told on its control channel, not by its lease (30 s)
        stopped.append(wid)
        return "late"

    _workers(queues, handler)
    client = queues()
    job = client.create_job("t").fan_out(3).save()
    done = _ended(client, job.id)  # type: ignore[arg-type]
    assert done.state == "failed" and done.error is not None
    assert done.error.startswith("run on fan-1 failed: ")
    wait_for(lambda: len(stopped) == 2, 20)
    runs = {run["worker"]: run["state"] for run in client.get_job(job.id).runs()}  # type: ignore[arg-type]
    assert runs == {"fan-1": "failed", "fan-2": "lost", "fan-3": "lost"}
    assert client.get_job(job.id).state == "failed"  # type: ignore[arg-type]
    assert doctor.check(client).findings == []


def test_a_publish_with_reset_runs_lets_a_failed_worker_try_again(
    queues: Callable[..., Queue],
) -> None:
    """fan-1 fails twice with max_failed_runs=1: the job would fail for good, but the same
    key is published with reset_runs between the two failures, so fan-1's third run counts."""
    tries: Counter[str] = Counter()
    republished = threading.Event()

    def handler(wid: str, job: Job) -> Any:
        tries[wid] += 1
        if wid == "fan-1" and tries[wid] == 1:
            raise RuntimeError("cold cache")
        if wid == "fan-1" and tries[wid] == 2:
            assert wait_for(republished.is_set, 10)
            raise RuntimeError("cold cache again")
        return wid

    for wid in IDS[:2]:
        queues(worker_id=wid).process("t", lambda job, wid=wid: handler(wid, job))
    client = queues()

    def publish(reset: bool) -> Job:
        job = client.create_job("t").fan_out(2, max_failed_runs=1, reset_runs=reset)
        return job.unique("nightly").save()

    jid = publish(False).id
    assert jid is not None
    assert wait_for(lambda: tries["fan-1"] == 2)
    assert client.get_job(jid).state == "active"
    again = publish(True)
    assert again.deduplicated and again.id == jid
    republished.set()
    done = _ended(client, jid)
    assert done.state == "complete" and done.result == {"fan-1": "fan-1", "fan-2": "fan-2"}
    assert tries["fan-1"] == 3
    assert doctor.check(client).findings == []
