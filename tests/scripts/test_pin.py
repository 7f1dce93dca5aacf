"""Changing who may run a saved job (``queue.set_only``, ``pin.lua``) in each state: a waiting
job moves between inactive and pinned and between workers' places; a delayed, blocked,
complete or failed job changes its field only; a running job (or fan-out run) on a worker no
longer allowed is stopped in that worker and offered to the new ones; bad lists write
nothing; kue doctor finds nothing after each."""

from __future__ import annotations

import json
from typing import Any

import pytest
import redis

from kue_core import InvalidJob, JobNotFound, Queue
from kue_core.store.calls import PINS
from tests.conftest import keys_under
from tests.scripts.claiming import claim as _claim
from tests.scripts.claiming import clean as _clean
from tests.scripts.claiming import complete as _complete
from tests.scripts.claiming import token as _token

W1, W2, W3, LEASE = "w-1", "w-2", "w-3", 30_000


def _places(r: redis.Redis, queue: Queue, worker: str) -> list[int]:
    return [int(m.split("|")[1]) for m in r.zrange(queue.keys.places("t", worker), 0, -1)]


def _last(queue: Queue, job_id: int) -> dict[str, Any]:
    return queue.history(job_id)[-1]


def test_a_waiting_job_moves_between_inactive_pinned_and_workers(
    queue: Queue, r: redis.Redis
) -> None:
    jid = queue.create_job("t").save().id
    assert jid is not None
    with r.pubsub() as sub:
        sub.subscribe(queue.keys.events)
        sub.get_message(timeout=1)
        job = queue.set_only(jid, [W1])
        event = sub.get_message(timeout=1)
    assert event is not None
    assert json.loads(event["data"]) == {
        "id": jid,
        "event": "pinned",
        "args": ["pinned", [W1]],
        "type": "t",
    }
    assert job.state == "pinned" and job.only() == [W1]
    assert _places(r, queue, W1) == [jid] and queue.counts("t")["inactive"] == 0
    assert _last(queue, jid)["only"] == [W1] and _last(queue, jid)["from"] == "inactive"
    _clean(queue)
    job = queue.get_job(jid).set_only([W2, W3])
    assert job.state == "pinned" and job.only() == [W2, W3]
    assert _places(r, queue, W1) == [] and _places(r, queue, W2) == [jid] == _places(r, queue, W3)
    assert _claim(queue, W1) == PINS  # no longer W1's
    _clean(queue)
    job = queue.set_only(jid, None)
    assert job.state == "inactive" and job.only() is None
    assert _places(r, queue, W2) == [] and _places(r, queue, W3) == []
    assert "only" not in _last(queue, jid)
    _clean(queue)
    assert _claim(queue, W1)[0] == jid  # any worker's again


@pytest.mark.parametrize("state", ["delayed", "complete", "failed"])
def test_a_job_not_waiting_changes_its_field_only(queue: Queue, r: redis.Redis, state: str) -> None:
    jid = queue.create_job("t").save().id
    assert jid is not None
    queue.get_job(jid).set_state(state)
    job = queue.set_only(jid, [W1])
    assert job.state == state and job.only() == [W1]
    assert _places(r, queue, W1) == []
    _clean(queue)
    queue.get_job(jid).set_state("inactive")  # back through waiting(): pinned to W1
    assert queue.get_job(jid).state == "pinned" and _places(r, queue, W1) == [jid]
    _clean(queue)


def test_a_blocked_job_waits_for_its_new_workers_once_released(
    queue: Queue, r: redis.Redis
) -> None:
    dep = queue.create_job("d").save()
    jid = queue.create_job("t").depends_on(dep).save().id
    assert jid is not None and queue.get_job(jid).state == "blocked"
    assert queue.set_only(jid, [W1]).state == "blocked"
    _clean(queue)
    claimed = _claim(queue, W2, "d")
    _complete(queue, dep.id, _token(claimed), "1", None)  # type: ignore[arg-type]
    assert queue.get_job(jid).state == "pinned" and _places(r, queue, W1) == [jid]
    _clean(queue)


def test_a_running_job_on_a_worker_no_longer_allowed_is_stopped_and_waits_for_the_new_ones(
    queue: Queue, r: redis.Redis
) -> None:
    jid = queue.create_job("t").attempts(3).save().id
    assert jid is not None
    claimed = _claim(queue, W1)
    with r.pubsub() as sub:
        sub.subscribe(queue.keys.control(W1))
        sub.get_message(timeout=1)
        job = queue.set_only(jid, [W2])
        told = sub.get_message(timeout=1)
    assert told is not None
    message = json.loads(told["data"])
    assert message["op"] == "end" and message["lease"] == _token(claimed)
    assert job.state == "pinned" and _places(r, queue, W2) == [jid]
    assert r.zscore(queue.keys.leases, f"0{len(str(jid))}|{jid}") is None
    assert _complete(queue, jid, _token(claimed), "1", None).outcome == "refused"
    stored = r.hmget(queue.keys.job(jid), "attempts", "stalls")
    assert stored == [None, None]  # no attempt, no stall counted
    entry = _last(queue, jid)
    assert entry["stopped"] == [W1] and entry["from"] == "active" and entry["only"] == [W2]
    _clean(queue)
    again = _claim(queue, W2)
    assert again[0] == jid
    _complete(queue, jid, _token(again), "2", None)
    assert queue.get_job(jid).state == "complete"


def test_a_running_job_whose_worker_stays_allowed_goes_on(queue: Queue, r: redis.Redis) -> None:
    jid = queue.create_job("t").only([W1]).save().id
    assert jid is not None
    claimed = _claim(queue, W1)
    assert queue.set_only(jid, [W2, W1]).state == "active"
    assert _places(r, queue, W2) == []
    _clean(queue)
    assert _complete(queue, jid, _token(claimed), "1", None).outcome == "complete"
    assert queue.set_only(jid, None).state == "complete"


def test_a_running_fan_out_job_stops_the_runs_no_longer_allowed_and_offers_their_places(
    queue: Queue, r: redis.Redis
) -> None:
    jid = queue.create_job("t").fan_out(2).save().id
    assert jid is not None
    a, b = _claim(queue, W1), _claim(queue, W2)
    with r.pubsub() as sub:
        sub.subscribe(queue.keys.control(W1), queue.keys.control(W2))
        for _ in range(2):
            sub.get_message(timeout=1)
        assert queue.set_only(jid, [W2, W3]).state == "active"
        told = sub.get_message(timeout=1)
        assert sub.get_message(timeout=0.2) is None  # W2 goes on
    assert told is not None and told["channel"] == queue.keys.control(W1)
    assert json.loads(told["data"])["lease"] == _token(a)
    runs = {run["worker"]: run["state"] for run in queue.get_job(jid).runs()}
    assert runs == {W1: "lost", W2: "running"}
    assert _places(r, queue, W3) == [jid] and not r.exists(queue.keys.open("t"))
    assert _last(queue, jid)["stopped"] == [W1]
    _clean(queue)
    assert _claim(queue, W1) in (None, PINS)
    c = _claim(queue, W3)
    assert c[0] == jid
    _complete(queue, jid, _token(b), "2", None)
    _complete(queue, jid, _token(c), "3", None)
    assert queue.get_job(jid).result == {W2: 2, W3: 3}
    _clean(queue)


def test_a_fan_out_job_of_any_worker_may_be_given_workers_and_back(
    queue: Queue, r: redis.Redis
) -> None:
    jid = queue.create_job("t").fan_out(2).save().id
    assert jid is not None
    assert queue.set_only(jid, [W1, W2]).state == "pinned"
    a = _claim(queue, W1)
    assert a[0] == jid and _places(r, queue, W2) == [jid]
    _clean(queue)
    assert queue.set_only(jid, None).state == "active"
    assert _places(r, queue, W2) == [] and r.zcard(queue.keys.open("t")) == 1
    _clean(queue)
    b = _claim(queue, W3)
    assert b[0] == jid
    _complete(queue, jid, _token(a), "1", None)
    _complete(queue, jid, _token(b), "3", None)
    assert queue.get_job(jid).result == {W1: 1, W3: 3}


@pytest.mark.parametrize(
    "workers",
    [[], [W1, W1], ["bad id"], "w-1", [W1] * 0 + [f"w{i}" for i in range(65)], [W1]],
)
def test_bad_lists_are_refused_and_write_nothing(
    queue: Queue, r: redis.Redis, prefix: str, workers: Any
) -> None:
    jid = queue.create_job("t").fan_out(2).save().id
    assert jid is not None
    before = keys_under(r, prefix), r.hgetall(queue.keys.job(jid))
    with pytest.raises(InvalidJob):  # the last: fewer workers than the job's k
        queue.set_only(jid, workers)
    assert (keys_under(r, prefix), r.hgetall(queue.keys.job(jid))) == before


def test_a_missing_job_is_not_found(queue: Queue) -> None:
    with pytest.raises(JobNotFound):
        queue.set_only(12345, [W1])
