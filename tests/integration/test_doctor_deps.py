"""kue doctor and job dependencies: a queue used with dependencies and flows is healthy; what
Node Kue clients (which know nothing of them) or hand edits leave is found, and repaired; a
repair leaves alone what became right since the check."""

from __future__ import annotations

import redis

from kue_core import Job, Queue, doctor
from kue_core.base.keys import zid
from kue_core.store import calls
from tests.conftest import finish
from tests.integration.test_doctor import check, found, repaired


def _state(queue: Queue, job: Job | int) -> str | None:
    jid = job if isinstance(job, int) else job.id
    return queue.get_job(jid).state  # type: ignore[arg-type]


def _complete(queue: Queue, job_id: int, result: str = '{"ok":true}') -> None:
    """Complete job ``job_id`` as a worker would: claim jobs of its type until it is ours."""
    job_type = queue.get_job(job_id).type
    claimed = queue.scripts.call(calls.claim(queue.keys, job_type, "kue:test:1", 10_000))
    assert claimed and claimed != "paused" and claimed[0] == job_id, claimed
    queue.scripts.call(calls.complete(queue.keys, job_id, claimed[1]["lease"], result, None))


def _node_kue_removes(r: redis.Redis, queue: Queue, job: Job) -> None:
    """Kue 0.11's ``Job#remove``: its hash, log, history and Kue's own index entries only."""
    k, member, state = queue.keys, zid(job.id), _state(queue, job)  # type: ignore[arg-type]
    r.zrem(k.jobs, member)
    r.zrem(k.state(str(state)), member)
    r.zrem(k.type_state(job.type, str(state)), member)
    r.delete(k.job(job.id), k.log(job.id), k.history(job.id))  # type: ignore[arg-type]


def _node_kue_ends(r: redis.Redis, queue: Queue, job: Job, state: str) -> None:
    """A Node Kue worker ends ``job`` (inactive) ``state``: Kue's fields and sets only."""
    k, member = queue.keys, zid(job.id)  # type: ignore[arg-type]
    r.zrem(k.state("inactive"), member)
    r.zrem(k.type_state(job.type, "inactive"), member)
    r.hset(k.job(job.id), mapping={"state": state, "result": '{"by":"node"}'})  # type: ignore[arg-type]
    r.zadd(k.state(state), {member: 0})
    r.zadd(k.type_state(job.type, state), {member: 0})
    r.zadd(k.finished(state), {member: 0})
    r.lpop(k.tokens(job.type))


def _kinds(report: doctor.Report) -> list[str]:
    return sorted(f.kind for f in report.findings)


# -- healthy --------------------------------------------------------------------------------
def test_a_queue_used_with_dependencies_and_flows_is_healthy(queue: Queue, r: redis.Redis) -> None:
    a = queue.create_job("a").save()
    b = queue.create_job("b").save()
    blocked = queue.create_job("c").depends_on(a, b).save()
    _complete(queue, a.id)  # type: ignore[arg-type]  # one of two done: still blocked
    done = queue.create_job("d").depends_on(a).save()  # on complete jobs only: inactive
    top = queue.create_job("top")
    mid = queue.create_job("mid")
    queue.flow(top, [(mid, [queue.create_job("leaf"), queue.create_job("leaf")])])
    # A failed dependency: wait (blocked by it), fail (failed), ignore (released).
    f = queue.create_job("f").save()
    waits = queue.create_job("w").depends_on(f).save()
    fails = queue.create_job("w").depends_on(f).on_dependency_failure("fail").save()
    ignores = queue.create_job("w").depends_on(f).on_dependency_failure("ignore").save()
    finish(queue, "f", False)
    # A finished flow, and a removal with cascade.
    leaf = queue.create_job("leaf2")
    queue.flow(queue.create_job("top2"), [leaf])
    finish(queue, "leaf2", True)
    finish(queue, "top2", True)
    gone = queue.create_job("g").save()
    queue.create_job("g2").depends_on(gone).save()
    gone.remove(cascade=True)
    assert [_state(queue, j) for j in (blocked, done, top, mid, waits, fails, ignores)] == [
        "blocked",
        "inactive",
        "blocked",
        "blocked",
        "blocked",
        "failed",
        "inactive",
    ]
    report = check(queue, r)
    assert report.findings == [], [f.problem for f in report.findings]


# -- found and repaired ---------------------------------------------------------------------
def test_a_blocked_job_that_waits_for_nothing_is_released(queue: Queue, r: redis.Redis) -> None:
    a = queue.create_job("a").save()
    b = queue.create_job("b").save()
    first = queue.create_job("x").depends_on(a).save()
    later = queue.create_job("x").delay(60_000).depends_on(b).save()
    alone = queue.create_job("x").depends_on(a).save()
    k = queue.keys
    r.zadd(k.deps(first.id), {str(a.id): 1}, xx=True)  # type: ignore[arg-type]  # marked done
    r.zadd(k.deps(later.id), {str(b.id): 1}, xx=True)  # type: ignore[arg-type]
    r.delete(k.deps(alone.id))  # type: ignore[arg-type]  # its list is gone
    report = check(queue, r)
    assert found(report) == {
        *(("stuck-blocked", k.job(j.id), j.id) for j in (first, later, alone)),  # type: ignore[arg-type]
        ("stale-dependent", k.dependents(a.id), a.id),  # type: ignore[arg-type]  # alone's
    }
    assert repaired(queue, r, report) == ["repaired"] * 4
    assert a.dependents() == [{"id": first.id, "state": "inactive"}]
    assert [_state(queue, j) for j in (first, later, alone)] == ["inactive", "delayed", "inactive"]
    entry = queue.get_job(first.id).history()[-1]  # type: ignore[arg-type]
    assert entry["from"] == "blocked" and entry["unblocked"] is True
    assert finish(queue, "x", True) in (first.id, alone.id)


def test_what_node_kue_leaves_of_a_removed_job_is_found_and_deleted(
    queue: Queue, r: redis.Redis
) -> None:
    a = queue.create_job("a").save()
    x = queue.create_job("x").save()
    _complete(queue, a.id, '{"n":1}')  # type: ignore[arg-type]
    c = queue.create_job("c").depends_on(a, x).save()  # deps, results; in a's and x's sets
    _node_kue_removes(r, queue, c)
    k = queue.keys
    report = check(queue, r)
    assert found(report) == {
        ("orphan-deps", k.deps(c.id), c.id),  # type: ignore[arg-type]
        ("orphan-deps", k.results(c.id), c.id),  # type: ignore[arg-type]
        ("stale-dependent", k.dependents(a.id), a.id),  # type: ignore[arg-type]
        ("stale-dependent", k.dependents(x.id), x.id),  # type: ignore[arg-type]
    }
    assert repaired(queue, r, report) == ["repaired"] * 4
    assert not r.exists(k.deps(c.id), k.results(c.id), k.dependents(a.id), k.dependents(x.id))  # type: ignore[arg-type]
    assert a.dependents() == [] and x.remove() == [x.id]


def test_a_dependent_that_no_longer_lists_the_job_is_dropped(queue: Queue, r: redis.Redis) -> None:
    a = queue.create_job("a").save()
    y = queue.create_job("y").save()
    b = queue.create_job("b").depends_on(a, y).save()
    other = queue.create_job("o").save()
    k = queue.keys
    r.zrem(k.deps(b.id), str(a.id))  # type: ignore[arg-type]  # b still waits for y
    r.sadd(k.dependents(y.id), str(other.id), "junk")  # type: ignore[arg-type]
    report = check(queue, r)
    assert found(report) == {
        ("stale-dependent", k.dependents(a.id), a.id),  # type: ignore[arg-type]
        ("stale-dependent", k.dependents(y.id), y.id),  # type: ignore[arg-type]
    }
    problems = sorted(f.problem for f in report.findings)
    assert any(f"which does not depend on job {a.id}" in p for p in problems)
    assert any("which is no job's id" in p for p in problems)
    assert len(report.findings) == 3
    assert repaired(queue, r, report) == ["repaired"] * 3
    assert a.dependents() == [] and y.dependents() == [{"id": b.id, "state": "blocked"}]


def test_a_job_node_kue_ended_is_followed_by_its_dependents(queue: Queue, r: redis.Redis) -> None:
    done = queue.create_job("n").save()
    lost = queue.create_job("n").save()
    removed = queue.create_job("n").save()
    released = queue.create_job("w").depends_on(done).save()
    failing = queue.create_job("w").depends_on(lost).on_dependency_failure("fail").save()
    waiting = queue.create_job("w").depends_on(removed).save()
    _node_kue_ends(r, queue, done, "complete")
    _node_kue_ends(r, queue, lost, "failed")
    _node_kue_removes(r, queue, removed)
    k = queue.keys
    r.zadd(k.awaited, {"junk": 0})
    report = check(queue, r)
    assert found(report) == {
        ("stale-awaited", k.awaited, done.id),
        ("stale-awaited", k.awaited, lost.id),
        ("stale-awaited", k.awaited, removed.id),
        ("stale-awaited", k.awaited, None),
        ("orphan-deps", k.dependents(removed.id), removed.id),  # type: ignore[arg-type]
    }
    assert all(f.repairable for f in report.findings)
    assert repaired(queue, r, report) == ["repaired"] * 5
    assert _state(queue, released) == "inactive"
    assert released.children_results() == {done.id: {"by": "node"}}
    assert _state(queue, failing) == "failed"
    assert queue.get_job(waiting.id).blocked_by == removed.id  # type: ignore[arg-type]
    assert r.zcard(k.awaited) == 0


def test_a_repair_leaves_what_became_right_since_the_check(queue: Queue, r: redis.Redis) -> None:
    a = queue.create_job("a").save()
    b = queue.create_job("b").depends_on(a).save()
    k = queue.keys
    r.zadd(k.deps(b.id), {str(a.id): 1}, xx=True)  # type: ignore[arg-type]
    r.sadd(k.dependents(a.id), "99")  # type: ignore[arg-type]
    report = check(queue, r)
    assert _kinds(report) == ["stale-dependent", "stuck-blocked"]
    r.zadd(k.deps(b.id), {str(a.id): 0}, xx=True)  # type: ignore[arg-type]  # waits again
    r.srem(k.dependents(a.id), "99")  # type: ignore[arg-type]
    outcomes = doctor.repair(queue, report.findings)
    assert [o.status for o in outcomes] == ["unchanged", "unchanged"]
    assert _state(queue, b) == "blocked" and check(queue, r).healthy


def test_keys_of_another_redis_type_are_left_to_a_person(queue: Queue, r: redis.Redis) -> None:
    a = queue.create_job("a").save()
    b = queue.create_job("b").depends_on(a).save()
    k = queue.keys
    r.delete(k.awaited, k.deps(b.id), k.dependents(a.id))  # type: ignore[arg-type]
    r.set(k.awaited, "x")
    r.set(k.deps(b.id), "x")  # type: ignore[arg-type]
    r.set(k.dependents(a.id), "x")  # type: ignore[arg-type]
    report = check(queue, r)
    assert found(report) == {("wrong-type", k.awaited, None)}
    assert not report.findings[0].repairable
