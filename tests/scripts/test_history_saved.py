"""A job saved waiting has no history key until it moves: its save entry is implied by its hash
(lib.lua saved_entry, QueueRecords.history) and written first by its first transition."""

from __future__ import annotations

import redis

from kue_core import Queue
from kue_core.keys import zid
from tests.conftest import finish


def _created(queue: Queue, job_id: int) -> int | None:
    return queue.get_job(job_id).created_at


def test_a_waiting_job_has_no_history_key_and_reads_its_save(queue: Queue, r: redis.Redis) -> None:
    job = queue.create_job("t", {"n": 1}).save()
    assert job.id is not None
    assert r.exists(queue.keys.history(job.id)) == 0
    saved = queue.history(job.id)
    assert saved == [{"state": "inactive", "at": _created(queue, job.id)}]
    finish(queue, "t", ok=True)
    after = queue.history(job.id)
    assert [e["state"] for e in after] == ["inactive", "active", "complete"]
    assert after[0] == saved[0]  # what Lua wrote is what Python implied


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
