"""kue doctor and the job records: what Node Kue clients (which know nothing of them) or hand
edits leave in the tag, word, tracking and finished sets is found, and repaired."""

from __future__ import annotations

import redis

from kue_core import Queue, doctor
from tests.conftest import finish


def _kinds(queue: Queue) -> list[str]:
    return sorted(f.kind for f in doctor.check(queue).findings)


def test_a_queue_used_with_records_is_healthy(queue: Queue) -> None:
    queue.set_retention(complete={"count": 2})
    for i in range(5):
        job = queue.create_job("t", {"title": f"report {i}"}).tags("vip", f"n{i}").track()
        job.save()
        if i % 2:
            finish(queue, "t", True)
    queue.search("report")
    queue.get_job(1).untag("vip")
    queue.get_job(2).remove()
    assert doctor.check(queue).findings == []


def test_what_node_kue_leaves_is_found_and_repaired(queue: Queue, r: redis.Redis) -> None:
    kept = queue.create_job("t", {"title": "alpha beta"}).tags("vip").track().save()
    gone = queue.create_job("t", {"title": "alpha gamma"}).tags("vip").track().save()
    done = queue.create_job("t").save()
    finish(queue, "t", True)  # job 1 completes
    finish(queue, "t", True)  # job 2
    finish(queue, "t", True)  # job 3
    # Node Kue removes job 2 and moves job 3 back to inactive: only Kue's own keys change.
    k = queue.keys
    r.delete(k.job(gone.id), k.history(gone.id))
    for key in (k.jobs, k.state("complete"), k.type_state("t", "complete")):
        r.zrem(key, f"01|{gone.id}")
    r.hset(k.job(done.id), "state", "inactive")
    r.zrem(k.state("complete"), f"01|{done.id}")
    r.zrem(k.type_state("t", "complete"), f"01|{done.id}")
    r.zadd(k.state("inactive"), {f"01|{done.id}": 0})
    r.zadd(k.type_state("t", "inactive"), {f"01|{done.id}": 0})
    r.lpush(k.tokens("t"), 1)
    # And a hand edit or two.
    r.zincrby(k.tags, 5, "vip")
    r.zadd(k.words, {"orphan": 0})
    r.zadd(k.word("~search"), {"01|1": 0})
    r.zadd(k.tag("junk"), {"not-a-member": 1})

    report = doctor.check(queue)
    kinds = sorted(f.kind for f in report.findings)
    # Job 2's tag, three words (two of its title, one of its tag), tracking and finished entry;
    # job 3's finished entry; the junk member.
    assert kinds.count("stale-record") == 8
    assert "tag-count" in kinds and "word-list" in kinds
    assert all(f.repairable for f in report.findings)
    outcomes = doctor.repair(queue, report.findings)
    assert all(o.status == "repaired" for o in outcomes if o.finding.kind == "stale-record")
    # A count put right by removing a stale member needs no recount then.
    assert {o.status for o in outcomes} <= {"repaired", "unchanged"}
    assert doctor.check(queue).findings == []
    assert queue.tags() == {"vip": 1} and queue.tagged("vip") == [kept.id]
    assert queue.search("alpha") == [kept.id] and queue.search("gamma") == []
    assert [j.id for j in queue.tracked()] == [kept.id]
    assert not r.exists(k.word("~search"), k.tag("junk"))
    assert r.zscore(k.words, "orphan") is None and r.zscore(k.words, "gamma") is None


def test_repairs_leave_records_that_became_right(queue: Queue, r: redis.Redis) -> None:
    job = queue.create_job("t").tags("vip").save()
    r.delete(queue.keys.job(job.id))  # gone, as far as the check sees
    report = doctor.check(queue)
    assert "stale-record" in [f.kind for f in report.findings]
    r.hset(queue.keys.job(job.id), mapping={"type": "t", "state": "inactive"})  # back again
    outcomes = doctor.repair(queue, report.findings)
    stale = [o for o in outcomes if o.finding.kind == "stale-record"]
    assert stale and all(o.status == "unchanged" for o in stale)
    assert queue.tagged("vip") == [job.id]
