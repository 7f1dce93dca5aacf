"""Flow control (``kue_core.features.limits``) on a real Redis: limits set, read and removed (bad
input
writing nothing); claims under a rate, a concurrency cap and a hold asked by ``RateLimited``;
groups served in turn with priority kept inside each, per-group caps and rates; one pool of
slots over several types with the three reservers; paused types with limits and groups."""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

import pytest
import redis

from kue_core import InvalidJob, InvalidLimit, Job, Queue, RateLimited, doctor
from kue_core.features.limits import LANE
from kue_core.store import calls
from kue_core.store.calls import PAUSED, Held
from tests.conftest import snapshot, wait_for, written_since

W, LEASE = "kue:test:1", 30_000


@pytest.fixture
def queue(client: Any) -> Any:
    """Every test here runs on both clients: ``Queue`` and ``AsyncQueue`` (see
    ``client`` in tests/conftest.py); those that run workers take ``sync_queue``."""
    return client


def _claim(queue: Queue, job_type: str = "t") -> Any:
    return queue.scripts.call(calls.claim(queue.keys, job_type, W, LEASE))


def _save(queue: Queue, job_type: str, n: int, group: str | None = None, **data: Any) -> list[int]:
    jobs = []
    for i in range(n):
        job = queue.create_job(job_type, {"i": i, **data})
        if group is not None:
            job.group(group)
        jobs.append(job.save().id)
    return jobs  # type: ignore[return-value]


def _finish(queue: Queue, claimed: Any) -> None:
    queue.scripts.call(calls.complete(queue.keys, claimed[0], claimed[1]["lease"], "null", None))


def test_limits_are_set_read_and_removed(queue: Queue, sync_queue: Queue) -> None:
    got = queue.limit("email", rate=(10, timedelta(seconds=1)), concurrency=3)
    assert got == {
        "rate": (10, 1000),
        "concurrency": 3,
        "group_rate": None,
        "group_concurrency": None,
        "held_until": None,
    }
    queue.limit("email", group_concurrency=2, rate=None)  # None removes one; others kept
    assert queue.limits() == {
        "email": {
            "rate": None,
            "concurrency": 3,
            "group_rate": None,
            "group_concurrency": 2,
            "held_until": None,
        }
    }
    queue.pause("email")
    queue.remove_limits("email")
    assert queue.limits() == {} and queue.paused() == ["email"]  # the pause is kept
    assert _claim(sync_queue, "email") == PAUSED


@pytest.mark.parametrize(
    "bad",
    [
        {},
        {"rate": 5},
        {"rate": (0, 1000)},
        {"rate": (5, 0)},
        {"rate": (5, 1000, 1)},
        {"rate": ("5", 1000)},
        {"concurrency": 0},
        {"concurrency": True},
        {"group_concurrency": 1.5},
        {"group_rate": (1, 10**12)},
    ],
)
def test_bad_limits_change_nothing(
    queue: Queue, r: redis.Redis, prefix: str, bad: dict[str, Any]
) -> None:
    queue.limit("t", concurrency=1)
    before = snapshot(r, prefix)
    with pytest.raises(InvalidLimit):  # an InvalidJob, as before it had a class of its own
        queue.limit("t", **bad)
    with pytest.raises(InvalidLimit):
        queue.limit("", concurrency=1)
    with pytest.raises(InvalidLimit, match="give at least one of"):
        queue.limit("t")
    with pytest.raises(InvalidLimit):
        queue.remove_limits("bad\ntype")
    assert not written_since(r, prefix, before)


def test_the_write_check_sees_writes_but_not_a_wake_list_expiring(
    r: redis.Redis, prefix: str
) -> None:
    """``written_since``, which the "writes nothing" tests use: a key whose TTL ran out is
    not a write; a change, a new key, a removed key, and a key with a TTL removed before its
    time are."""
    r.set(f"{prefix}:kept", "1")
    r.set(f"{prefix}:gone", "1")
    r.set(f"{prefix}:early", "1", px=60_000)
    r.rpush(f"{prefix}:wake", 1)
    r.pexpire(f"{prefix}:wake", 200)
    before = snapshot(r, prefix)
    assert wait_for(lambda: not r.exists(f"{prefix}:wake"))  # its TTL ran out
    assert not written_since(r, prefix, before)
    r.set(f"{prefix}:kept", "2")
    r.delete(f"{prefix}:gone", f"{prefix}:early")
    r.set(f"{prefix}:new", "1")
    changed = set(written_since(r, prefix, before))
    assert changed == {f"{prefix}:{k}" for k in ("kept", "gone", "early", "new")}


def test_a_concurrency_cap_holds_claims_back_until_a_place_frees(sync_queue: Queue) -> None:
    _save(sync_queue, "t", 4)
    sync_queue.limit("t", concurrency=2)
    first, second = _claim(sync_queue), _claim(sync_queue)
    assert isinstance(first, tuple) and isinstance(second, tuple)
    held = _claim(sync_queue)
    assert isinstance(held, Held) and held.wait_ms > 0
    status = sync_queue.limit_status("t")
    assert (status["held"], status["active"], status["waiting"]) == ("concurrency", 2, 2)
    sync_queue.client.delete(sync_queue.keys.limited("t"))  # the wake-ups of the limit's change
    _finish(sync_queue, first)
    assert sync_queue.client.llen(sync_queue.keys.limited("t")) == 1  # the freed place wakes a slot
    assert isinstance(_claim(sync_queue), tuple)
    sync_queue.limit("t", concurrency=None)
    assert isinstance(_claim(sync_queue), tuple)


def test_a_rate_counts_starts_in_a_sliding_window(sync_queue: Queue) -> None:
    _save(sync_queue, "t", 5)
    sync_queue.limit("t", rate=(2, 60_000))
    a, b = _claim(sync_queue), _claim(sync_queue)
    _finish(sync_queue, a)
    _finish(sync_queue, b)  # ended jobs still count: the rate is of starts
    held = _claim(sync_queue)
    assert isinstance(held, Held) and 59_000 < held.wait_ms <= 60_000
    status = sync_queue.limit_status("t")
    assert (status["held"], status["started_in_window"]) == ("rate", 2)
    sync_queue.limit("t", rate=(3, 60_000))  # a change applies at once
    assert isinstance(_claim(sync_queue), tuple) and isinstance(_claim(sync_queue), Held)


def test_nothing_waiting_is_not_a_hold(sync_queue: Queue) -> None:
    sync_queue.limit("t", concurrency=1)
    assert _claim(sync_queue) is None
    assert sync_queue.limit_status("t")["held"] is None


def test_rate_limited_puts_the_job_back_without_an_attempt_and_holds_the_type(
    sync_queue: Queue,
) -> None:
    calls: list[int] = []

    def handler(job: Job) -> str:
        calls.append(job.id)  # type: ignore[arg-type]
        if len(calls) == 1:
            raise RateLimited(1500)  # long enough to be seen, on a loaded machine too
        return "ok"

    job = sync_queue.create_job("api", {}).attempts(1).save()
    other = sync_queue.create_job("api", {}).attempts(1).save()
    sync_queue.process("api", 1, handler)
    wait_for(lambda: sync_queue.get_job(job.id).state == "delayed", timeout=5)  # type: ignore[arg-type]
    status = sync_queue.limit_status("api")  # one read: the hold and what it says of it
    held = status["limits"]["held_until"]
    assert held is not None and status["held"] == "remote"
    wait_for(lambda: sync_queue.count("complete", "api") == 2, timeout=10)
    got = sync_queue.get_job(job.id)  # type: ignore[arg-type]
    assert got.attempts_made == 1 and got.result == "ok"  # one attempt: the limited run is free
    entries = sync_queue.history(job.id)  # type: ignore[arg-type]
    limited = [e for e in entries if e.get("rate_limited")]
    assert len(limited) == 1 and limited[0]["state"] == "delayed"
    assert sync_queue.get_job(other.id).started_at >= held  # type: ignore[arg-type,operator]
    assert sync_queue.limits() == {}  # the hold is over, and the claim after it cleared it
    assert sync_queue.client.hget(sync_queue.keys.limits, "api") is None


def test_rate_limited_checks_its_argument() -> None:
    for bad in (0, -1, "5", None, 10**12):
        with pytest.raises(InvalidJob):
            RateLimited(bad)  # type: ignore[arg-type]
    assert RateLimited(timedelta(seconds=2)).retry_in_ms == 2000


def test_groups_take_turns_so_a_big_backlog_does_not_starve_small_groups(sync_queue: Queue) -> None:
    _save(sync_queue, "t", 50, group="big")
    for g in "abcde":
        _save(sync_queue, "t", 1, group=g)
    assert sync_queue.count("inactive", "t") == 55  # grouped jobs stay in Kue's sets
    order = []
    for _ in range(8):
        claimed = _claim(sync_queue)
        order.append(claimed[1]["group"])
        _finish(sync_queue, claimed)
    assert set("abcde") <= set(order[:7])  # each small group within one round
    page = sync_queue.groups("t")
    left = 50 - order.count("big")
    assert page == {"total": 1, "groups": [{"group": "big", "waiting": left, "active": 0}]}


def test_priority_and_fifo_hold_within_a_group(sync_queue: Queue) -> None:
    low = sync_queue.create_job("t", {"n": 1}).group("g").priority("low").save()
    first = sync_queue.create_job("t", {"n": 2}).group("g").save()
    urgent = sync_queue.create_job("t", {"n": 3}).group("g").priority("critical").save()
    second = sync_queue.create_job("t", {"n": 4}).group("g").save()
    got = [_claim(sync_queue)[0] for _ in range(4)]
    assert got == [urgent.id, first.id, second.id, low.id]


def test_ungrouped_jobs_of_a_grouped_type_take_their_own_turn(sync_queue: Queue) -> None:
    """Jobs in no group take one turn of the rotation, once among the type's next few."""
    _save(sync_queue, "t", 20, group="big")
    plain = sync_queue.create_job("t", {}).save()
    urgent = sync_queue.create_job("t", {}).priority("high").save()
    _save(sync_queue, "t", 20, group="small")
    got = [_claim(sync_queue)[0] for _ in range(6)]
    assert got.count(urgent.id) == 1 and plain.id not in got  # 21st in line: not yet
    big, small = [i for i in got if i <= 20], [i for i in got if i > 22]
    assert (len(big), len(small)) == (3, 2)  # the turn of no group passed on to the next
    assert LANE not in [g["group"] for g in sync_queue.groups("t")["groups"]]


def test_group_caps_and_rates_apply_to_each_group(sync_queue: Queue) -> None:
    _save(sync_queue, "t", 3, group="a")
    _save(sync_queue, "t", 3, group="b")
    sync_queue.limit("t", group_concurrency=1)
    one, two = _claim(sync_queue), _claim(sync_queue)
    assert {one[1]["group"], two[1]["group"]} == {"a", "b"}
    assert isinstance(_claim(sync_queue), Held)  # both groups at their cap; none starts
    assert sync_queue.groups("t")["groups"] == [
        {"group": "a", "waiting": 2, "active": 1},
        {"group": "b", "waiting": 2, "active": 1},
    ]
    _finish(sync_queue, one)
    again = _claim(sync_queue)
    assert again[1]["group"] == one[1]["group"]
    _save(sync_queue, "r", 3, group="a")
    _save(sync_queue, "r", 3, group="b")
    sync_queue.limit("r", group_rate=(2, 60_000))
    got = [_claim(sync_queue, "r") for _ in range(5)]
    assert [g[1]["group"] for g in got[:4]] == ["a", "b", "a", "b"]
    assert isinstance(got[4], Held) and got[4].wait_ms > 59_000


def test_grouped_jobs_leave_their_group_sets_on_every_path(
    sync_queue: Queue, r: redis.Redis, prefix: str
) -> None:
    waiting, running, moved = (sync_queue.create_job("t", {}).group("g").save() for _ in range(3))
    claimed = _claim(sync_queue)
    assert claimed[0] == waiting.id
    sync_queue.remove(running.id)  # type: ignore[arg-type]
    sync_queue.move(moved.id, "u")  # type: ignore[arg-type]
    sync_queue.cancel(waiting.id)  # type: ignore[arg-type]
    assert r.zcard(sync_queue.keys.group("t", "g")) == 0
    assert r.zcard(sync_queue.keys.group_active("t", "g")) == 0
    assert r.zrange(sync_queue.keys.groups("t"), 0, -1) == [LANE]  # no group waits: out of turn
    assert r.zrange(sync_queue.keys.group("u", "g"), 0, -1) == [f"0{len(str(moved.id))}|{moved.id}"]
    assert doctor.check(sync_queue).findings == []
    sync_queue.get_job(waiting.id).set_state("inactive")  # type: ignore[arg-type]  # back by hand
    assert r.zcard(sync_queue.keys.group("t", "g")) == 1


def test_several_types_one_pool_in_each_reserver_order(queue: Queue, redis_url: str) -> None:
    for how in ("ordered", "round-robin", "shuffled"):
        q = Queue(redis_url, prefix=f"{queue.prefix}-{how}")
        try:
            for t in ("a", "b", "c"):
                _save(q, t, 3)
            seen: list[str] = []

            def handler(job: Job, seen: list[str] = seen) -> None:
                seen.append(job.type)  # one slot: one handler at a time

            q.process(["a", "b", "c"], 1, handler, reserve=how)
            wait_for(lambda seen=seen: len(seen) == 9, timeout=10)  # type: ignore[misc]
            q.shutdown()
            if how == "ordered":
                assert seen == ["a"] * 3 + ["b"] * 3 + ["c"] * 3
            else:  # each round serves every type once
                rounds = [sorted(seen[i : i + 3]) for i in range(0, 9, 3)]
                assert rounds == [["a", "b", "c"]] * 3, seen
        finally:
            q.client.delete(*q.client.keys(f"{q.prefix}:*") or ["none"])
            q.close()


def test_a_shared_pool_checks_its_arguments(sync_queue: Queue) -> None:
    for types, reserve in ((["a", "a"], "ordered"), ([], "ordered"), (["a"], "random")):
        with pytest.raises(InvalidJob):
            sync_queue.process(types, 1, lambda job: None, reserve=reserve)


def test_a_paused_grouped_limited_type_resumes_in_turn(sync_queue: Queue) -> None:
    _save(sync_queue, "t", 3, group="a")
    _save(sync_queue, "t", 3, group="b")
    sync_queue.limit("t", concurrency=2)
    sync_queue.pause("t")
    assert _claim(sync_queue) == PAUSED and sync_queue.limit_status("t")["held"] == "paused"
    sync_queue.resume("t")
    one, two = _claim(sync_queue), _claim(sync_queue)
    assert {one[1]["group"], two[1]["group"]} == {"a", "b"}
    assert isinstance(_claim(sync_queue), Held)


def test_limits_hold_across_worker_slots(sync_queue: Queue) -> None:
    """Eight slots in one process, a cap of two: never more than two run at once."""
    running, most = [0], [0]
    lock = threading.Lock()
    gate = threading.Event()

    def handler(job: Job) -> None:
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        gate.wait(0.05)
        with lock:
            running[0] -= 1

    sync_queue.limit("t", concurrency=2)
    _save(sync_queue, "t", 20)
    sync_queue.process("t", 8, handler)
    wait_for(lambda: sync_queue.count("complete", "t") == 20, timeout=20)
    assert most[0] == 2
