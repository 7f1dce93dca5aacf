"""kue doctor at the library level: each kind of broken layout, built by hand with raw Redis
commands (and as Kue's own client writes it), is found exactly, the check writes nothing, the
repair fixes it (a stranded job then runs on a real worker), a healthy queue with running
workers reports nothing, and a repair leaves alone a job that moved on after the check."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from kue_core import Job, Queue, doctor
from kue_core.base.keys import Keys, zid
from kue_core.doctor import Finding, Report
from kue_core.store import calls
from tests.conftest import keys_under, wait_for

HOUR = 3_600_000


# -- helpers ---------------------------------------------------------------------------------
def dump(r: redis.Redis, prefix: str) -> dict[str, Any]:
    """Every key under the prefix with its type, value and whether it expires."""
    out: dict[str, Any] = {}
    for key in sorted(keys_under(r, prefix)):
        kind = r.type(key)
        if kind == "string":
            value: Any = r.get(key)
        elif kind == "hash":
            value = r.hgetall(key)
        elif kind == "list":
            value = r.lrange(key, 0, -1)
        elif kind == "set":
            value = sorted(r.smembers(key))
        elif kind == "zset":
            value = r.zrange(key, 0, -1, withscores=True)
        else:
            value = None
        out[key] = (kind, value, r.pttl(key) > 0)
    return out


def check(queue: Queue, r: redis.Redis, **options: Any) -> Report:
    """``doctor.check``, asserting that it changed nothing under the prefix."""
    before = dump(r, queue.prefix)
    report = doctor.check(queue, **options)
    assert dump(r, queue.prefix) == before
    return report


def found(report: Report) -> set[tuple[str, str, int | None]]:
    return {(f.kind, f.key, f.job_id) for f in report.findings}


def repaired(queue: Queue, r: redis.Redis, report: Report, **options: Any) -> list[str]:
    """Repair everything found; the outcomes; the queue is healthy afterwards."""
    outcomes = doctor.repair(queue, report.findings)
    after = check(queue, r, **options)
    assert after.healthy, [f.problem for f in after.findings]
    return [o.status for o in outcomes]


def now_ms(r: redis.Redis) -> int:
    seconds, micros = r.time()
    return int(seconds) * 1000 + int(micros) // 1000


def kue_job(r: redis.Redis, k: Keys, job_id: int, job_type: str, state: str, **fields: Any) -> None:
    """A job hash as Kue 0.11 writes it (no index entries)."""
    at = fields.pop("at", now_ms(r))
    r.hset(
        k.job(job_id),
        mapping={
            "type": job_type,
            "data": json.dumps({"n": job_id}),
            "priority": "0",
            "state": state,
            "created_at": str(at),
            "promote_at": str(at),
            "updated_at": str(at),
            "max_attempts": "1",
            **{name: str(v) for name, v in fields.items()},
        },
    )
    r.sadd(k.types, job_type)
    if int(r.get(k.ids) or 0) < job_id:
        r.set(k.ids, job_id)  # Kue took the id from INCR


def kue_state(r: redis.Redis, k: Keys, job_id: int, old: str | None, new: str) -> None:
    """Kue 0.11's ``Job#state(new)`` for a job it believes is in ``old`` (one MULTI)."""
    h = r.hgetall(k.job(job_id))
    jtype, priority, member = h["type"], int(h.get("priority", 0)), zid(job_id)
    pipe = r.pipeline(transaction=True)
    if old and old != new:
        pipe.zrem(k.state(old), member)
        pipe.zrem(k.type_state(jtype, old), member)
    pipe.hset(k.job(job_id), "state", new)
    pipe.zadd(k.state(new), {member: priority})
    pipe.zadd(k.type_state(jtype, new), {member: priority})
    if new == "delayed":
        pipe.zadd(k.state(new), {member: int(h["promote_at"])})
    if new == "active":
        pipe.zadd(k.state(new), {member: priority if priority < 0 else -priority})
    if new == "inactive":
        pipe.lpush(k.tokens(jtype), 1)
    pipe.execute()
    r.hset(k.job(job_id), "updated_at", now_ms(r))
    r.zadd(k.jobs, {member: priority})


def kue_worker_takes(r: redis.Redis, k: Keys, job_type: str) -> int | None:
    """The first two steps of a Kue 0.11 worker: BLPOP a wake-up token, then pop the best
    inactive job of the type (a MULTI). None when there was no token."""
    if r.blpop([k.tokens(job_type)], timeout=0.05) is None:
        return None
    pipe = r.pipeline(transaction=True)
    pipe.zrange(k.type_state(job_type, "inactive"), 0, 0)
    pipe.zremrangebyrank(k.type_state(job_type, "inactive"), 0, 0)
    members, _ = pipe.execute()
    return int(members[0].split("|")[1]) if members else None


@pytest.fixture
def k(queue: Queue) -> Keys:
    return queue.keys


@pytest.fixture
def wq(redis_url: str, prefix: str) -> Iterator[Queue]:
    """A second queue on the same prefix, for running workers; with a lease no load
    outlasts: one held up past a short lease (two cores, under coverage) rightly has its
    active jobs found stuck until they are recovered."""
    q = Queue(redis_url, prefix=prefix, lease_ms=30_000)
    yield q
    q.close()


def runs_to_completion(queue: Queue, job_type: str, ids: list[int]) -> None:
    """Real workers take every job in ``ids`` and complete it."""
    queue.process(job_type, 2, lambda job: {"ok": job.id})
    wait_for(lambda: all(queue.get_job(i).state == "complete" for i in ids), timeout=10)


# -- healthy ---------------------------------------------------------------------------------
def test_a_queue_in_every_state_is_healthy(queue: Queue, r: redis.Redis, k: Keys) -> None:
    a = queue.create_job("email", {"to": "a"}).priority("high").save()
    queue.create_job("email").delay(60_000).save()
    c = queue.create_job("video").ttl(10_000).save()
    queue.create_job("video").save().set_state("failed")
    done = queue.create_job("email").attempts(3).save()
    a.log("line")
    a.progress(1, 2)
    # active under a lease
    claimed = queue.scripts.call(calls.claim(queue.keys, "video", "w1", 30_000))
    assert claimed and claimed != "paused" and claimed[0] == c.id
    held = [(c.id, claimed[1]["lease"])]  # type: ignore[list-item]
    queue.scripts.call(calls.heartbeat(queue.keys, "w1", 30_000, "{}", held))
    done.set_state("complete")
    queue.create_job("email").save().remove()
    queue.pause("video")
    report = check(queue, r)
    assert report.healthy, [f.problem for f in report.findings]
    assert (report.jobs, report.types) == (5, 2)
    index_sets = [
        key
        for key in keys_under(r, queue.prefix)
        if key.startswith(f"{k.prefix}:jobs:") and r.type(key) == "zset"
    ]
    assert report.members == r.zcard(k.jobs) + r.zcard(k.leases) + sum(
        r.zcard(key) for key in index_sets
    )
    assert r.zcard(k.leases) == 0  # the job is held by w1's process lease
    assert report.sets == len(index_sets) + 1
    assert doctor.repair(queue, report.findings) == []


def test_an_empty_queue_is_healthy(queue: Queue, r: redis.Redis) -> None:
    report = check(queue, r)
    assert report.healthy and (report.jobs, report.sets, report.members) == (0, 0, 0)


def test_running_workers_and_producers_show_nothing(
    queue: Queue, wq: Queue, r: redis.Redis
) -> None:
    """Jobs move between states all through the check: each job is judged on a consistent
    snapshot, so none of the moves shows up as a problem."""
    release = threading.Event()

    def handler(job: Job) -> int:
        if job.data["n"] == 10:
            release.wait(40)  # one job per type stays active, under a lease, all through
        job.progress(1, 2)
        return int(job.data["n"])

    wq.process("email", 4, handler)
    wq.process("video", 2, handler)
    stop = threading.Event()

    def produce() -> None:
        n = 1
        while not stop.is_set():
            queue.save_many([queue.create_job(t, {"n": n}) for t in ("email", "video")])
            n += 1
            stop.wait(0.002)  # a steady flow, not a flood

    producer = threading.Thread(target=produce)
    producer.start()
    try:
        wait_for(lambda: queue.count("complete") > 20)
        for _ in range(3):  # each walks the shared test Redis's keyspace a few times
            report = doctor.check(queue)
            assert report.healthy, [f.problem for f in report.findings]
        assert queue.count("active") > 0
    finally:
        stop.set()
        producer.join()
        release.set()
    report = doctor.check(queue)
    assert report.healthy, [f.problem for f in report.findings]
    assert report.jobs > 40


# -- broken layouts, each built by hand ----------------------------------------------------
def test_members_without_a_job_in_every_index(queue: Queue, r: redis.Redis, k: Keys) -> None:
    job = queue.create_job("email").save()
    ghost = zid(99)
    r.zadd(k.jobs, {ghost: 0})
    r.zadd(k.state("inactive"), {ghost: 0})
    r.zadd(k.type_state("email", "inactive"), {ghost: 0})
    r.zadd(k.type_state("gone", "complete"), {ghost: 0})
    r.zadd(k.leases, {ghost: now_ms(r) + 60_000})
    r.zadd(k.state("failed"), {"garbage": 1, "1|5": 1})
    report = check(queue, r)
    assert found(report) == {
        ("orphan-member", k.jobs, 99),
        ("orphan-member", k.state("inactive"), 99),
        ("orphan-member", k.type_state("email", "inactive"), 99),
        ("orphan-member", k.type_state("gone", "complete"), 99),
        ("orphan-member", k.leases, 99),
        ("bad-member", k.state("failed"), None),
    }
    assert len(report.findings) == 7  # two bad members
    assert set(repaired(queue, r, report)) == {"repaired"}
    assert r.zrange(k.type_state("email", "inactive"), 0, -1) == [zid(job.id)]  # type: ignore[arg-type]
    assert not r.exists(k.type_state("gone", "complete"), k.leases, k.state("failed"))


def test_a_job_in_two_state_sets(queue: Queue, r: redis.Redis, k: Keys) -> None:
    """Kue's classic: a client with a stale idea of the job's state moves it again, and the
    job stays in the sets of the state it really left."""
    kue_job(r, k, 1, "email", "inactive")
    kue_state(r, k, 1, None, "inactive")
    kue_state(r, k, 1, "inactive", "active")  # a worker took it
    kue_state(r, k, 1, "inactive", "complete")  # a stale client completes it from "inactive"
    assert r.zscore(k.state("active"), zid(1)) is not None
    report = check(queue, r)
    assert found(report) == {
        ("extra-member", k.state("active"), 1),
        ("extra-member", k.type_state("email", "active"), 1),
    }
    assert "job 1 is complete (email) but is also in" in report.findings[0].problem
    repaired(queue, r, report)
    assert queue.ids("complete") == [1] and queue.ids("active") == []


def test_a_job_missing_from_its_sets_runs_after_the_repair(
    queue: Queue, r: redis.Redis, k: Keys
) -> None:
    kue_job(r, k, 1, "email", "inactive", priority=-10)
    r.srem(k.types, "email")
    report = check(queue, r)
    assert found(report) == {
        ("missing-member", k.jobs, 1),
        ("missing-member", k.state("inactive"), 1),
        ("missing-member", k.type_state("email", "inactive"), 1),
        ("missing-type", k.types, 1),
    }
    by_key = {f.key: f for f in report.findings}
    assert by_key[k.type_state("email", "inactive")].repair == (
        "add it (score -10) with a wake-up token"
    )
    repaired(queue, r, report)
    assert r.zscore(k.jobs, zid(1)) == -10 and r.llen(k.tokens("email")) == 1
    assert queue.types() == ["email"]
    runs_to_completion(queue, "email", [1])


def test_wrong_scores(queue: Queue, r: redis.Redis, k: Keys) -> None:
    a = queue.create_job("email").priority("low").save()
    b = queue.create_job("email").delay(60_000).save()
    r.zadd(k.type_state("email", "inactive"), {zid(a.id): -15})  # type: ignore[arg-type]
    r.zadd(k.jobs, {zid(a.id): 3})  # type: ignore[arg-type]
    r.zadd(k.state("delayed"), {zid(b.id): 5})  # type: ignore[arg-type]
    report = check(queue, r)
    assert found(report) == {
        ("wrong-score", k.type_state("email", "inactive"), a.id),
        ("wrong-score", k.jobs, a.id),
        ("wrong-score", k.state("delayed"), b.id),
    }
    repaired(queue, r, report)
    assert r.zscore(k.state("delayed"), zid(b.id)) == int(r.hget(k.job(b.id), "promote_at"))  # type: ignore[arg-type]
    assert r.zscore(k.type_state("email", "inactive"), zid(a.id)) == 10  # type: ignore[arg-type]


def test_missing_wake_up_tokens_strand_kue_workers(queue: Queue, r: redis.Redis, k: Keys) -> None:
    """A Kue worker that stopped between taking a token and taking the job: the job is
    still inactive, and one job fewer than waits can ever be taken by a Kue worker."""
    ids = [queue.create_job("email").save().id for _ in range(3)]
    assert r.llen(k.tokens("email")) == 3
    r.lpop(k.tokens("email"))  # a Kue worker took a token and stopped there
    r.lpop(k.tokens("email"))  # and so did another
    report = check(queue, r)
    assert found(report) == {("missing-tokens", k.tokens("email"), None)}
    assert report.findings[0].repair == "push 2 tokens"
    first = kue_worker_takes(r, k, "email")
    assert first == ids[0]
    assert kue_worker_takes(r, k, "email") is None  # two jobs wait for tokens that never come
    kue_state(r, k, first, "inactive", "inactive")  # the job goes back (with its token)
    assert r.zcard(k.type_state("email", "inactive")) == 3 and r.llen(k.tokens("email")) == 1
    repaired(queue, r, check(queue, r))
    assert r.llen(k.tokens("email")) == 3
    taken = [kue_worker_takes(r, k, "email") for _ in range(3)]
    assert sorted(taken) == sorted(ids)  # type: ignore[type-var]


def test_a_kue_worker_that_died_between_pop_and_start(
    queue: Queue, r: redis.Redis, k: Keys
) -> None:
    """Kue's worker pops the job from its type's inactive set, then marks it active: dying
    in between leaves an inactive job that no worker can find."""
    job = queue.create_job("email").save()
    assert kue_worker_takes(r, k, "email") == job.id
    report = check(queue, r)
    assert found(report) == {("missing-member", k.type_state("email", "inactive"), job.id)}
    repaired(queue, r, report)
    runs_to_completion(queue, "email", [job.id])  # type: ignore[list-item]


def test_an_expired_lease_is_requeued_and_runs(queue: Queue, r: redis.Redis, k: Keys) -> None:
    job = queue.create_job("email").save()
    claimed = queue.scripts.call(calls.claim(queue.keys, "email", "dead-worker", 60_000))
    assert claimed and claimed != "paused"
    r.zadd(k.leases, {zid(job.id): now_ms(r) - 5_000})  # type: ignore[arg-type]
    report = check(queue, r)
    assert found(report) == {("stuck-active", k.job(job.id), job.id)}  # type: ignore[arg-type]
    f = report.findings[0]
    assert "its lease expired" in f.problem
    assert "ago: worker dead-worker stopped renewing it" in f.problem
    assert f.repair == "requeue it (inactive), as lease recovery does"
    repaired(queue, r, report)
    requeued = queue.get_job(job.id)  # type: ignore[arg-type]
    assert requeued.state == "inactive" and r.hget(k.job(job.id), "stalls") == "1"  # type: ignore[arg-type]
    assert queue.history(job.id)[-1]["doctor"] is True  # type: ignore[arg-type]
    runs_to_completion(queue, "email", [job.id])  # type: ignore[list-item]


def test_a_job_stalled_past_the_limit_fails(queue: Queue, r: redis.Redis, k: Keys) -> None:
    job = queue.create_job("email").save()
    queue.scripts.call(calls.claim(queue.keys, "email", "dead-worker", 60_000))
    r.hset(k.job(job.id), "stalls", 1)  # type: ignore[arg-type]
    r.zadd(k.leases, {zid(job.id): 1})  # type: ignore[arg-type]
    report = check(queue, r)
    assert report.findings[0].repair == "fail it: stalled 2 times, more than the stall limit"
    repaired(queue, r, report)
    failed = queue.get_job(job.id)  # type: ignore[arg-type]
    assert failed.state == "failed" and "stalled 2 times" in failed.to_dict()["error"]


def test_an_unleased_active_job_is_stuck_only_past_the_threshold(
    queue: Queue, r: redis.Redis, k: Keys
) -> None:
    """Kue's Node workers take jobs without a lease: such a job counts as stuck only when it
    was not updated for longer than the threshold and its ttl."""
    now = now_ms(r)
    for job_id, age, ttl in ((1, 2 * HOUR, 0), (2, 10 * 60_000, 0), (3, 2 * HOUR, 3 * HOUR)):
        kue_job(r, k, job_id, "email", "inactive", at=now - age, **({"ttl": ttl} if ttl else {}))
        kue_state(r, k, job_id, None, "active")
        r.hset(k.job(job_id), "updated_at", now - age)
    assert found(check(queue, r)) == {("stuck-active", k.job(1), 1)}
    report = check(queue, r, stuck_after_ms=5 * 60_000)
    assert found(report) == {("stuck-active", k.job(1), 1), ("stuck-active", k.job(2), 2)}
    problems = {f.job_id: f.problem for f in report.findings}
    assert (
        "no lease (a Kue worker's job) and no update for 2 h 0 min, more than 5 min"
        in (problems[1])
    )
    repaired(queue, r, report, stuck_after_ms=5 * 60_000)
    assert [queue.get_job(i).state for i in (1, 2, 3)] == ["inactive", "inactive", "active"]
    runs_to_completion(queue, "email", [1, 2])


def test_a_kue_workers_job_that_kept_our_token_is_judged_as_kue_workers_are(
    queue: Queue, r: redis.Redis, k: Keys
) -> None:
    """A job one of our claims made active once (it has a fencing token) and that a Node Kue
    worker runs now (its id, no lease) is stuck only past the threshold, as Kue's jobs are;
    and the repair checks that again before requeueing it."""
    now = now_ms(r)
    kue_job(r, k, 1, "email", "inactive", at=now - 2 * HOUR, lease=3)
    kue_state(r, k, 1, "inactive", "active")
    r.hset(k.job(1), mapping={"workerId": "kue:vm:4242:email:1", "updated_at": now - 2 * HOUR})
    report = check(queue, r)
    assert found(report) == {("stuck-active", k.job(1), 1)}
    assert "no lease (a Kue worker's job) and no update for 2 h" in report.findings[0].problem
    r.hset(k.job(1), "updated_at", now_ms(r))  # Kue's worker wrote to it meanwhile
    assert [o.status for o in doctor.repair(queue, report.findings)] != ["repaired"]
    assert queue.get_job(1).state == "active"
    assert check(queue, r).healthy
    r.hset(k.job(1), "workerId", "vm:4242:0a1b2c3d")  # one of ours, gone: stuck at once
    assert found(check(queue, r)) == {("stuck-active", k.job(1), 1)}
    r.hdel(k.job(1), "workerId")  # no worker at all: the same, and the repair requeues it
    assert repaired(queue, r, check(queue, r)) == ["repaired"]
    assert queue.get_job(1).state == "inactive"


def test_a_save_that_stopped_half_way(queue: Queue, r: redis.Redis, k: Keys) -> None:
    """Kue writes a job's fields one command at a time and its state last: a young hash
    without a state is a save in progress; an old one, a save that stopped."""
    now = now_ms(r)
    kue_job(r, k, 1, "email", "", at=now)
    kue_job(r, k, 2, "email", "", at=now - 5 * 60_000)
    kue_job(r, k, 3, "email", "", at=now - 5 * 60_000, delay=1_000, promote_at=now - 1)
    for job_id in (1, 2, 3):
        r.hdel(k.job(job_id), "state")
        r.zadd(k.jobs, {zid(job_id): 0})
    report = check(queue, r)
    assert found(report) == {("no-state", k.job(2), 2), ("no-state", k.job(3), 3)}
    assert {f.job_id: f.repair for f in report.findings} == {
        2: "finish the save: make it inactive",
        3: "finish the save: make it delayed",
    }
    outcomes = doctor.repair(queue, report.findings)
    assert [o.status for o in outcomes] == ["repaired", "repaired"]
    assert queue.get_job(2).state == "inactive" and queue.get_job(3).state == "delayed"
    r.hset(k.job(1), "updated_at", now - 5 * 60_000)  # job 1's save stopped too, it turns out
    r.hset(k.job(1), "created_at", now - 5 * 60_000)
    repaired(queue, r, check(queue, r))
    runs_to_completion(queue, "email", [1, 2, 3])  # 3 is due: the workers' timer promotes it


def test_an_unknown_state_fails_the_job(queue: Queue, r: redis.Redis, k: Keys) -> None:
    kue_job(r, k, 1, "email", "inactive")
    kue_state(r, k, 1, None, "stuck")  # Kue stores any state it is given
    report = check(queue, r)
    assert found(report) == {("bad-state", k.job(1), 1)}
    repaired(queue, r, report)
    job = queue.get_job(1)
    assert job.state == "failed" and 'unknown state "stuck"' in job.to_dict()["error"]
    assert not r.exists(k.state("stuck"), k.type_state("email", "stuck"))
    queue.retry_all()
    runs_to_completion(queue, "email", [1])


def test_hashes_without_a_type(queue: Queue, r: redis.Redis, k: Keys) -> None:
    """Kue completing a job that was removed meanwhile leaves a hash without type or data,
    indexed as complete: deleted. A hash that has data but no type is left to a person."""
    old = now_ms(r) - 5 * 60_000
    r.hset(k.job(7), mapping={"progress": "100", "state": "complete", "updated_at": old})
    r.zadd(k.state("complete"), {zid(7): 0})
    r.zadd(k.type_state("email", "complete"), {zid(7): 0})
    r.rpush(k.log(7), "done")
    r.xadd(k.stream(7), {"a": 1, "d": '"a part"'})  # a worker's stream of the removed job
    r.hset(k.job(8), mapping={"data": "{}", "state": "inactive", "updated_at": old})
    r.hset(k.job(9), mapping={"progress": "50", "updated_at": now_ms(r)})  # being written
    r.set(k.ids, 9)
    report = check(queue, r)
    assert found(report) == {
        ("no-type", k.job(7), 7),
        ("orphan-member", k.state("complete"), 7),
        ("orphan-member", k.type_state("email", "complete"), 7),
        ("no-type", k.job(8), 8),
    }
    outcomes = {
        (o.finding.kind, o.finding.job_id): o.status for o in doctor.repair(queue, report.findings)
    }
    assert outcomes[("no-type", 8)] == "manual" and outcomes[("no-type", 7)] == "repaired"
    assert not r.exists(k.job(7), k.log(7), k.stream(7), k.state("complete"))
    assert r.hgetall(k.job(8))["data"] == "{}"
    assert found(check(queue, r)) == {("no-type", k.job(8), 8)}


def test_leases_logs_workers_and_the_id_counter(queue: Queue, r: redis.Redis, k: Keys) -> None:
    job = queue.create_job("email").save()
    job.set_state("complete")
    r.zadd(k.leases, {zid(job.id): now_ms(r) + 60_000})  # type: ignore[arg-type]
    r.rpush(k.log(40), "a line of a removed job")
    r.rpush(k.history(41), "{}")
    queue.scripts.call(calls.heartbeat(queue.keys, "alive:2:def", 30_000, "{}", []))
    r.zadd(k.workers, {"gone:1:abc": now_ms(r) - HOUR})
    r.set(k.ids, 0)
    report = check(queue, r)
    assert found(report) == {
        ("stray-lease", k.leases, job.id),
        ("orphan-log", k.log(40), 40),
        ("orphan-log", k.history(41), 41),
        ("gone-worker", k.workers, None),
        ("ids-behind", k.ids, job.id),
    }
    repaired(queue, r, report)
    assert r.zrange(k.workers, 0, -1) == ["alive:2:def"]
    assert r.get(k.ids) == str(job.id)
    assert queue.create_job("email").save().id == job.id + 1  # type: ignore[operator]


def test_keys_of_the_wrong_type_need_a_person(queue: Queue, r: redis.Redis, k: Keys) -> None:
    r.set(k.leases, "x")
    r.set(k.job(3), "x")
    r.zadd(k.state("inactive"), {zid(3): 0})
    report = check(queue, r)
    assert found(report) == {
        ("wrong-type", k.leases, None),
        ("not-a-hash", k.job(3), 3),
        ("orphan-member", k.state("inactive"), 3),
        ("ids-behind", k.ids, 3),  # Kue's save would write to job 3's key
    }
    outcomes = doctor.repair(queue, report.findings)
    assert {o.finding.kind: o.status for o in outcomes} == {
        "wrong-type": "manual",
        "not-a-hash": "manual",
        "orphan-member": "repaired",
        "ids-behind": "repaired",
    }


def test_findings_describe_themselves(queue: Queue, r: redis.Redis, k: Keys) -> None:
    r.zadd(k.jobs, {zid(5): 0})
    (f,) = check(queue, r).findings
    assert f == Finding(
        "orphan-member",
        k.jobs,
        f"{k.jobs} holds job 5, which does not exist",
        "remove it from the set",
        5,
        ("unindex", "jobs", zid(5), ""),
    )
    assert f.to_dict() == {
        "kind": "orphan-member",
        "key": k.jobs,
        "job_id": 5,
        "problem": f"{k.jobs} holds job 5, which does not exist",
        "repair": "remove it from the set",
        "repairable": True,
    }


# -- repairs re-check ------------------------------------------------------------------------
def test_a_repair_leaves_jobs_that_moved_since_the_check(
    queue: Queue, r: redis.Redis, k: Keys
) -> None:
    now = now_ms(r)
    stuck = queue.create_job("email").save()
    claimed = queue.scripts.call(calls.claim(queue.keys, "email", "w", 60_000))
    assert claimed and claimed != "paused"
    r.zadd(k.leases, {zid(stuck.id): now - 1})  # type: ignore[arg-type]
    extra = queue.create_job("video").save()
    r.zadd(k.state("complete"), {zid(extra.id): 0})  # type: ignore[arg-type]
    kue_job(r, k, 10, "email", "", at=now - 5 * 60_000)
    r.hdel(k.job(10), "state")
    r.zadd(k.jobs, {zid(10): 0})
    r.zadd(k.state("failed"), {zid(11): 0})
    report = check(queue, r)
    assert found(report) == {
        ("stuck-active", k.job(stuck.id), stuck.id),  # type: ignore[arg-type]
        ("extra-member", k.state("complete"), extra.id),
        ("no-state", k.job(10), 10),
        ("orphan-member", k.state("failed"), 11),
    }
    # Then, before the repair: the worker (of the version before, with a lease per job)
    # renews its lease, the job becomes complete, Kue's save writes the state, and job 11 is
    # created, failed.
    r.zadd(k.leases, {zid(stuck.id): now_ms(r) + 60_000})  # type: ignore[arg-type]
    extra.set_state("complete")
    kue_state(r, k, 10, None, "inactive")
    kue_job(r, k, 11, "email", "failed")
    r.zadd(k.type_state("email", "failed"), {zid(11): 0})
    r.zadd(k.jobs, {zid(11): 0})
    before = dump(r, queue.prefix)
    outcomes = doctor.repair(queue, report.findings)
    assert [o.status for o in outcomes] == ["unchanged"] * 4
    assert dump(r, queue.prefix) == before
    assert check(queue, r).healthy


def test_repair_runs_each_fix_at_most_once(queue: Queue, r: redis.Redis, k: Keys) -> None:
    r.zadd(k.jobs, {zid(5): 0})
    report = check(queue, r)
    assert [o.status for o in doctor.repair(queue, report.findings)] == ["repaired"]
    assert [o.status for o in doctor.repair(queue, report.findings)] == ["unchanged"]


def test_options_are_checked(queue: Queue) -> None:
    with pytest.raises(ValueError, match="stuck_after_ms must be an integer of at least 0"):
        doctor.check(queue, stuck_after_ms=-1)
    with pytest.raises(ValueError, match="grace_ms"):
        doctor.check(queue, grace_ms=1.5)  # type: ignore[arg-type]


@pytest.mark.slow
def test_many_jobs_are_read_in_batches(queue: Queue, r: redis.Redis, k: Keys) -> None:
    """More jobs and members than one batch: every one is looked at."""
    queue.save_many([queue.create_job("email") for _ in range(1_100)])
    r.zadd(k.state("complete"), {zid(i): 0 for i in range(2_000, 2_450)})
    report = check(queue, r)
    assert report.jobs == 1_100
    assert len(report.findings) == 450
    assert {f.kind for f in report.findings} == {"orphan-member"}
    repaired(queue, r, report)


def test_a_prefix_with_glob_characters_sees_only_its_keys(redis_url: str, prefix: str) -> None:
    """SCAN patterns take the prefix literally: ``t?`` does not match another queue's ``tY``."""
    with (
        Queue(redis_url, prefix=prefix + "?") as mine,
        Queue(redis_url, prefix=prefix + "Y") as other,
    ):
        other.create_job("email").save()
        other.client.zadd(other.keys.jobs, {zid(9): 0})
        report = doctor.check(mine)
        assert report.healthy and (report.jobs, report.members) == (0, 0)
        mine.create_job("email").save()
        assert doctor.check(mine).healthy and doctor.check(mine).jobs == 1
        assert found(doctor.check(other)) == {("orphan-member", other.keys.jobs, 9)}
