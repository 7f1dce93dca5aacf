"""Preferred workers (``job.prefer([...])``, see ``kue_core.features.pins``): a preferred job waits
inactive for any worker and in its preferred workers' places, where they find it first at
equal priority; whoever claims it, it leaves every place; each way back to waiting puts it
back; kue doctor finds nothing after each."""

from __future__ import annotations

import pytest
import redis

from kue_core import InvalidJob, Queue, doctor
from kue_core.store import calls
from kue_core.store.calls import PINS
from tests.conftest import keys_under
from tests.scripts.claiming import claim as _claim
from tests.scripts.claiming import clean as _clean
from tests.scripts.claiming import fail as _fail

GPU, CPU, LEASE = "gpu-1", "cpu-1", 30_000


def _places(r: redis.Redis, queue: Queue, worker: str) -> list[int]:
    return [int(m.split("|")[1]) for m in r.zrange(queue.keys.places("t", worker), 0, -1)]


def test_the_preferred_worker_takes_it_before_an_older_plain_job_of_equal_priority(
    queue: Queue, r: redis.Redis
) -> None:
    plain = queue.create_job("t").save().id
    job = queue.create_job("t").prefer([GPU]).save()
    assert job.prefer() == [GPU]
    stored = queue.get_job(job.id)  # type: ignore[arg-type]
    assert stored.state == "inactive" and stored.prefer() == [GPU]
    assert stored.to_dict()["prefer"] == [GPU]
    assert queue.counts("t")["inactive"] == 2  # in Kue's sets: any worker sees it
    assert _places(r, queue, GPU) == [job.id]
    _clean(queue)
    got = _claim(queue, GPU)
    assert got[0] == job.id  # before the older plain job
    assert _places(r, queue, GPU) == [] and queue.counts("t")["inactive"] == 1
    _clean(queue)
    assert _claim(queue, GPU)[0] == plain
    assert _claim(queue, GPU) in (None, PINS)
    _clean(queue)


def test_another_worker_takes_it_when_the_preferred_one_does_not_claim(
    queue: Queue, r: redis.Redis
) -> None:
    jid = queue.create_job("t").prefer([GPU, "gpu-2"]).save().id
    got = _claim(queue, CPU)
    assert got[0] == jid and got[1]["workerId"] == CPU
    assert _places(r, queue, GPU) == [] and _places(r, queue, "gpu-2") == []
    assert _claim(queue, GPU) in (None, PINS)  # it is running on cpu-1
    _clean(queue)


def test_a_higher_priority_plain_job_goes_first(queue: Queue) -> None:
    jid = queue.create_job("t").prefer([GPU]).save().id
    urgent = queue.create_job("t").priority("high").save().id
    assert _claim(queue, GPU)[0] == urgent
    assert _claim(queue, GPU)[0] == jid


def test_every_way_back_to_waiting_puts_it_back_in_the_places(queue: Queue, r: redis.Redis) -> None:
    jid = queue.create_job("t").prefer([GPU]).attempts(3).save().id
    assert jid is not None
    got = _claim(queue, CPU)
    outcome = _fail(queue, jid, got[1]["lease"], "boom", "boom", 0, None).outcome
    assert outcome == "inactive" and _places(r, queue, GPU) == [jid]  # a retry
    _clean(queue)
    queue.get_job(jid).set_state("delayed")
    assert _places(r, queue, GPU) == []
    _clean(queue)
    queue.promote_all()
    assert queue.get_job(jid).state == "inactive" and _places(r, queue, GPU) == [jid]
    _clean(queue)
    queue.get_job(jid).set_priority("high")
    assert r.zscore(queue.keys.places("t", GPU), f"0{len(str(jid))}|{jid}") == -10
    got = _claim(queue, CPU)
    assert queue.scripts.call(calls.release(queue.keys, jid, got[1]["lease"])) is True  # given back
    assert _places(r, queue, GPU) == [jid]
    _clean(queue)
    queue.move(jid, "u")
    assert _places(r, queue, GPU) == [] and r.zcard(queue.keys.places("u", GPU)) == 1
    _clean(queue)
    queue.remove(jid)
    assert not r.exists(queue.keys.places("u", GPU))
    _clean(queue)


def test_prefer_with_only_or_fan_out_is_refused(queue: Queue, r: redis.Redis, prefix: str) -> None:
    before = keys_under(r, prefix)
    with pytest.raises(InvalidJob):
        queue.create_job("t").prefer([GPU]).only([CPU]).save()
    with pytest.raises(InvalidJob):
        queue.create_job("t").prefer([GPU]).fan_out(2).save()
    with pytest.raises(InvalidJob):
        queue.create_job("t").prefer([]).save()
    assert keys_under(r, prefix) == before
    jid = queue.create_job("t").prefer([GPU]).save().id
    assert jid is not None
    with pytest.raises(InvalidJob):
        queue.set_only(jid, [CPU])
    assert queue.get_job(jid).only() is None and _places(r, queue, GPU) == [jid]


def test_the_doctor_keeps_a_preferred_place_and_drops_a_stale_one(
    queue: Queue, r: redis.Redis
) -> None:
    jid = queue.create_job("t").prefer([GPU]).save().id
    assert jid is not None
    member = f"0{len(str(jid))}|{jid}"
    r.zadd(queue.keys.places("t", CPU), {member: 0})  # not a worker it prefers
    report = doctor.check(queue)
    assert [(f.kind, f.key) for f in report.findings] == [
        ("stale-pinned-job", queue.keys.places("t", CPU))
    ]
    doctor.repair(queue, report.findings)
    assert _places(r, queue, GPU) == [jid] and _places(r, queue, CPU) == []
    _clean(queue)
