"""kue doctor and the places fan-out jobs offer (kue_core/doctor/runs.py): an active fan-out
job whose open place no set offers is found and offered again (to any worker, or to its
workers that may run it); members of the open and late sets that are not jobs offered there
are found and removed; a healthy fan-out job is found healthy at every step."""

from __future__ import annotations

from typing import Any

import redis

from kue_core import Queue, doctor
from kue_core.base.keys import zid
from kue_core.store import calls

LEASE = 30_000


def _claim(queue: Queue, worker: str) -> Any:
    claimed = queue.scripts.call(calls.claim(queue.keys, "t", worker, LEASE))
    assert isinstance(claimed, tuple), f"{worker} found nothing: {claimed}"
    return claimed


def _findings(queue: Queue) -> list[tuple[str, str]]:
    return sorted((f.kind, f.key) for f in doctor.check(queue).findings)


def test_an_open_place_offered_to_no_one_is_offered_again(queue: Queue, r: redis.Redis) -> None:
    jid = queue.create_job("t").fan_out(2).save().id
    assert jid is not None
    _claim(queue, "w1")
    assert _findings(queue) == []  # its second place is open to any worker
    r.zrem(queue.keys.open("t"), zid(jid))
    # no claim sees it now
    assert queue.scripts.call(calls.claim(queue.keys, "t", "w2", LEASE)) is None
    assert _findings(queue) == [("unoffered-run-place", queue.keys.open("t"))]
    doctor.repair(queue, doctor.check(queue).findings)
    assert r.zscore(queue.keys.open("t"), zid(jid)) is not None
    assert _claim(queue, "w2")[0] == jid
    assert _findings(queue) == []


def test_a_place_missing_from_one_of_its_workers_is_offered_again(
    queue: Queue, r: redis.Redis
) -> None:
    jid = queue.create_job("t").only(["w1", "w2", "w3"]).fan_out(2, at_once=2).save().id
    assert jid is not None
    _claim(queue, "w1")
    assert _findings(queue) == []
    r.zrem(queue.keys.places("t", "w3"), zid(jid))
    assert _findings(queue) == [("unoffered-run-place", queue.keys.places("t", "w3"))]
    doctor.repair(queue, doctor.check(queue).findings)
    assert _claim(queue, "w3")[0] == jid
    assert _findings(queue) == []  # no place is open now: none is offered, and none needs to


def test_members_of_the_open_and_late_sets_that_do_not_belong_are_removed(
    queue: Queue, r: redis.Redis
) -> None:
    plain = queue.create_job("t").save().id
    pinned = queue.create_job("t").only(["w1", "w2"]).fan_out(2).save().id
    assert plain is not None and pinned is not None
    _claim(queue, "w1")  # the pinned fan-out job runs: its places are its workers'
    r.zadd(queue.keys.open("t"), {zid(plain): 0, zid(pinned): 0, zid(99_999): 0})
    r.zadd(queue.keys.late("t"), {zid(pinned): 0, "stray": 0})
    found = doctor.check(queue).findings
    assert sorted(f.kind for f in found) == ["stale-open-place"] * 5
    assert {f.key for f in found} == {queue.keys.open("t"), queue.keys.late("t")}
    doctor.repair(queue, found)
    assert not r.exists(queue.keys.open("t")) and not r.exists(queue.keys.late("t"))
    assert _findings(queue) == []
    assert _claim(queue, "w2")[0] == pinned  # its own place was left alone
