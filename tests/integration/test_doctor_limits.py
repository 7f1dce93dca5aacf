"""kue doctor and flow control: a queue with limits, a paused type, and grouped jobs waiting,
running and done is healthy; each way the limits' and groups' keys can disagree with the jobs
(made by hand with raw Redis commands) is found, and repaired so that a second check is clean;
a repair leaves alone what became right since the check."""

from __future__ import annotations

import json

import pytest
import redis

from kue_core import Queue, defaults, doctor
from kue_core.base.keys import Keys, zid
from kue_core.features.limits import LANE
from kue_core.store import calls
from kue_core.store.calls import PAUSED
from tests.integration.test_doctor import check, found, repaired

T = "mail"


def _claim(queue: Queue, job_type: str = T) -> tuple[int, str]:
    """Claim the next job of the type as worker ``kue:test:1``, registered as a live process
    (its lease holds the job): its id and lease token."""
    start = calls.heartbeat(queue.keys, "kue:test:1", 60_000, "{}", [], mode="start")
    assert queue.scripts.call(start) == []
    claimed = queue.scripts.call(calls.claim(queue.keys, job_type, "kue:test:1", 60_000))
    assert isinstance(claimed, tuple), claimed
    job_id, fields = claimed
    return int(job_id), str(fields["lease"])


@pytest.fixture
def k(queue: Queue) -> Keys:
    return queue.keys


@pytest.fixture
def grouped(queue: Queue) -> dict[str, list[int]]:
    """Type ``mail`` under limits: group a (3 jobs), b (2), c (1), and 1 job in no group; two
    claimed (the turns: a then b), one of them completed; ``other`` paused, with a job. The
    ids by what they are now."""
    queue.limit(T, concurrency=10, group_concurrency=5, rate=(1000, 1000))
    made = {"a": [], "b": [], "c": [], "none": []}  # type: dict[str, list[int]]
    for g in ("a", "a", "b", "a", "b", "c", None):
        job = queue.create_job(T, {"g": g})
        if g is not None:
            job.group(g)
        made[g or "none"].append(int(job.save().id))  # type: ignore[arg-type]
    queue.create_job("other").save()
    queue.pause("other")
    (first, lease), (second, _) = _claim(queue), _claim(queue)
    queue.scripts.call(calls.complete(queue.keys, first, lease, "{}", None))
    made["done"], made["active"] = [first], [second]
    # The wake-ups and the rate log expire on their own (in a second): gone or lasting here,
    # so that the snapshots taken around a check compare.
    queue.client.delete(queue.keys.limited(T))
    queue.client.persist(queue.keys.rate(T))
    return made


def _kinds(report: doctor.Report) -> list[str]:
    return sorted(f.kind for f in report.findings)


# -- healthy --------------------------------------------------------------------------------
def test_a_queue_with_limits_and_groups_is_healthy(
    queue: Queue, r: redis.Redis, k: Keys, grouped: dict[str, list[int]]
) -> None:
    assert queue.get_job(grouped["active"][0]).state == "active"
    assert queue.get_job(grouped["done"][0]).state == "complete"
    assert r.zscore(k.groups(T), LANE) is not None
    assert {g["group"] for g in queue.groups(T)["groups"]} == {"a", "b", "c"}
    report = check(queue, r)
    assert report.findings == [], [f.problem for f in report.findings]


# -- found and repaired ---------------------------------------------------------------------
def test_a_grouped_job_lost_from_its_group_is_put_back(
    queue: Queue, r: redis.Redis, k: Keys, grouped: dict[str, list[int]]
) -> None:
    lost = grouped["c"][0]
    r.zrem(k.group(T, "c"), zid(lost))  # the only job of c: the set is gone, c stays turned
    waiting_b = [i for i in grouped["b"] if queue.get_job(i).state == "inactive"]
    r.zrem(k.groups(T), "b")  # b lost its turn
    report = check(queue, r)
    assert found(report) == {
        ("lost-group-job", k.group(T, "c"), lost),
        *(("lost-group-job", k.groups(T), i) for i in waiting_b),
    }
    assert len(waiting_b) == 2 and all(f.repairable for f in report.findings)
    # b's first job puts b back in the rotation: nothing is left to do for its second.
    assert repaired(queue, r, report) == ["repaired", "unchanged", "repaired"]
    assert r.zscore(k.group(T, "c"), zid(lost)) == 0  # its priority (normal)
    turns = r.zrange(k.groups(T), 0, -1)
    assert turns[-1] == "b"  # its turn comes last


@pytest.mark.parametrize("batch", [2, 200], ids=["pages", "one-read"])
def test_members_of_a_group_that_are_not_its_waiting_jobs_are_removed(
    queue: Queue,
    r: redis.Redis,
    k: Keys,
    grouped: dict[str, list[int]],
    batch: int,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(defaults, "DOCTOR_BATCH", batch)  # 2: sets read a page at a time
    done, active, b_job = grouped["done"][0], grouped["active"][0], grouped["b"][-1]
    r.zadd(k.group(T, "a"), {zid(99): 0, zid(done): 0, zid(active): 0, zid(b_job): 0, "junk": 1})
    r.zadd(k.group(T, "ghost"), {zid(98): 0})  # a group with no real job, in the rotation
    r.zadd(k.groups(T), {"ghost": 50})
    report = check(queue, r)
    assert found(report) == {
        ("stale-group-job", k.group(T, "a"), 99),
        ("stale-group-job", k.group(T, "a"), done),
        ("stale-group-job", k.group(T, "a"), active),
        ("stale-group-job", k.group(T, "a"), b_job),
        ("stale-group-job", k.group(T, "a"), None),
        ("stale-group-job", k.group(T, "ghost"), 98),
    }
    problems = " ".join(f.problem for f in report.findings)
    assert "whose job does not exist" in problems and "whose job is complete" in problems
    assert "which is no job's member" in problems
    assert repaired(queue, r, report) == ["repaired"] * 6
    left = {int(str(m).split("|")[1]) for m in r.zrange(k.group(T, "a"), 0, -1)}
    assert left == {i for i in grouped["a"] if queue.get_job(i).state == "inactive"}
    assert r.exists(k.group(T, "ghost")) == 0 and r.zscore(k.groups(T), "ghost") is None


def test_a_group_with_no_job_waiting_leaves_the_rotation(
    queue: Queue, r: redis.Redis, k: Keys, grouped: dict[str, list[int]]
) -> None:
    r.zadd(k.groups(T), {"nobody": 7})
    report = check(queue, r)
    assert found(report) == {("stale-group", k.groups(T), None)}
    assert repaired(queue, r, report) == ["repaired"]
    assert r.zscore(k.groups(T), "nobody") is None
    assert r.zscore(k.groups(T), LANE) is not None


def test_running_jobs_and_the_active_sets_of_their_groups(
    queue: Queue, r: redis.Redis, k: Keys, grouped: dict[str, list[int]]
) -> None:
    active = grouped["active"][0]
    g = queue.get_job(active).group()
    assert g is not None
    started = r.hget(k.job(active), "started_at")
    r.zrem(k.group_active(T, g), zid(active))
    r.zadd(k.group_active(T, g), {zid(grouped["done"][0]): 1, zid(97): 2})
    report = check(queue, r)
    assert found(report) == {
        ("lost-group-active", k.group_active(T, g), active),
        ("stale-group-active", k.group_active(T, g), grouped["done"][0]),
        ("stale-group-active", k.group_active(T, g), 97),
    }
    assert repaired(queue, r, report) == ["repaired"] * 3
    assert r.zrange(k.group_active(T, g), 0, -1, withscores=True) == [
        (zid(active), float(started))  # type: ignore[arg-type]
    ]


def test_the_turn_of_the_jobs_in_no_group(
    queue: Queue, r: redis.Redis, k: Keys, grouped: dict[str, list[int]]
) -> None:
    r.zrem(k.groups(T), LANE)
    report = check(queue, r)
    assert found(report) == {("lost-lane", k.groups(T), None)}
    assert repaired(queue, r, report) == ["repaired"]
    assert r.zscore(k.groups(T), LANE) == 0
    # A type with groups waiting whose rules lost the flag: its claims would not take turns.
    rules = json.loads(str(r.hget(k.limits, T)))
    del rules["groups"]
    r.hset(k.limits, T, json.dumps(rules))
    report = check(queue, r)
    assert found(report) == {("lost-lane", k.groups(T), None)}
    assert "lack the groups flag" in report.findings[0].problem
    assert repaired(queue, r, report) == ["repaired"]
    assert json.loads(str(r.hget(k.limits, T)))["groups"] is True


def test_rules_that_are_no_json_object_are_removed(
    queue: Queue, r: redis.Redis, k: Keys, grouped: dict[str, list[int]]
) -> None:
    r.hset(k.limits, mapping={T: "{nope", "other": "[1, 2]", "loose": "7"})
    with pytest.raises(redis.ResponseError):
        # every claim of the type fails
        queue.scripts.call(calls.claim(queue.keys, T, "kue:test:1", 60_000))
    report = check(queue, r)
    assert found(report) == {("bad-limits", k.limits, None)}
    assert sorted(f.action[1] for f in report.findings if f.action) == ["loose", T, "other"]
    assert "'{nope'" in " ".join(f.problem for f in report.findings)
    assert repaired(queue, r, report) == ["repaired"] * 3
    # What other keys tell is kept: mail has groups, other is paused.
    assert json.loads(str(r.hget(k.limits, T))) == {"groups": True}
    assert json.loads(str(r.hget(k.limits, "other"))) == {"paused": True}
    assert r.hget(k.limits, "loose") is None
    assert _claim(queue)[0] > 0


def test_a_paused_type_without_the_flag_is_held(
    queue: Queue, r: redis.Redis, k: Keys, grouped: dict[str, list[int]]
) -> None:
    r.sadd(k.paused, "ghost-type")
    r.hset(k.limits, "other", json.dumps({"concurrency": 3}))  # the flag lost
    assert _claim(queue, "other")[0] > 0  # its workers go on
    report = check(queue, r)
    assert found(report) == {("unheld-pause", k.limits, None)}
    assert sorted(f.action[1] for f in report.findings if f.action) == ["ghost-type", "other"]
    assert repaired(queue, r, report) == ["repaired"] * 2
    assert json.loads(str(r.hget(k.limits, "other"))) == {"concurrency": 3, "paused": True}
    assert json.loads(str(r.hget(k.limits, "ghost-type"))) == {"paused": True}
    queue.create_job("other").save()
    assert queue.scripts.call(calls.claim(queue.keys, "other", "kue:test:1", 60_000)) == PAUSED


def test_a_repair_leaves_what_became_right_since_the_check(
    queue: Queue, r: redis.Redis, k: Keys, grouped: dict[str, list[int]]
) -> None:
    lost = grouped["c"][0]
    r.zrem(k.group(T, "c"), zid(lost))
    r.zadd(k.group(T, "a"), {zid(99): 0})
    report = check(queue, r)
    assert _kinds(report) == ["lost-group-job", "stale-group-job"]
    r.zadd(k.group(T, "c"), {zid(lost): 0})  # put back meanwhile
    r.hset(k.job(99), mapping={"type": T, "state": "inactive", "group": "a", "priority": 0})
    r.zadd(k.type_state(T, "inactive"), {zid(99): 0})
    outcomes = doctor.repair(queue, report.findings)
    assert [o.status for o in outcomes] == ["unchanged", "unchanged"]
    assert r.zscore(k.group(T, "a"), zid(99)) == 0


def test_group_keys_of_another_redis_type_are_left_to_a_person(
    queue: Queue, r: redis.Redis, k: Keys, grouped: dict[str, list[int]]
) -> None:
    g = str(queue.get_job(grouped["active"][0]).group())
    r.delete(k.group_active(T, g))
    r.set(k.group_active(T, g), "junk")
    report = check(queue, r)
    assert found(report) == {("wrong-type", k.group_active(T, g), None)}
    r.delete(k.group_active(T, g), k.groups(T))
    r.set(k.groups(T), "junk")
    report = check(queue, r)
    assert found(report) == {("wrong-type", k.groups(T), None)}
    assert [o.status for o in doctor.repair(queue, report.findings)] == ["manual"]
