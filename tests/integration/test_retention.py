"""Retention (``kue_core.features.retention``): finished jobs past the policy in force go, whole,
in the
script that finishes the next one or in the maintenance sweep; Kue's layout stays exact."""

from __future__ import annotations

from typing import Any

import pytest
import redis

from kue_core import InvalidJob, JobNotFound, Queue, defaults
from kue_core.store import calls
from tests.conftest import finish, keys_under, wait_for


def _ids(queue: Queue, state: str) -> list[int]:
    return sorted(queue.ids(state))


def _gone(queue: Queue, r: redis.Redis, job_id: int) -> bool:
    k = queue.keys
    return not r.exists(k.job(job_id), k.log(job_id), k.history(job_id)) and all(
        r.zscore(key, f"{len(str(job_id)):02d}|{job_id}") is None
        for key in (k.jobs, k.finished("complete"), k.finished("failed"), k.tag("t"), k.word("w"))
    )


def test_the_defaults_and_setting_the_queue_policy(queue: Queue, r: redis.Redis) -> None:
    count, age = defaults.RETAIN_COMPLETE
    assert queue.retention()["complete"] == {"count": count, "age": age, "source": "default"}
    got = queue.set_retention(complete={"count": 10, "age": 60_000}, failed=None)
    assert got["complete"] == {"count": 10, "age": 60_000, "source": "queue"}
    assert got["failed"] == {"count": None, "age": None, "source": "queue"}  # keep all
    assert queue.set_retention(complete=5)["complete"]["count"] == 5
    assert queue.set_retention(complete="default")["complete"]["source"] == "default"
    before = r.hgetall(queue.keys.retention)
    for bad in (
        {"complete": {"count": -1}},
        {"complete": {"age": 0}},
        {"complete": {"cnt": 1}},
        {"failed": "all"},
        {"complete": True},
        {"done": 5},
        {},
        {"complete": 1, "failed": {"age": "1d"}},  # one bad: neither is written
    ):
        with pytest.raises(InvalidJob):
            queue.set_retention(**bad)
    assert r.hgetall(queue.keys.retention) == before


def test_finishing_past_the_count_removes_the_oldest_whole(queue: Queue, r: redis.Redis) -> None:
    queue.set_retention(complete={"count": 3})
    jobs = [queue.create_job("t", {"title": "w"}).tags("t").track().save() for _ in range(8)]
    for _ in jobs:
        finish(queue, "t", True)
    ids = [j.id for j in jobs]
    assert _ids(queue, "complete") == ids[-3:]
    assert r.zcard(queue.keys.finished("complete")) == 3
    for gone in ids[:-3]:
        assert _gone(queue, r, gone)  # type: ignore[arg-type]
        with pytest.raises(JobNotFound):
            queue.get_job(gone)  # type: ignore[arg-type]
    assert queue.tags() == {"t": 3} and queue.tagged("t").total == 3
    assert queue.search("w").total == 3 and len(queue.tracked()) == 3
    assert queue.counts()["complete"] == 3


def test_failed_jobs_have_their_own_policy(queue: Queue) -> None:
    queue.set_retention(failed={"count": 1}, complete=None)
    for _ in range(3):
        queue.create_job("t").save()
        finish(queue, "t", False)
    for _ in range(3):
        queue.create_job("t").save()
        finish(queue, "t", True)
    assert len(_ids(queue, "failed")) == 1 and len(_ids(queue, "complete")) == 3


def test_a_job_policy_wins_over_the_queue(queue: Queue, r: redis.Redis) -> None:
    keep = queue.create_job("t").save()
    finish(queue, "t", True)
    gone = queue.create_job("t").remove_on_complete(True).save()
    finish(queue, "t", True)
    assert _gone(queue, r, gone.id)  # type: ignore[arg-type]
    trim = queue.create_job("t").remove_on_complete({"count": 1}).save()
    assert queue.get_job(trim.id).remove_on_complete() == {"count": 1, "age": None}  # type: ignore[arg-type]
    finish(queue, "t", True)  # it keeps the newest completed job only: itself
    assert _ids(queue, "complete") == [trim.id]
    assert _gone(queue, r, keep.id)  # type: ignore[arg-type]
    failing = queue.create_job("t").remove_on_fail(True).save()
    assert queue.get_job(failing.id).to_dict()["removeOnFail"] is True  # type: ignore[arg-type]
    finish(queue, "t", False)
    assert _gone(queue, r, failing.id)  # type: ignore[arg-type]
    for bad in (None, -1, {"age": -5}, "yes", {"count": 1, "when": 2}):
        with pytest.raises(InvalidJob):
            queue.create_job("t").remove_on_fail(bad)


def test_ages_pass_and_the_sweep_removes(queue: Queue, r: redis.Redis) -> None:
    queue.set_retention(complete={"age": 60_000})
    jobs = [queue.create_job("t").save() for _ in range(4)]
    for _ in jobs:
        finish(queue, "t", True)
    assert len(_ids(queue, "complete")) == 4  # none is a minute old
    # Two of them finished two minutes ago, as far as the finished set tells.
    old = r.time()[0] * 1000 - 120_000
    for job in jobs[:2]:
        r.zadd(queue.keys.finished("complete"), {f"{len(str(job.id)):02d}|{job.id}": old})
    assert queue.scripts.call(calls.retain(queue.keys, defaults.SWEEP_LIMIT)) == (0, 2)
    assert _ids(queue, "complete") == [j.id for j in jobs[2:]]


def test_the_sweep_takes_in_jobs_node_kue_finished(queue: Queue, r: redis.Redis) -> None:
    queue.set_retention(complete={"count": 2})
    for i in range(1, 6):  # completed by a Node Kue worker: Kue's keys only
        r.hset(
            queue.keys.job(i),
            mapping={"type": "t", "state": "complete", "updated_at": str(1000 + i)},
        )
        r.zadd(queue.keys.state("complete"), {f"01|{i}": 0})
        r.zadd(queue.keys.type_state("t", "complete"), {f"01|{i}": 0})
        r.zadd(queue.keys.jobs, {f"01|{i}": 0})
    r.hset(queue.keys.job(6), mapping={"type": "t", "state": "inactive"})
    r.zadd(queue.keys.finished("complete"), {"01|6": 1})  # moved on by Node Kue: only dropped
    found, removed = queue.scripts.call(calls.retain(queue.keys, defaults.SWEEP_LIMIT))
    assert found == 5 and removed == 4  # the three oldest of five, and the stale member
    assert _ids(queue, "complete") == [4, 5]
    assert queue.get_job(6).state == "inactive"


def test_a_worker_process_sweeps(queue: Queue, redis_url: str, prefix: str) -> None:
    queue.set_retention(complete={"count": 1})
    for i in (1, 2, 3):
        queue.client.hset(queue.keys.job(i), mapping={"type": "t", "state": "complete"})
        queue.client.zadd(queue.keys.state("complete"), {f"01|{i}": 0})
    worker = Queue(redis_url, prefix=prefix)
    try:
        worker.process("other", lambda job: None)
        wait_for(lambda: queue.client.zcard(queue.keys.state("complete")) == 1, timeout=10)
    finally:
        worker.shutdown()
        worker.close()


def test_no_record_key_for_a_plain_job_until_it_finishes(queue: Queue, r: redis.Redis) -> None:
    queue.create_job("t", {"n": 1}).save()
    plain: set[Any] = keys_under(r, queue.prefix)
    assert not any(":finished:" in k or ":words" in k or ":tag" in k for k in plain)
    finish(queue, "t", True)
    assert r.exists(queue.keys.finished("complete"))
    assert not r.exists(queue.keys.retention)  # defaults are not written
