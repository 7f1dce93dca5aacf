"""kue doctor and schedules: a queue with schedules active, paused, ended and triggered is
healthy; a member of ``<p>:schedules`` that should not be there, and a schedule missing from
it, are found and repaired; a repair leaves alone what became right since the check."""

from __future__ import annotations

import redis

from kue_core import Queue, doctor
from kue_core.jobs.schedules import fire_due
from tests.integration.test_doctor import check, found, now_ms, repaired

MINUTE = 60_000


def _schedules(queue: Queue, r: redis.Redis) -> None:
    """a: every minute, fired once and triggered once; b: cron; c: paused; d: ended (its end
    is past); e: made its one job (limit 1), so ended; f: removed."""
    queue.every("a", MINUTE, "t", {"x": 1})
    queue.cron("b", "0 * * * *", "t", tz="Europe/Paris")
    queue.every("c", MINUTE, "t")
    queue.pause_schedule("c")
    queue.every("d", MINUTE, "t", end=1)
    queue.every("e", MINUTE, "t", limit=1)
    queue.every("f", MINUTE, "t")
    queue.remove_schedule("f")
    queue.trigger("a")
    fire_due(queue, now_ms(r))


# -- healthy --------------------------------------------------------------------------------
def test_a_queue_with_schedules_is_healthy(queue: Queue, r: redis.Redis) -> None:
    _schedules(queue, r)
    states = {s["key"]: (s["paused"], s["ended"], s["runs"]) for s in queue.schedules()}
    assert states == {
        "a": (False, False, 1),
        "b": (False, False, 0),
        "c": (True, False, 0),
        "d": (False, True, 0),
        "e": (False, True, 1),
    }
    report = check(queue, r)
    assert report.findings == [], [f.problem for f in report.findings]


# -- found and repaired ---------------------------------------------------------------------
def test_members_of_schedules_that_make_no_job_are_removed(queue: Queue, r: redis.Redis) -> None:
    _schedules(queue, r)
    k = queue.keys
    r.zadd(k.schedules, {"c": 1, "d": 2, "gone": 3})  # paused, ended, no hash
    r.zadd(k.schedules, {"nodef": 4})
    r.hset(k.schedule("nodef"), "runs", "1")  # a hash without a definition is no schedule
    report = check(queue, r)
    assert found(report) == {("stale-schedule", k.schedules, None)}
    assert sorted(f.action[1] for f in report.findings if f.action) == ["c", "d", "gone", "nodef"]
    assert "but it is paused" in " ".join(f.problem for f in report.findings)
    assert repaired(queue, r, report) == ["repaired"] * 4
    assert sorted(r.zrange(k.schedules, 0, -1)) == ["a", "b"]
    c = queue.schedule("c")
    assert c["paused"] and c["every"] == MINUTE  # the paused schedule is kept as it was
    assert queue.resume_schedule("c")["next"] is not None


def test_a_lost_schedule_is_put_back_due_now(queue: Queue, r: redis.Redis) -> None:
    _schedules(queue, r)
    k = queue.keys
    r.zrem(k.schedules, "a", "b")
    report = check(queue, r)
    assert found(report) == {
        ("lost-schedule", k.schedule("a"), None),
        ("lost-schedule", k.schedule("b"), None),
    }
    assert all(f.repairable for f in report.findings)
    before = now_ms(r)
    assert repaired(queue, r, report) == ["repaired"] * 2
    due = dict(r.zrange(k.schedules, 0, -1, withscores=True))
    assert set(due) == {"a", "b"} and all(before <= due[s] <= now_ms(r) for s in due)
    fire_due(queue, now_ms(r))  # due now: each makes its job (catch-up one) and plans on
    after = {s["key"]: s for s in queue.schedules()}
    assert after["a"]["runs"] == 2 and after["b"]["runs"] == 1
    assert after["b"]["next"] % 3_600_000 == 0  # back on its timetable
    assert check(queue, r).healthy


def test_a_repair_leaves_what_became_right_since_the_check(queue: Queue, r: redis.Redis) -> None:
    _schedules(queue, r)
    k = queue.keys
    r.zadd(k.schedules, {"c": 1})  # paused, in the set
    r.zrem(k.schedules, "a")  # lost
    report = check(queue, r)
    assert sorted(f.kind for f in report.findings) == ["lost-schedule", "stale-schedule"]
    queue.resume_schedule("c")  # it belongs in the set now
    queue.pause_schedule("a")  # it belongs out of it
    outcomes = doctor.repair(queue, report.findings)
    assert [o.status for o in outcomes] == ["unchanged", "unchanged"]
    assert r.zscore(k.schedules, "c") is not None and r.zscore(k.schedules, "a") is None
    assert check(queue, r).healthy


def test_schedule_keys_of_another_redis_type_are_left_to_a_person(
    queue: Queue, r: redis.Redis
) -> None:
    _schedules(queue, r)
    k = queue.keys
    r.set(k.schedule("x"), "junk")
    report = check(queue, r)
    assert found(report) == {("wrong-type", k.schedule("x"), None)}
    assert not report.findings[0].repairable
    r.delete(k.schedule("x"), k.schedules)
    r.set(k.schedules, "junk")
    report = check(queue, r)
    assert found(report) == {("wrong-type", k.schedules, None)}
    assert [o.status for o in doctor.repair(queue, report.findings)] == ["manual"]
