"""Each transition script against a real Redis: the hash, every index, tokens, history, events."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
import redis

from kue_core import InvalidJob, InvalidTransition, JobNotFound, Queue
from kue_core.base.keys import zid
from kue_core.store import calls
from tests.conftest import heard, keys_under, wait_for


@pytest.fixture
def events(r: redis.Redis, prefix: str) -> Iterator[list[dict]]:
    """Raw messages published on <prefix>:events while the test runs."""
    with heard(r, f"{prefix}:events") as got:
        yield got


def _wait_events(got: list[dict], n: int) -> list[dict]:
    wait_for(lambda: len(got) >= n)
    return got


def test_save_writes_kues_layout(queue: Queue, r: redis.Redis, prefix: str, events: list) -> None:
    job = (
        queue.create_job("email", {"to": "a@b.c"})
        .priority("high")
        .attempts(3)
        .backoff({"type": "exponential", "delay": 1000})
        .ttl(5000)
        .remove_on_complete(True)
        .save()
    )
    assert isinstance(job.id, int) and job.state == "inactive"
    h = r.hgetall(f"{prefix}:job:{job.id}")
    assert h["type"] == "email"
    assert json.loads(h["data"]) == {"to": "a@b.c"}
    assert h["priority"] == "-10" and h["state"] == "inactive" and h["max_attempts"] == "3"
    assert h["created_at"] == h["promote_at"] == h["updated_at"]
    assert h["created_at"].isdigit() and len(h["created_at"]) == 13
    assert json.loads(h["backoff"]) == {"type": "exponential", "delay": 1000}
    assert h["ttl"] == "5000" and h["removeOnComplete"] == "true"
    assert "delay" not in h and "attempts" not in h
    member = zid(job.id)
    assert r.zscore(f"{prefix}:jobs", member) == -10
    assert r.zscore(f"{prefix}:jobs:inactive", member) == -10
    assert r.zscore(f"{prefix}:jobs:email:inactive", member) == -10
    assert r.lrange(f"{prefix}:email:jobs", 0, -1) == ["1"]
    assert r.smembers(f"{prefix}:job:types") == {"email"}
    assert r.get(f"{prefix}:ids") == str(job.id)
    assert [e["state"] for e in queue.history(job.id)] == ["inactive"]
    assert _wait_events(events, 1) == [
        {"id": job.id, "event": "enqueue", "args": ["enqueue", "email"], "type": "email"}
    ]


def test_delayed_save_scores_by_due_time(
    queue: Queue, r: redis.Redis, prefix: str, events: list
) -> None:
    job = queue.create_job("reminder").delay(60_000).save()
    h = r.hgetall(f"{prefix}:job:{job.id}")
    assert h["state"] == job.state == "delayed" and h["delay"] == "60000"
    assert int(h["promote_at"]) == int(h["created_at"]) + 60_000
    member = zid(job.id)
    assert r.zscore(f"{prefix}:jobs:delayed", member) == int(h["promote_at"])
    assert r.zscore(f"{prefix}:jobs:reminder:delayed", member) == 0
    assert r.llen(f"{prefix}:reminder:jobs") == 0  # no wake-up for a job that is not due
    queue.create_job("marker").save()
    assert [e["event"] for e in _wait_events(events, 1)] == ["enqueue"]
    assert events[0]["args"] == ["enqueue", "marker"]  # the delayed job published nothing


def test_save_skips_ids_whose_hash_exists(queue: Queue, r: redis.Redis, prefix: str) -> None:
    r.hset(f"{prefix}:job:1", "type", "left-over")
    job = queue.create_job("t").save()
    assert job.id == 2
    assert r.hget(f"{prefix}:job:1", "type") == "left-over"


def test_malformed_save_call_writes_nothing(queue: Queue, r: redis.Redis, prefix: str) -> None:
    good = queue.create_job("t")._save_row()
    bad = list(good)
    bad[2] = "urgent"  # priority that is not a number
    with pytest.raises(InvalidJob):
        queue.scripts.call(calls.save(queue.keys, [good, bad]))
    assert keys_under(r, prefix) == set()


def test_update_rewrites_data_and_rescores(queue: Queue, r: redis.Redis, prefix: str) -> None:
    job = queue.create_job("t", {"a": 1}).ttl(100).remove_on_complete(True).save()
    job.data = {"a": 2}
    job.priority("critical").ttl(200).remove_on_complete(False).attempts(4).save()
    h = r.hgetall(f"{prefix}:job:{job.id}")
    assert json.loads(h["data"]) == {"a": 2} and h["priority"] == "-15" and h["ttl"] == "200"
    assert h["max_attempts"] == "4" and "removeOnComplete" not in h
    for key in (f"{prefix}:jobs", f"{prefix}:jobs:inactive", f"{prefix}:jobs:t:inactive"):
        assert r.zscore(key, zid(job.id)) == -15
    assert r.llen(f"{prefix}:t:jobs") == 1  # an update is not a new enqueue


def test_update_of_delayed_job_moves_due_time(queue: Queue, r: redis.Redis, prefix: str) -> None:
    job = queue.create_job("t").delay(1000).save()
    created = int(r.hget(f"{prefix}:job:{job.id}", "created_at"))
    job.delay(90_000).update()
    assert r.zscore(f"{prefix}:jobs:delayed", zid(job.id)) == created + 90_000


def test_set_state_moves_every_index(
    queue: Queue, r: redis.Redis, prefix: str, events: list
) -> None:
    job = queue.create_job("video").priority("low").save()
    job.set_state("failed")
    member = zid(job.id)
    assert r.hget(f"{prefix}:job:{job.id}", "state") == "failed"
    assert r.zscore(f"{prefix}:jobs:inactive", member) is None
    assert r.zscore(f"{prefix}:jobs:video:inactive", member) is None
    assert r.zscore(f"{prefix}:jobs:failed", member) == 10
    assert r.zscore(f"{prefix}:jobs:video:failed", member) == 10
    r.hset(f"{prefix}:job:{job.id}", "attempts", 1)
    job.set_state("inactive")  # a manual retry: tokens pushed, attempts given anew
    assert r.zscore(f"{prefix}:jobs:inactive", member) == 10
    assert r.llen(f"{prefix}:video:jobs") == 2
    assert r.hget(f"{prefix}:job:{job.id}", "attempts") is None
    job.set_state("delayed")
    assert r.zscore(f"{prefix}:jobs:delayed", member) == int(
        r.hget(f"{prefix}:job:{job.id}", "promote_at")
    )
    assert [h["state"] for h in queue.history(job.id)] == [
        "inactive",
        "failed",
        "inactive",
        "delayed",
    ]
    assert [e["event"] for e in _wait_events(events, 2)] == ["enqueue", "enqueue"]


def test_set_state_refuses_bad_targets(queue: Queue, r: redis.Redis, prefix: str) -> None:
    job = queue.create_job("t").save()
    before = keys_under(r, prefix)  # the queue's own (others' may expire meanwhile)
    with pytest.raises(InvalidTransition):
        job.set_state("active")
    with pytest.raises(InvalidTransition):
        # the script refuses it too
        queue.scripts.call(calls.set_state(queue.keys, job.id, "active"))
    with pytest.raises(InvalidJob, match="state"):
        job.set_state("bogus")
    with pytest.raises(InvalidJob):
        queue.scripts.call(calls.set_state(queue.keys, job.id, "bogus"))
    with pytest.raises(JobNotFound):
        queue.scripts.call(calls.set_state(queue.keys, 999_999, "failed"))
    assert keys_under(r, prefix) == before
    assert r.hget(f"{prefix}:job:{job.id}", "state") == "inactive"
    assert len(queue.history(job.id)) == 1


def test_same_state_is_a_no_op(queue: Queue, r: redis.Redis, prefix: str) -> None:
    job = queue.create_job("t").save()
    job.set_state("inactive")
    assert r.llen(f"{prefix}:t:jobs") == 1
    assert len(queue.history(job.id)) == 1


def test_set_priority_rescores(queue: Queue, r: redis.Redis, prefix: str) -> None:
    job = queue.create_job("t").save()
    job.set_priority("critical")
    member = zid(job.id)
    assert r.hget(f"{prefix}:job:{job.id}", "priority") == "-15"
    for key in (f"{prefix}:jobs", f"{prefix}:jobs:inactive", f"{prefix}:jobs:t:inactive"):
        assert r.zscore(key, member) == -15
    delayed = queue.create_job("t").delay(5000).save()
    due = r.zscore(f"{prefix}:jobs:delayed", zid(delayed.id))
    delayed.set_priority(3)
    assert r.zscore(f"{prefix}:jobs:delayed", zid(delayed.id)) == due  # still by due time
    assert r.zscore(f"{prefix}:jobs:t:delayed", zid(delayed.id)) == 3
    with pytest.raises(JobNotFound):
        queue.scripts.call(calls.set_priority(queue.keys, 999_999, 1))
    assert r.exists(f"{prefix}:job:999999") == 0


def test_progress_and_log(queue: Queue, r: redis.Redis, prefix: str, events: list) -> None:
    job = queue.create_job("t").save()
    _wait_events(events, 1)
    job.progress(1, 3, {"step": "one"})
    job.progress(7, 5)
    h = r.hgetall(f"{prefix}:job:{job.id}")
    assert h["progress"] == "100" and json.loads(h["progress_data"]) == {"step": "one"}
    assert job.progress() == 100
    job.log("sent %s to %s", 3, "a@b.c")
    job.log({"k": 1})
    job.log("50% done")
    assert queue.get_log(job.id) == ["sent 3 to a@b.c", '{"k":1}', "50% done"]
    assert _wait_events(events, 3)[1:] == [
        {"id": job.id, "event": "progress", "args": ["progress", 33, {"step": "one"}], "type": "t"},
        {"id": job.id, "event": "progress", "args": ["progress", 100, None], "type": "t"},
    ]
    with pytest.raises(InvalidJob, match="progress"):
        job.progress(1, 0)


def test_progress_and_log_of_removed_job_write_nothing(
    queue: Queue, r: redis.Redis, prefix: str
) -> None:
    job = queue.create_job("t").save()
    job.remove()
    with pytest.raises(JobNotFound):
        job.progress(1, 2)
    with pytest.raises(JobNotFound):
        job.log("late line")
    assert not r.exists(f"{prefix}:job:{job.id}", f"{prefix}:job:{job.id}:log")


def test_remove_clears_every_index(queue: Queue, r: redis.Redis, prefix: str, events: list) -> None:
    job = queue.create_job("t").save()
    other = queue.create_job("t").save()
    job.log("a line")
    # A Kue client interrupted mid-MULTI can leave a job in two state sets.
    r.zadd(f"{prefix}:jobs:failed", {zid(job.id): 0})
    r.zadd(f"{prefix}:jobs:t:complete", {zid(job.id): 0})
    job.remove()
    for key in r.scan_iter(match=f"{prefix}:jobs*"):
        if r.type(key) == "zset":
            assert r.zscore(key, zid(job.id)) is None, key
    assert not r.exists(
        f"{prefix}:job:{job.id}", f"{prefix}:job:{job.id}:log", f"{prefix}:job:{job.id}:history"
    )
    assert r.zscore(f"{prefix}:jobs:inactive", zid(other.id)) == 0
    assert _wait_events(events, 3)[2] == {
        "id": job.id,
        "event": "remove",
        "args": ["remove", "t"],
        "type": "t",
    }
    with pytest.raises(JobNotFound):
        job.remove()


def test_history_is_capped(queue: Queue) -> None:
    job = queue.create_job("t").save()
    for _ in range(30):
        job.set_state("failed")
        job.set_state("inactive")
    history = queue.history(job.id)
    assert len(history) == 50
    assert history[-1]["state"] == "inactive" and history[-1]["from"] == "failed"
