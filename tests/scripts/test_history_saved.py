"""A job saved waiting has no history key until it moves: its save entry is implied by its hash
(saved_entry in lib/events.lua, QueueRecords.history) and written first by its first
transition. A plain job's claim and completion leave their entries in its hash's trail
(trail_entries in lib/events.lua),
written out ahead of any other entry: a job that runs once and completes has no history key."""

from __future__ import annotations

import redis

from kue_core import Queue
from kue_core.base.keys import zid
from kue_core.store import calls
from tests.conftest import finish


def _created(queue: Queue, job_id: int) -> int | None:
    return queue.get_job(job_id).created_at


def test_a_waiting_job_has_no_history_key_and_reads_its_save(queue: Queue, r: redis.Redis) -> None:
    job = queue.create_job("t", {"n": 1}).save()
    assert job.id is not None
    assert r.exists(queue.keys.history(job.id)) == 0
    saved = queue.history(job.id)
    assert saved == [{"state": "inactive", "at": _created(queue, job.id)}]
    queue.create_job("t").save()  # then fails: its trail is written out with the failure
    finish(queue, "t", ok=True)
    finish(queue, "t", ok=False)
    after = queue.history(job.id)
    assert [e["state"] for e in after] == ["inactive", "active", "complete"]
    assert after[0] == saved[0]
    assert r.exists(queue.keys.history(job.id)) == 0  # ran once and completed: no key


def test_a_delayed_job_reads_delayed_then_keeps_it(queue: Queue, r: redis.Redis) -> None:
    job = queue.create_job("t").delay(60_000).save()
    assert job.id is not None
    saved = queue.history(job.id)
    assert saved == [{"state": "delayed", "at": _created(queue, job.id)}]
    job.set_state("inactive")
    assert queue.history(job.id)[0] == saved[0]
    assert [e["state"] for e in queue.history(job.id)] == ["delayed", "inactive"]


def test_a_change_of_delay_before_any_move_keeps_the_save_entry(
    queue: Queue, r: redis.Redis
) -> None:
    job = queue.create_job("t").save()
    assert job.id is not None
    job.delay(30_000).update()  # the hash now has a delay; the save had none
    assert r.exists(queue.keys.history(job.id)) == 1
    assert queue.history(job.id) == [{"state": "inactive", "at": _created(queue, job.id)}]
    debounced = queue.create_job("u").unique("k", "debounce").save()
    assert debounced.id is not None
    again = queue.create_job("u").unique("k", "debounce").delay(5_000).save()
    assert again.id == debounced.id
    states = [e["state"] for e in queue.history(debounced.id)]
    assert states == ["inactive", "delayed"]


def test_other_saves_write_their_entry(queue: Queue, r: redis.Redis) -> None:
    first = queue.create_job("t").save()
    blocked = queue.create_job("t").depends_on(first).save()
    assert blocked.id is not None
    assert blocked.state == "blocked"
    assert r.lrange(queue.keys.history(blocked.id), 0, -1) != []
    finish(queue, "t", ok=True)  # releases it
    assert [e["state"] for e in queue.history(blocked.id)] == ["blocked", "inactive"]


def test_a_node_kue_job_gets_its_save_entry_at_its_first_move(
    queue: Queue, r: redis.Redis, prefix: str
) -> None:
    # As Node Kue saves a job: the hash and the sets, no history.
    r.hset(
        f"{prefix}:job:77",
        mapping={
            "type": "t", "data": "{}", "priority": "0", "state": "inactive",
            "created_at": "1700000000000", "promote_at": "1700000000000",
            "updated_at": "1700000000000", "max_attempts": "1",
        },
    )  # fmt: skip
    for key in (f"{prefix}:jobs", f"{prefix}:jobs:inactive", f"{prefix}:jobs:t:inactive"):
        r.zadd(key, {zid(77): 0})
    r.lpush(f"{prefix}:t:jobs", 1)
    assert queue.history(77) == [{"state": "inactive", "at": 1700000000000}]
    assert finish(queue, "t", ok=True) == 77
    entries = queue.history(77)
    assert entries[0] == {"state": "inactive", "at": 1700000000000}
    assert [e["state"] for e in entries] == ["inactive", "active", "complete"]


def test_an_unknown_job_has_no_history(queue: Queue) -> None:
    assert queue.history(424242) == []


def _claim(queue: Queue, job_type: str) -> tuple[int, str]:
    claimed = queue.scripts.call(calls.claim(queue.keys, job_type, "kue:test:1", 10_000))
    assert isinstance(claimed, tuple)
    return claimed[0], claimed[1]["lease"]


def test_the_trail_reads_as_the_entries_it_stands_for(queue: Queue, r: redis.Redis) -> None:
    saved = queue.create_job("t").save()
    assert saved.id is not None
    job_id, lease = _claim(queue, "t")
    active = queue.get_job(job_id)
    assert queue.history(job_id)[1:] == [
        {"state": "active", "at": active.started_at, "worker": "kue:test:1", "attempt": 1}
    ]
    queue.scripts.call(calls.complete(queue.keys, job_id, lease, '{"ok":true}', None))
    done = queue.get_job(job_id)
    assert done.started_at is not None and done.duration is not None
    assert queue.history(job_id)[2:] == [
        {
            "state": "complete",
            "at": done.started_at + done.duration,
            "worker": "kue:test:1",
            "attempt": 1,
            "duration": done.duration,
        }
    ]
    assert r.exists(queue.keys.history(job_id)) == 0


def test_an_entry_after_the_trail_writes_it_out_first(queue: Queue, r: redis.Redis) -> None:
    job = queue.create_job("t").attempts(3).save()
    assert job.id is not None
    job_id, lease = _claim(queue, "t")
    read = queue.history(job_id)  # saved and active: from the hash
    # retried: attempts left
    queue.scripts.call(calls.fail(queue.keys, job_id, lease, "boom", "boom", 0, None))
    written = queue.history(job.id)
    assert written[:2] == read  # what Lua wrote out is what Python read from the trail
    assert [e["state"] for e in written] == ["inactive", "active", "inactive"]
    assert r.hexists(queue.keys.job(job.id), "trail") == 0
    finish(queue, "t", ok=True)  # its second run: a trail again, after the list
    states = [(e["state"], e.get("attempt")) for e in queue.history(job.id)]
    assert states == [
        ("inactive", None), ("active", 1), ("inactive", 1), ("active", 2), ("complete", 2),
    ]  # fmt: skip


def test_a_claim_that_finds_a_trail_writes_it_out(
    queue: Queue, r: redis.Redis, prefix: str
) -> None:
    job = queue.create_job("t").save()
    assert job.id is not None
    finish(queue, "t", ok=True)
    before = queue.history(job.id)
    # Node Kue's UI moves it back to inactive: its own writes, no history entry, trail kept.
    member = zid(job.id)
    for key in (f"{prefix}:jobs:complete", f"{prefix}:jobs:t:complete"):
        r.zrem(key, member)
    for key in (f"{prefix}:jobs:inactive", f"{prefix}:jobs:t:inactive"):
        r.zadd(key, {member: 0})
    r.hset(queue.keys.job(job.id), "state", "inactive")
    r.lpush(f"{prefix}:t:jobs", 1)
    assert finish(queue, "t", ok=True) == job.id
    after = queue.history(job.id)
    assert after[:3] == before
    assert [e["state"] for e in after] == ["inactive", "active", "complete", "active", "complete"]


def test_a_trail_not_ours_reads_as_nothing(queue: Queue, r: redis.Redis) -> None:
    job = queue.create_job("t").save()
    assert job.id is not None
    r.hset(queue.keys.job(job.id), "trail", "x,y")
    assert queue.history(job.id) == [{"state": "inactive", "at": _created(queue, job.id)}]
