"""The lease per worker process (heartbeat.lua) and the recovery of a worker's jobs once it
expires (recover.lua): a scan of the active jobs across calls, the jobs a worker held up
claimed after its expiry left alone, and the per-job leases of the version before."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import redis

from kue_core import Queue, doctor
from kue_core.aio import AsyncQueue
from kue_core.base.keys import zid
from kue_core.store import calls
from tests.conftest import wait_for
from tests.scripts.claiming import complete as _complete

W, OTHER = "worker-a", "worker-b"
LEASE = 60_000


def _server_ms(r: redis.Redis) -> int:
    seconds, micros = r.time()
    return int(seconds) * 1000 + int(micros) // 1000


def _beat(queue: Queue, worker: str, held: Any = (), mode: str = "beat") -> Any:
    return queue.scripts.call(
        calls.heartbeat(
            queue.keys,
            worker,
            LEASE,
            json.dumps({"id": worker}),
            list(held),
            instance=worker,
            mode=mode,
        )
    )


def _claim(queue: Queue, worker: str = W) -> tuple[int, dict[str, str]]:
    claimed = queue.scripts.call(calls.claim(queue.keys, "t", worker, LEASE))
    assert isinstance(claimed, tuple)
    return claimed


def _recover(queue: Queue, limit: int = 100) -> tuple[int, int]:
    got = queue.scripts.call(calls.recover(queue.keys, 5, limit))
    return got.requeued, got.failed


def _expire(queue: Queue, r: redis.Redis, worker: str) -> int:
    """End ``worker``'s process lease now (as if it stopped renewing it): its expiry."""
    now = _server_ms(r)
    r.zadd(queue.keys.worker_leases, {worker: now})
    wait_for(lambda: _server_ms(r) > now)  # a claim from here on starts after it
    return now


def test_a_dead_workers_jobs_are_recovered_once(queue: Queue, r: redis.Redis) -> None:
    for _ in range(4):
        queue.create_job("t").save()
    assert _beat(queue, W, mode="start") == [] and _beat(queue, OTHER, mode="start") == []
    mine = [_claim(queue) for _ in range(3)]
    theirs = _claim(queue, OTHER)
    assert _recover(queue) == (0, 0)  # every lease is live
    _expire(queue, r, W)
    assert _recover(queue) == (3, 0)
    for job_id, fields in mine:
        job = queue.get_job(job_id)
        assert job is not None and job.state == "inactive"
        assert r.hget(queue.keys.job(job_id), "stalls") == "1"
        assert _complete(queue, job_id, fields["lease"], "1", None).outcome == "refused"
    assert queue.get_job(theirs[0]).state == "active"  # type: ignore[union-attr]
    # The scan is done: the dead worker's lease and its entry in recovering are gone.
    assert r.zscore(queue.keys.worker_leases, W) is None
    assert not r.exists(queue.keys.recovering)
    assert _recover(queue) == (0, 0)
    assert r.zscore(queue.keys.worker_leases, OTHER) is not None


def test_the_scan_goes_on_across_calls(queue: Queue, r: redis.Redis) -> None:
    """More active jobs than a call's ``limit`` (and past the size at which Redis keeps a
    zset as a list, where ZSCAN answers in one step): each call scans at most ``limit``
    members, the cursor kept in <p>:recovering, until every job of the worker is back."""
    queue.save_many([queue.create_job("t") for _ in range(200)])
    _beat(queue, W, mode="start")
    _beat(queue, OTHER, mode="start")
    mine = [_claim(queue)[0] for _ in range(150)]
    theirs = [_claim(queue, OTHER)[0] for _ in range(50)]
    _expire(queue, r, W)
    calls_made, requeued = 0, 0
    while calls_made < 100:
        got, failed = _recover(queue, limit=20)
        assert failed == 0
        calls_made += 1
        requeued += got
        if not r.exists(queue.keys.recovering):
            break
        expiry, cursor = r.hget(queue.keys.recovering, W).split(":")  # type: ignore[union-attr]
        assert int(cursor) > 0 and int(expiry) > 0
    assert requeued == 150 and calls_made >= 200 // 20 // 2
    assert all(queue.get_job(i).state == "inactive" for i in mine)  # type: ignore[union-attr]
    assert all(queue.get_job(i).state == "active" for i in theirs)  # type: ignore[union-attr]
    assert _recover(queue) == (0, 0)


def test_a_worker_held_up_past_its_lease(queue: Queue, r: redis.Redis) -> None:
    """Its next beat finds its lease expired: the jobs it claimed before then are lost (it
    is told, and recovery requeues them), those it claimed since are its own; its lease goes
    on. Until the recovery is done, every beat reports the old ones lost."""
    for _ in range(3):
        queue.create_job("t").save()
    _beat(queue, W, mode="start")
    before = _claim(queue)
    _expire(queue, r, W)
    after = _claim(queue)  # claimed once it was back, before its heartbeat
    held = [(before[0], before[1]["lease"]), (after[0], after[1]["lease"])]
    now = _server_ms(r)
    assert _beat(queue, W, held) == [held[0]]
    assert r.zscore(queue.keys.worker_leases, W) >= now + LEASE  # type: ignore[operator]
    assert _beat(queue, W, held) == [held[0]]  # still being recovered
    assert _recover(queue) == (1, 0)
    assert queue.get_job(before[0]).state == "inactive"  # type: ignore[union-attr]
    assert queue.get_job(after[0]).state == "active"  # type: ignore[union-attr]
    assert r.zscore(queue.keys.worker_leases, W) is not None  # renewed since: kept
    assert not r.exists(queue.keys.recovering)
    assert _beat(queue, W, held[1:]) == []
    assert _complete(queue, *held[1], "1", None).outcome == "complete"
    assert _complete(queue, *held[0], "1", None).outcome == "refused"


def test_a_new_process_under_the_id_of_a_dead_one(queue: Queue, r: redis.Redis) -> None:
    """A worker id given again (``--worker-id``) to a process started after one was killed:
    the jobs the dead one left are recovered, none of the new one's."""
    for _ in range(2):
        queue.create_job("t").save()
    assert _beat(queue, W, mode="start") == []
    left = _claim(queue)
    wait_for(lambda: _server_ms(r) > int(left[1]["started_at"]))
    assert (
        queue.scripts.call(
            calls.heartbeat(queue.keys, W, LEASE, "{}", [], instance="again", mode="force")
        )
        == []
    )
    mine = _claim(queue)
    assert _recover(queue) == (1, 0)
    assert queue.get_job(left[0]).state == "inactive"  # type: ignore[union-attr]
    assert queue.get_job(mine[0]).state == "active"  # type: ignore[union-attr]


def test_leave_ends_the_lease_and_recovers_what_was_left(queue: Queue, r: redis.Redis) -> None:
    queue.create_job("t").save()
    _beat(queue, W, mode="start")
    job_id, _ = _claim(queue)  # a release that never reached Redis
    assert _beat(queue, W, mode="leave") == []
    assert _recover(queue) == (1, 0)
    assert queue.get_job(job_id).state == "inactive"  # type: ignore[union-attr]
    assert r.zscore(queue.keys.worker_leases, W) is None


def test_an_old_workers_lease_is_still_recovered(queue: Queue, r: redis.Redis) -> None:
    """Upgrade: a job claimed by a worker of the version before has a lease of its own in
    <p>:leases. Once expired, it is recovered as before; an entry left behind for a job a
    worker of this version runs now is dropped without touching the job."""
    for _ in range(2):
        queue.create_job("t").save()
    old, _ = _claim(queue, "old-worker")  # registered no process lease
    r.zadd(queue.keys.leases, {zid(old): _server_ms(r) + LEASE})
    _beat(queue, W, mode="start")
    new, _ = _claim(queue)
    r.zadd(queue.keys.leases, {zid(new): 1})  # left behind by an earlier attempt's worker
    assert _recover(queue) == (0, 0)  # the old lease is live; the new job is W's
    assert queue.get_job(new).state == "active"  # type: ignore[union-attr]
    assert r.zscore(queue.keys.leases, zid(new)) is None
    r.zadd(queue.keys.leases, {zid(old): 1})  # the old worker died
    assert _recover(queue) == (1, 0)
    assert queue.get_job(old).state == "inactive"  # type: ignore[union-attr]
    assert r.zcard(queue.keys.leases) == 0


def test_both_clients_list_each_workers_jobs_from_the_active_set(
    queue: Queue, redis_url: str
) -> None:
    """Queue.workers() and AsyncQueue.workers(): the jobs each worker runs are the active
    jobs whose workerId it is (a fan-out job's, the runs it holds in <p>:run-leases)."""
    mine = [queue.create_job("t").save().id for _ in range(2)]
    theirs = queue.create_job("t").save().id
    fan = queue.create_job("t").fan_out(2).save().id
    _beat(queue, W, mode="start")
    _beat(queue, OTHER, mode="start")
    assert sorted(_claim(queue)[0] for _ in range(2)) == mine
    assert _claim(queue, OTHER)[0] == theirs
    assert _claim(queue)[0] == fan  # a run of it, for W
    want = {W: sorted([*mine, fan]), OTHER: [theirs]}
    assert {w["id"]: w["jobs"] for w in queue.workers()} == want

    async def listed() -> list[dict[str, Any]]:
        async with AsyncQueue(redis_url, queue.prefix) as aq:
            return await aq.workers()

    assert {w["id"]: w["jobs"] for w in asyncio.run(listed())} == want


def test_jobs_claimed_after_the_expiry_by_a_worker_that_then_died(
    queue: Queue, r: redis.Redis
) -> None:
    """A worker held up past its lease that came back, claimed, and died before its next
    heartbeat: the jobs it claimed once back are not recovered with the others, but they are
    held by a lease from its last claim on, and recovered once that one expires too."""
    for _ in range(2):
        queue.create_job("t").save()
    _beat(queue, W, mode="start")
    before, _ = _claim(queue)
    _expire(queue, r, W)
    after, fields = _claim(queue)  # then it died: no heartbeat
    assert _recover(queue) == (1, 0)
    assert _state(queue, before) == "inactive" and _state(queue, after) == "active"
    renewed = r.zscore(queue.keys.worker_leases, W)
    assert renewed == int(fields["started_at"]) + LEASE
    assert not r.exists(queue.keys.recovering)
    assert doctor.check(queue).findings == []  # held by that lease
    r.zadd(queue.keys.worker_leases, {W: _server_ms(r)})  # which runs out too
    assert _recover(queue) == (1, 0)
    assert _state(queue, after) == "inactive"
    assert r.zscore(queue.keys.worker_leases, W) is None
    assert doctor.check(queue).findings == []


def _state(queue: Queue, job_id: int) -> str | None:
    job = queue.get_job(job_id)
    return None if job is None else job.state
