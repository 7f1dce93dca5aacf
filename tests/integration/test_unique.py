"""Unique jobs: each mode, the key released by whatever ends the job, save_many, and a key
that outlives no crash."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
from datetime import timedelta
from typing import Any

import pytest
import redis

from kue_core import InvalidJob, Queue, doctor
from tests.conftest import wait_for


@pytest.fixture
def queue(client: Any) -> Any:
    """Every test here runs on both clients: ``Queue`` and ``AsyncQueue`` (see
    ``client`` in tests/conftest.py)."""
    return client


def _holder(r: redis.Redis, queue: Queue, key: str) -> str | None:
    return r.get(queue.keys.unique(key))  # type: ignore[return-value]


def test_until_done_saves_one_job_per_key_while_it_is_not_done(
    sync_queue: Queue, r: redis.Redis
) -> None:
    heard: list[tuple[Any, ...]] = []
    sync_queue.on("job deduplicated", lambda *a: heard.append(a))
    first = sync_queue.create_job("t", {"n": 1}).unique("report:7").save()
    again = sync_queue.create_job("t", {"n": 2}).unique("report:7").save()
    assert not first.deduplicated and again.deduplicated
    assert again.id == first.id and again.state == "inactive"
    assert again.refresh().deduplicated  # what its save found stays with the object
    assert sync_queue.counts("t")["inactive"] == 1 and sync_queue.get_job(first.id).data == {"n": 1}  # type: ignore[arg-type]
    assert sync_queue.get_job(first.id).to_dict()["unique"] == {
        "key": "report:7",
        "mode": "until_done",
    }  # type: ignore[arg-type]
    wait_for(lambda: heard == [(first.id, "report:7")])
    other = sync_queue.create_job("t").unique("report:8").save()
    assert other.id != first.id and not other.deduplicated
    # Once the holder is done, the key is free.
    sync_queue.process("t", lambda job: None)
    wait_for(lambda: sync_queue.count("complete", "t") == 2)
    assert _holder(r, sync_queue, "report:7") is None
    third = sync_queue.create_job("t").unique("report:7").save()
    assert not third.deduplicated and third.id not in (first.id, other.id)


@pytest.mark.parametrize("end", ["fail", "cancel", "remove", "set_state", "remove_all"])
def test_every_end_of_a_job_releases_its_key(sync_queue: Queue, r: redis.Redis, end: str) -> None:
    job = sync_queue.create_job("t").unique("k").save()
    assert _holder(r, sync_queue, "k") == str(job.id)
    if end == "fail":
        sync_queue.process("t", lambda job: (_ for _ in ()).throw(ValueError("no")))
        wait_for(lambda: sync_queue.get_job(job.id).state == "failed")  # type: ignore[arg-type]
    elif end == "cancel":
        job.cancel()
    elif end == "remove":
        job.remove()
    elif end == "set_state":
        job.set_state("complete")
    else:
        sync_queue.remove_all("inactive", "t")
    assert _holder(r, sync_queue, "k") is None
    assert not sync_queue.create_job("t").unique("k").save().deduplicated


def test_a_job_retried_by_hand_takes_its_key_again(queue: Queue, r: redis.Redis) -> None:
    job = queue.create_job("t").unique("k").save()
    job.set_state("failed")
    assert _holder(r, queue, "k") is None
    job.set_state("inactive")
    assert _holder(r, queue, "k") == str(job.id)
    assert queue.create_job("t").unique("k").save().id == job.id


def test_throttle_blocks_for_its_ttl_whatever_became_of_the_job(
    queue: Queue, r: redis.Redis
) -> None:
    job = queue.create_job("t").unique("ping", "throttle", ttl=timedelta(seconds=60)).save()
    job.remove()  # the key stays for its ttl
    again = queue.create_job("t").unique("ping", "throttle", ttl=60_000).save()
    assert again.deduplicated and again.id == job.id and queue.counts("t")["inactive"] == 0
    assert 0 < r.pttl(queue.keys.unique("ping")) <= 60_000
    r.delete(queue.keys.unique("ping"))  # as its expiry would
    assert not queue.create_job("t").unique("ping", "throttle", ttl=1000).save().deduplicated


def test_debounce_pushes_the_due_time_back_and_keeps_the_last_data(queue: Queue) -> None:
    first = queue.create_job("t", {"v": 1}).unique("d", "debounce").delay(60_000).save()
    due = queue.get_job(first.id).promote_at  # type: ignore[arg-type]
    second = queue.create_job("t", {"v": 2}).unique("d", "debounce").delay(120_000).save()
    assert second.deduplicated and second.id == first.id and second.state == "delayed"
    again = queue.get_job(first.id)  # type: ignore[arg-type]
    assert again.data == {"v": 2} and again.promote_at >= due + 59_000  # type: ignore[operator]
    assert queue.ids("delayed", "t") == [first.id] and queue.counts("t")["inactive"] == 0
    assert again.history()[-1]["unique"] == "d"


def test_debounce_of_a_started_job_saves_a_new_one(sync_queue: Queue) -> None:
    release = threading.Event()
    first = sync_queue.create_job("t").unique("d", "debounce").save()
    sync_queue.process("t", lambda job: release.wait(5))
    wait_for(lambda: sync_queue.get_job(first.id).state == "active")  # type: ignore[arg-type]
    second = sync_queue.create_job("t").unique("d", "debounce").save()
    assert not second.deduplicated and second.id != first.id
    release.set()
    wait_for(lambda: sync_queue.count("complete", "t") == 2)


def test_reuse_keeps_one_job_per_key_in_kue_uniques_hash(queue: Queue, r: redis.Redis) -> None:
    first = queue.create_job("t", {"v": 1}).unique("u", "reuse").save()
    assert r.hget(queue.keys.unique_jobs, "u") == str(first.id)
    first.set_state("complete")
    second = queue.create_job("t", {"v": 2}).unique("u", "reuse").save()
    assert second.deduplicated and second.id == first.id and second.state == "inactive"
    assert queue.get_job(first.id).data == {"v": 2}  # type: ignore[arg-type]
    assert r.hget(queue.keys.unique_jobs, "u") == str(first.id)  # kept when it completed
    first.remove()
    assert r.hget(queue.keys.unique_jobs, "u") is None


def test_save_many_with_unique_keys_keeps_order_and_dedupes(queue: Queue) -> None:
    jobs = [
        queue.create_job("t", {"i": 0}),
        queue.create_job("t", {"i": 1}).unique("a"),
        queue.create_job("t", {"i": 2}),
        queue.create_job("t", {"i": 3}).unique("a"),
        queue.create_job("t", {"i": 4}),
    ]
    queue.save_many(jobs)
    assert [j.deduplicated for j in jobs] == [False, False, False, True, False]
    assert jobs[3].id == jobs[1].id and jobs[0].id < jobs[1].id < jobs[2].id < jobs[4].id  # type: ignore[operator]
    assert queue.counts("t")["inactive"] == 4
    with pytest.raises(InvalidJob):  # one bad job: none saved
        queue.save_many([queue.create_job("t").unique("b"), queue.create_job("t", {1, 2})])
    assert queue.counts("t")["inactive"] == 4


@pytest.mark.parametrize(
    ("key", "mode", "ttl"),
    [
        ("", "until_done", None),
        (3, "until_done", None),
        ("jobs", "until_done", None),
        ("x" * 201, "until_done", None),
        ("a\nb", "until_done", None),
        ("k", "later", None),
        ("k", "throttle", None),
        ("k", "reuse", 1000),
        ("k", "until_done", 0),
    ],
)
def test_bad_unique_options_are_refused(queue: Queue, key: Any, mode: Any, ttl: Any) -> None:
    with pytest.raises(InvalidJob):
        queue.create_job("t").unique(key, mode, ttl)


def test_a_key_is_never_left_behind_by_a_killed_worker(sync_queue: Queue, redis_url: str) -> None:
    """A worker killed mid-job: the job comes back through its lease, runs again, and its key
    goes when it completes; kue doctor finds nothing."""
    worker = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.integration.control_worker",
            redis_url,
            sync_queue.prefix,
            "thread",
            "1",
            "t",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert worker.stdout is not None and worker.stdout.readline().strip() == "ready"
        job = sync_queue.create_job("t", {"block": True}).unique("once").save()
        wait_for(lambda: sync_queue.get_job(job.id).state == "active", timeout=10)  # type: ignore[arg-type]
        worker.send_signal(signal.SIGKILL)
        worker.wait(10)
    finally:
        if worker.poll() is None:
            worker.kill()
    assert (
        sync_queue.create_job("t").unique("once").save().deduplicated
    )  # still held while it waits
    sync_queue.client.hset(sync_queue.keys.job(job.id), "data", "{}")  # type: ignore[arg-type]  # runs quickly next
    q2 = Queue(redis_url, prefix=sync_queue.prefix, lease_ms=600)
    try:
        q2.process("t", lambda j: None)
        wait_for(lambda: sync_queue.get_job(job.id).state == "complete", timeout=40)  # type: ignore[arg-type]
    finally:
        q2.close()
    assert sync_queue.client.get(sync_queue.keys.unique("once")) is None
    # A killed worker's registry entry may outlive its registration until a heartbeat drops it.
    assert [f for f in doctor.check(sync_queue).findings if f.kind != "gone-worker"] == []


def test_doctor_finds_and_repairs_unique_keys_left_by_node_kue(
    sync_queue: Queue, r: redis.Redis
) -> None:
    ended = sync_queue.create_job("t").unique("ended").save()
    gone = sync_queue.create_job("t").unique("gone").save()
    reused = sync_queue.create_job("t").unique("again", "reuse").save()
    held = sync_queue.create_job("t").unique("held").save()
    throttled = sync_queue.create_job("t").unique("slow", "throttle", ttl=60_000).save()
    # What Node Kue does: it ends and deletes jobs without our scripts.
    r.hset(sync_queue.keys.job(ended.id), "state", "complete")  # type: ignore[arg-type]
    sync_queue.client.zrem(sync_queue.keys.state("inactive"), f"0{len(str(ended.id))}|{ended.id}")
    sync_queue.client.zadd(
        sync_queue.keys.state("complete"), {f"0{len(str(ended.id))}|{ended.id}": 0}
    )
    sync_queue.client.zrem(
        sync_queue.keys.type_state("t", "inactive"), f"0{len(str(ended.id))}|{ended.id}"
    )
    sync_queue.client.zadd(
        sync_queue.keys.type_state("t", "complete"), {f"0{len(str(ended.id))}|{ended.id}": 0}
    )
    for job in (gone, reused, throttled):
        r.delete(sync_queue.keys.job(job.id), sync_queue.keys.history(job.id))  # type: ignore[arg-type]
        member = f"0{len(str(job.id))}|{job.id}"
        for key in (
            sync_queue.keys.jobs,
            sync_queue.keys.state("inactive"),
            sync_queue.keys.type_state("t", "inactive"),
        ):
            r.zrem(key, member)
    found = [f for f in doctor.check(sync_queue).findings if f.kind == "stale-unique"]
    assert sorted(f.job_id for f in found) == sorted([ended.id, gone.id, reused.id])  # type: ignore[type-var]
    doctor.repair(sync_queue, found)
    assert _holder(r, sync_queue, "ended") is None and _holder(r, sync_queue, "gone") is None
    assert r.hget(sync_queue.keys.unique_jobs, "again") is None
    assert _holder(r, sync_queue, "held") == str(held.id)  # still held by a waiting job
    assert _holder(r, sync_queue, "slow") == str(throttled.id)  # expires by itself
    assert [f for f in doctor.check(sync_queue).findings if f.kind == "stale-unique"] == []
