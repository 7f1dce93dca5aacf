"""The worker scripts one by one: claim, complete, fail, release, heartbeat, recover, promote."""

from __future__ import annotations

import json
from typing import Any

import redis

from kue_core import Queue
from kue_core.base.keys import Keys, zid
from kue_core.store import calls
from kue_core.store.calls import PAUSED, Holder
from tests.conftest import snapshot, wait_for, written_since
from tests.scripts.claiming import complete as _complete
from tests.scripts.claiming import fail as _fail

W = "worker-a"
LEASE = 60_000


def _server_ms(r: redis.Redis) -> int:
    seconds, micros = r.time()
    return int(seconds) * 1000 + int(micros) // 1000


def _claim(queue: Queue, job_type: str = "t", worker: str = W) -> tuple[int, dict[str, str]]:
    claimed = queue.scripts.call(calls.claim(queue.keys, job_type, worker, LEASE))
    assert isinstance(claimed, tuple)
    return claimed


def test_claim_takes_the_best_job_priority_then_fifo(queue: Queue) -> None:
    ids = {}
    for name, prio in [("a", "low"), ("b", "normal"), ("c", "high"), ("d", "high")]:
        ids[name] = queue.create_job("t", {"n": name}).priority(prio).save().id
    order = [_claim(queue)[0] for _ in range(4)]
    assert order == [ids["c"], ids["d"], ids["b"], ids["a"]]
    assert queue.scripts.call(calls.claim(queue.keys, "t", W, LEASE)) is None


def test_claim_fifo_across_id_lengths(queue: Queue, r: redis.Redis, prefix: str) -> None:
    r.set(f"{prefix}:ids", 8)
    first = [queue.create_job("t").save().id for _ in range(3)]  # 9, 10, 11
    r.set(f"{prefix}:ids", 99)
    last = queue.create_job("t").save().id  # 100
    assert [_claim(queue)[0] for _ in range(4)] == [*first, last]


def test_claim_moves_to_active_under_a_lease(queue: Queue, r: redis.Redis, prefix: str) -> None:
    job = queue.create_job("t", {"x": 1}).ttl(5000).save()
    k = Keys(prefix)
    assert r.llen(k.tokens("t")) == 1
    job_id, fields = _claim(queue)
    assert job_id == job.id
    assert fields["state"] == "active" and fields["workerId"] == W and fields["lease"] == "1"
    assert json.loads(fields["data"]) == {"x": 1}
    member = zid(job_id)
    assert r.zscore(k.state("active"), member) is not None
    assert r.zscore(k.type_state("t", "active"), member) == 0
    assert r.zcard(k.state("inactive")) == r.zcard(k.type_state("t", "inactive")) == 0
    # Held by its worker's process lease (heartbeat.lua): nothing is written per job.
    assert int(fields["started_at"]) > 0 and r.zcard(k.leases) == 0
    assert r.llen(k.tokens("t")) == 0  # the claim took the job's wake-up token
    assert queue.history(job_id)[-1] | {"at": 0} == {
        "state": "active",
        "at": 0,
        "worker": W,
        "attempt": 1,
    }


def test_claim_on_an_empty_type_clears_stale_tokens(queue: Queue, r: redis.Redis) -> None:
    job = queue.create_job("t").save()
    job.remove()  # Kue leaves the token behind
    assert r.llen(queue.keys.tokens("t")) == 1
    assert queue.scripts.call(calls.claim(queue.keys, "t", W, LEASE)) is None
    assert r.exists(queue.keys.tokens("t")) == 0


def test_claim_skips_members_without_a_job(queue: Queue, r: redis.Redis) -> None:
    r.zadd(queue.keys.type_state("t", "inactive"), {"02|77": -100})
    r.zadd(queue.keys.state("inactive"), {"02|77": -100})
    job = queue.create_job("t").save()
    assert _claim(queue)[0] == job.id
    assert r.zcard(queue.keys.state("inactive")) == 0


def test_claim_gives_a_worker_only_jobs_of_its_type(queue: Queue, r: redis.Redis) -> None:
    """A member in one type's inactive set whose hash names another type (an index written
    by hand, or by a client interrupted while changing a job's type) is not run by the wrong
    handler: the claim drops it from this type's set and leaves the job waiting as it is."""
    other = queue.create_job("other").save()
    r.zadd(queue.keys.type_state("t", "inactive"), {zid(other.id): -100})
    mine = queue.create_job("t").save()
    assert _claim(queue)[0] == mine.id
    assert r.zscore(queue.keys.type_state("t", "inactive"), zid(other.id)) is None
    assert queue.get_job(other.id).state == "inactive"  # type: ignore[union-attr]
    assert r.zscore(queue.keys.state("inactive"), zid(other.id)) is not None
    assert _claim(queue, "other")[0] == other.id


def test_complete_stores_result_and_claims_next(queue: Queue, r: redis.Redis) -> None:
    a = queue.create_job("t").save()
    b = queue.create_job("t").save()
    job_id, fields = _claim(queue)
    ended = _complete(queue, job_id, fields["lease"], '{"ok":true}', (W, LEASE))
    assert ended.outcome == "complete"
    assert ended.next_job is not None and ended.next_job[0] == b.id
    done = queue.get_job(a.id).to_dict()  # type: ignore[arg-type]
    assert done["state"] == "complete" and done["result"] == {"ok": True}
    assert done["progress"] == 100 and done["attempts"]["made"] == 1
    assert done["duration"] >= 0
    assert queue.work_time() == done["duration"]
    assert r.zscore(queue.keys.leases, zid(a.id)) is None
    assert queue.ids("complete") == [a.id]


def test_complete_with_a_stale_token_is_refused(queue: Queue) -> None:
    queue.create_job("t").save()
    job_id, _fields = _claim(queue)
    before = queue.get_job(job_id).to_dict()
    ended = _complete(queue, job_id, "999", "1", None)
    assert (ended.outcome, ended.next_job) == ("refused", None)
    assert queue.get_job(job_id).to_dict() == before


def test_remove_on_complete_deletes_everything(queue: Queue, prefix: str, r: redis.Redis) -> None:
    job = queue.create_job("t").remove_on_complete(True).save()
    job.log("a line")
    job_id, fields = _claim(queue)
    assert _complete(queue, job_id, fields["lease"], "null", None).outcome == "complete"
    left = {k for k in r.scan_iter(match=f"{prefix}:*")}
    counters = {queue.keys.ids, queue.keys.types, queue.keys.work_time, queue.keys.totals}
    assert {k for k in left if not k.startswith(f"{prefix}:stats:complete:")} <= counters


def test_fail_retries_delays_or_fails(queue: Queue, r: redis.Redis) -> None:
    job = queue.create_job("t").attempts(3).save()
    job_id, f = _claim(queue)
    assert _fail(queue, job_id, f["lease"], "E: one", "E: one\ntb", 0, None).outcome == "inactive"
    assert queue.ids("inactive", "t") == [job.id]
    assert r.llen(queue.keys.tokens("t")) == 1  # a retry wakes a worker
    job_id, f = _claim(queue)
    assert _fail(queue, job_id, f["lease"], "E: two", "E: two", 500, None).outcome == "delayed"
    h = r.hgetall(queue.keys.job(job_id))
    assert int(h["promote_at"]) == int(h["failed_at"]) + 500
    assert r.zscore(queue.keys.state("delayed"), zid(job_id)) == int(h["promote_at"])
    queue.get_job(job_id).set_state("inactive")  # due now, without waiting for the backoff
    job_id, f = _claim(queue)
    assert _fail(queue, job_id, f["lease"], "E: 3", "E: 3\ntb", 0, None).outcome == "failed"
    done = queue.get_job(job_id).to_dict()
    assert done["state"] == "failed" and done["error"] == "E: 3\ntb"
    assert done["attempts"] == {"made": 3, "remaining": 0, "max": 3}
    assert [e["state"] for e in queue.history(job_id)] == [
        "inactive",
        "active",
        "inactive",
        "active",
        "delayed",
        "inactive",
        "active",
        "failed",
    ]


def _completed_and_requeued(queue: Queue) -> tuple[int, dict[str, str]]:
    """A job of one attempt that completed, was put back to inactive (as Kue, or a scheduler
    on Kue, may) and claimed again."""
    job = queue.create_job("t").save()
    job_id, f = _claim(queue)
    assert _complete(queue, job_id, f["lease"], "1", None).outcome == "complete"
    assert queue.get_job(job_id).attempts_made == 1
    job.set_state("inactive")  # out of complete: attempts are kept (only a failed job's reset)
    return _claim(queue)


def test_complete_counts_attempts_up_to_the_maximum_as_kue(queue: Queue) -> None:
    job_id, f = _completed_and_requeued(queue)
    assert _complete(queue, job_id, f["lease"], "2", None).outcome == "complete"
    done = queue.get_job(job_id).to_dict()
    assert done["attempts"] == {"made": 1, "remaining": 0, "max": 1}


def test_fail_counts_attempts_up_to_the_maximum_as_kue(queue: Queue) -> None:
    job_id, f = _completed_and_requeued(queue)
    assert _fail(queue, job_id, f["lease"], "E", "E", 0, None).outcome == "failed"
    done = queue.get_job(job_id).to_dict()
    assert done["attempts"] == {"made": 1, "remaining": 0, "max": 1}
    assert queue.history(job_id)[-1]["attempt"] == 1


def test_recover_counts_attempts_up_to_the_maximum_as_kue(queue: Queue, r: redis.Redis) -> None:
    job_id, _ = _completed_and_requeued(queue)
    r.zadd(queue.keys.leases, {zid(job_id): 1})
    # stalled past the limit: fails
    assert queue.scripts.call(calls.recover(queue.keys, 0, 100)) == (0, 1)
    done = queue.get_job(job_id).to_dict()
    assert done["state"] == "failed"
    assert done["attempts"] == {"made": 1, "remaining": 0, "max": 1}


def test_fail_never_retry(queue: Queue) -> None:
    queue.create_job("t").attempts(5).save()
    job_id, f = _claim(queue)
    assert _fail(queue, job_id, f["lease"], "m", "m", -1, None).outcome == "failed"


def test_release_gives_back_without_counting(queue: Queue) -> None:
    queue.create_job("t").save()
    job_id, f = _claim(queue)
    assert queue.scripts.call(calls.release(queue.keys, job_id, "7")) is False
    assert queue.scripts.call(calls.release(queue.keys, job_id, f["lease"])) is True
    job = queue.get_job(job_id)
    assert job.state == "inactive" and job.attempts_made == 0
    assert _claim(queue)[1]["lease"] == "2"  # a new claim, a new fencing token


def test_heartbeat_renews_and_reports_lost(queue: Queue, r: redis.Redis) -> None:
    queue.create_job("t").save()
    queue.create_job("t").save()
    assert (
        queue.scripts.call(
            calls.heartbeat(queue.keys, W, LEASE, "{}", [], instance="i1", mode="start")
        )
        == []
    )
    a, fa = _claim(queue)
    b, fb = _claim(queue)
    queue.client.hset(queue.keys.job(b), "lease", "99")  # as if recovered and re-claimed
    held = [(a, fa["lease"]), (b, fb["lease"])]
    before = _server_ms(r)
    lost = queue.scripts.call(
        calls.heartbeat(queue.keys, W, LEASE, '{"host":"h"}', held, instance="i1")
    )
    assert lost == [(b, fb["lease"])]
    assert r.zscore(queue.keys.worker_leases, W) >= before + LEASE  # type: ignore[operator]
    assert r.zcard(queue.keys.leases) == 0  # nothing per job
    assert r.zrange(queue.keys.workers, 0, -1) == [W]
    h = r.hgetall(queue.keys.worker(W))
    # The jobs a worker runs are read from the active jobs (Queue.workers()), not kept here.
    assert set(h) == {"info", "heartbeat", "instance", "lease_ms"}
    assert json.loads(h["info"]) == {"host": "h"}
    assert (h["instance"], h["lease_ms"]) == ("i1", str(LEASE))
    assert 0 < r.pttl(queue.keys.worker(W)) <= 3 * LEASE


def test_heartbeat_keeps_one_instance_per_worker_id(queue: Queue, r: redis.Redis) -> None:
    def beat(*args: Any, **kwargs: Any) -> Any:
        return queue.scripts.call(calls.heartbeat(queue.keys, *args, **kwargs))

    key = queue.keys.worker(W)
    assert beat(W, LEASE, '{"pid":1}', [], instance="i1", mode="start") == []
    first = r.hgetall(key)
    # Another instance: refused while the first renewed within its lease; nothing written.
    for mode in ("start", "beat", "leave"):
        taken = beat(W, 300, '{"pid":2}', [], instance="i2", mode=mode)
        assert isinstance(taken, Holder), mode
        assert (taken.info, taken.heartbeat, taken.lease_ms) == (
            {"pid": 1},
            int(first["heartbeat"]),
            LEASE,
        )
        assert 0 <= taken.now - taken.heartbeat < 5_000
        assert r.hgetall(key) == first
    # Silent past its lease: a new instance starts; the old one's beats and leave are refused.
    r.hset(key, "heartbeat", _server_ms(r) - LEASE - 1)
    assert beat(W, 300, '{"pid":2}', [], instance="i2", mode="start") == []
    assert (r.hget(key, "instance"), json.loads(r.hget(key, "info"))) == ("i2", {"pid": 2})  # type: ignore[arg-type]
    # Even while the new holder is silent past its lease in turn, the old one stays out.
    r.hset(key, "heartbeat", _server_ms(r) - 1000)
    second = r.hgetall(key)
    assert isinstance(beat(W, LEASE, "{}", [], instance="i1"), Holder)
    assert isinstance(beat(W, LEASE, "{}", [], instance="i1", mode="leave"), Holder)
    assert r.hgetall(key) == second and r.zrange(queue.keys.workers, 0, -1) == [W]
    # force takes a live id; leave by the holder removes it; a beat registers again.
    assert beat(W, LEASE, '{"pid":3}', [], instance="i3", mode="force") == []
    assert r.hget(key, "instance") == "i3"
    assert beat(W, LEASE, "{}", [], instance="i3", mode="leave") == []
    assert not r.exists(key) and r.zrange(queue.keys.workers, 0, -1) == []
    assert beat(W, LEASE, "{}", [], instance="i1", mode="leave") == []  # nothing to leave
    assert beat(W, LEASE, "{}", [], instance="i1") == [] and r.hget(key, "instance") == "i1"


def test_recover_requeues_then_fails_past_the_stall_limit(queue: Queue, r: redis.Redis) -> None:
    job = queue.create_job("t").save()
    member = zid(job.id)
    job_id, f = _claim(queue)
    assert queue.scripts.call(calls.recover(queue.keys, 1, 100)) == (0, 0)  # lease still valid
    r.zadd(queue.keys.leases, {member: 1})
    assert queue.scripts.call(calls.recover(queue.keys, 1, 100)) == (1, 0)
    assert queue.get_job(job_id).state == "inactive"
    assert r.zscore(queue.keys.leases, member) is None
    outcome = _complete(queue, job_id, f["lease"], "1", None).outcome
    assert outcome == "refused"  # the stale worker's late result
    job_id, f = _claim(queue)
    r.zadd(queue.keys.leases, {member: 1})
    assert queue.scripts.call(calls.recover(queue.keys, 1, 100)) == (0, 1)
    done = queue.get_job(job_id)
    assert done.state == "failed" and "stalled 2 times" in (done.error or "")


def test_promote_moves_due_jobs_and_reports_the_next(queue: Queue, r: redis.Redis) -> None:
    due = queue.create_job("t").delay(1).save()
    later = queue.create_job("t").delay(60_000).save()
    due_at = queue.get_job(due.id).promote_at  # type: ignore[arg-type]
    wait_for(lambda: _server_ms(r) >= due_at)  # type: ignore[operator]
    moved, next_due, _now, _schedule = queue.scripts.call(calls.promote(queue.keys, 100))
    assert moved == 1
    assert next_due == queue.get_job(later.id).promote_at  # type: ignore[arg-type]
    assert queue.get_job(due.id).state == "inactive"  # type: ignore[arg-type]
    assert r.llen(queue.keys.tokens("t")) == 1
    assert queue.scripts.call(calls.promote(queue.keys, 100))[0] == 0


def test_set_state_and_remove_end_a_lease(queue: Queue, r: redis.Redis) -> None:
    a = queue.create_job("t").save()
    b = queue.create_job("t").save()
    _, fa = _claim(queue)
    _, _fb = _claim(queue)
    a.set_state("inactive")
    b.remove()
    assert r.zcard(queue.keys.leases) == 0
    assert _complete(queue, a.id, fa["lease"], "1", None).outcome == "refused"  # type: ignore[arg-type]


def test_claim_of_a_paused_type_writes_nothing(queue: Queue, r: redis.Redis) -> None:
    job = queue.create_job("t").save()
    assert queue.pause("t") is True and queue.pause("t") is False
    assert queue.paused() == ["t"]
    before = snapshot(r, queue.prefix)
    assert queue.scripts.call(calls.claim(queue.keys, "t", W, LEASE)) == PAUSED
    assert not written_since(r, queue.prefix, before)
    # Other types are not affected.
    other = queue.create_job("u").save()
    assert _claim(queue, "u")[0] == other.id
    assert queue.resume("t") is True and queue.resume("t") is False
    assert queue.paused() == []
    assert r.llen(queue.keys.resumed("t")) == 1 and 0 < r.pttl(queue.keys.resumed("t")) <= 60_000
    assert _claim(queue)[0] == job.id


def test_complete_of_a_paused_type_finishes_but_claims_nothing(queue: Queue) -> None:
    a = queue.create_job("t").save()
    b = queue.create_job("t").save()
    job_id, fields = _claim(queue)
    queue.pause("t")
    ended = _complete(queue, job_id, fields["lease"], "1", (W, LEASE))
    assert (ended.outcome, ended.next_job) == ("complete", PAUSED)
    assert queue.get_job(a.id).state == "complete"  # type: ignore[arg-type]
    assert queue.get_job(b.id).state == "inactive"  # type: ignore[arg-type]
