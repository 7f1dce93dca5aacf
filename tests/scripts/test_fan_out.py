"""Fan-out jobs (``kue_core.features.runs``) through the scripts: runs on distinct workers, their
places (open to any worker, or in the places of each target), at_once, failed and lost runs,
stale tokens, fan_out("all") and late joiners, cancel; kue doctor finds nothing after each."""

from __future__ import annotations

import json
from typing import Any

import pytest
import redis

from kue_core import InvalidJob, Queue, doctor
from kue_core.store import calls
from kue_core.store.calls import PINS
from tests.conftest import keys_under
from tests.scripts.claiming import claim as _claim
from tests.scripts.claiming import clean as _clean
from tests.scripts.claiming import complete as _complete
from tests.scripts.claiming import fail as _fail
from tests.scripts.claiming import token as _token

W1, W2, W3, W4, LEASE = "w-1", "w-2", "w-3", "w-4", 30_000


def _runs(queue: Queue, job_id: int) -> dict[str, dict[str, Any]]:
    return {run["worker"]: run for run in queue.get_job(job_id).runs()}


def _register(queue: Queue, worker: str, types: dict[str, int], stopping: bool = False) -> None:
    info = json.dumps({"types": types, "stopping": stopping})
    start = calls.heartbeat(queue.keys, worker, LEASE, info, [], instance=worker, mode="start")
    assert queue.scripts.call(start) == []


def test_fan_out_3_completes_once_three_workers_each_completed_a_run(
    queue: Queue, r: redis.Redis
) -> None:
    job = queue.create_job("t", {"n": 1}).fan_out(3).save()
    jid = job.id
    assert jid is not None
    stored = queue.get_job(jid)
    assert stored.state == "inactive" and stored.fan_out() == {
        "k": 3,
        "atOnce": None,
        "maxFailedRuns": 0,
        "lateJoiners": False,
    }
    held = {w: _claim(queue, w) for w in (W1, W2, W3)}
    for w, claimed in held.items():
        assert claimed[0] == jid and claimed[1]["run"] == w and claimed[1]["workerId"] == w
    tokens = {_token(c) for c in held.values()}
    assert len(tokens) == 3  # one token per run
    assert _claim(queue, W4) in (None, PINS)  # every place is taken
    assert r.zcard(queue.keys.leases) == 0 and r.zcard(queue.keys.run_leases) == 3
    assert queue.get_job(jid).state == "active"
    _clean(queue)
    for i, w in enumerate((W1, W2)):
        outcome = _complete(queue, jid, _token(held[w]), json.dumps({"i": i}), None).outcome
        assert outcome == "complete"
        assert queue.get_job(jid).state == "active"
    assert _claim(queue, W1) in (None, PINS)  # it completed its run: it does not run it again
    outcome = _complete(queue, jid, _token(held[W3]), "7", None).outcome
    assert outcome == "complete"
    done = queue.get_job(jid)
    assert done.state == "complete"
    assert done.result == {"w-1": {"i": 0}, "w-2": {"i": 1}, "w-3": 7}
    runs = done.runs()
    assert [run["worker"] for run in runs] == [W1, W2, W3]
    assert all(run["state"] == "complete" and run["tries"] == 1 for run in runs)
    assert done.to_dict()["fanOut"]["k"] == 3 and len(done.to_dict()["runs"]) == 3
    assert r.zcard(queue.keys.run_leases) == 0
    assert not r.exists(queue.keys.open("t"))
    _clean(queue)


def test_a_worker_holding_a_run_cannot_take_another_and_stale_tokens_are_refused(
    queue: Queue,
) -> None:
    jid = queue.create_job("t").fan_out(2).save().id
    assert jid is not None
    first = _claim(queue, W1)
    assert _claim(queue, W1) in (None, PINS)  # it holds a run of the only job
    outcome = _complete(queue, jid, "999", "1", None).outcome
    assert outcome == "refused"
    outcome = _fail(queue, jid, "999", "x", "x", 0, None).outcome
    assert outcome == "refused"
    second = _claim(queue, W2)
    assert _complete(queue, jid, _token(first), "1", None).outcome == "complete"
    # The same token again: its run is complete, no longer running.
    assert _complete(queue, jid, _token(first), "2", None).outcome == "refused"
    assert queue.get_job(jid).state == "active"
    assert _complete(queue, jid, _token(second), "2", None).outcome == "complete"
    assert queue.get_job(jid).result == {W1: 1, W2: 2}
    _clean(queue)


def test_at_once_1_gives_one_place_at_a_time(queue: Queue, r: redis.Redis) -> None:
    jid = queue.create_job("t").fan_out(3, at_once=1).save().id
    assert jid is not None
    order = []
    for w in (W1, W2, W3):
        claimed = _claim(queue, w)
        assert claimed[0] == jid
        assert _claim(queue, W4) in (None, PINS)  # one run at a time
        assert r.zcard(queue.keys.open("t")) == 0
        _clean(queue)
        _complete(queue, jid, _token(claimed), json.dumps(w), None)
        order.append(w)
    assert queue.get_job(jid).result == {w: w for w in order}
    _clean(queue)


def test_a_place_a_finishing_worker_may_not_take_still_wakes_an_idle_worker(
    queue: Queue, r: redis.Redis
) -> None:
    jid = queue.create_job("t").fan_out(2, at_once=1).save().id
    assert jid is not None
    a = _claim(queue, W1)
    # W1 completes its run and asks for its next job in the same call: it may not take the
    # place this opens (its run is done), and an idle worker must still be woken for it.
    ended = _complete(queue, jid, _token(a), "1", (W1, LEASE))
    assert ended.outcome == "complete" and ended.next_job is None
    assert r.llen(queue.keys.tokens("t")) == 1
    b = _claim(queue, W2)
    assert b[0] == jid
    _complete(queue, jid, _token(b), "2", (W2, LEASE))
    assert queue.get_job(jid).result == {W1: 1, W2: 2}
    _clean(queue)


def test_a_failed_run_within_max_failed_runs_reopens_its_place(queue: Queue) -> None:
    jid = queue.create_job("t").fan_out(2, max_failed_runs=1).save().id
    assert jid is not None
    a, b = _claim(queue, W1), _claim(queue, W2)
    outcome = _fail(queue, jid, _token(a), "boom", "boom\ntrace", 5000, None).outcome
    assert outcome == "inactive"  # its place reopened (the retry delay is ignored)
    runs = _runs(queue, jid)
    assert runs[W1]["state"] == "failed" and runs[W1]["error"] == "boom"
    _clean(queue)
    again = _claim(queue, W1)  # its run failed, and no other live worker may: it takes it
    assert again[0] == jid and _runs(queue, jid)[W1]["tries"] == 2
    _complete(queue, jid, _token(again), "1", None)
    _complete(queue, jid, _token(b), "2", None)
    assert queue.get_job(jid).state == "complete"
    _clean(queue)


def test_a_failed_runs_place_goes_to_another_live_worker_first(queue: Queue) -> None:
    for w in (W1, W2, W3):
        _register(queue, w, {"t": 1})
    jid = queue.create_job("t").fan_out(2, max_failed_runs=1).save().id
    assert jid is not None
    a, b = _claim(queue, W1), _claim(queue, W2)
    # W1 fails and asks for its next job in the same call: W3, live and without a run of the
    # job, may take the place, so W1 does not take it again (it would fail there again).
    ended = _fail(queue, jid, _token(a), "boom", "boom", 0, (W1, LEASE))
    assert ended.outcome == "inactive" and ended.next_job is None
    assert _claim(queue, W1) in (None, PINS)
    c = _claim(queue, W3)
    assert c[0] == jid
    _complete(queue, jid, _token(b), "2", None)
    _complete(queue, jid, _token(c), "3", None)
    assert queue.get_job(jid).result == {W2: 2, W3: 3}
    assert _runs(queue, jid)[W1]["state"] == "failed"
    _clean(queue)


def test_a_pinned_failed_runs_place_goes_to_another_of_its_workers_first(queue: Queue) -> None:
    for w in (W1, W2, W3, W4):
        _register(queue, w, {"t": 1})
    job = queue.create_job("t").only([W1, W2, W3]).fan_out(2, max_failed_runs=1).save()
    jid = job.id
    assert jid is not None
    a, b = _claim(queue, W1), _claim(queue, W2)
    ended = _fail(queue, jid, _token(a), "boom", "boom", 0, (W1, LEASE))
    # W3 may take it: W1 leaves it
    assert ended.outcome == "inactive" and ended.next_job in (None, PINS)
    assert _claim(queue, W1) in (None, PINS) and _claim(queue, W4) in (None, PINS)
    c = _claim(queue, W3)
    assert c[0] == jid
    _complete(queue, jid, _token(b), "2", None)
    _complete(queue, jid, _token(c), "3", None)
    assert queue.get_job(jid).result == {W2: 2, W3: 3}
    _clean(queue)


def test_a_pinned_failed_run_is_retried_on_its_worker_when_no_other_may(queue: Queue) -> None:
    for w in (W1, W2, W3):
        _register(queue, w, {"t": 1})
    job = queue.create_job("t").only([W1, W2, W3]).fan_out(3, max_failed_runs=1).save()
    jid = job.id
    assert jid is not None
    held = {w: _claim(queue, w) for w in (W1, W2, W3)}
    # Every other worker of the job holds a run: W1's failed place comes back to W1.
    ended = _fail(queue, jid, _token(held[W1]), "boom", "boom", 0, (W1, LEASE))
    again = ended.next_job
    assert ended.outcome == "inactive" and again is not None and again[0] == jid
    assert _runs(queue, jid)[W1]["tries"] == 2
    for w, claimed in ((W1, again), (W2, held[W2]), (W3, held[W3])):
        _complete(queue, jid, _token(claimed), json.dumps(w), None)
    assert queue.get_job(jid).state == "complete"
    _clean(queue)


def test_past_max_failed_runs_the_job_fails_and_later_results_are_refused(
    queue: Queue, r: redis.Redis
) -> None:
    jid = queue.create_job("t").fan_out(3).save().id
    assert jid is not None
    held = {w: _claim(queue, w) for w in (W1, W2, W3)}
    with r.pubsub() as sub:
        sub.subscribe(queue.keys.control(W2), queue.keys.control(W3))
        for _ in range(2):
            sub.get_message(timeout=1)  # the subscribe confirmations
        outcome = _fail(queue, jid, _token(held[W1]), "boom", "boom", 0, None).outcome
        assert outcome == "failed"
        told = [sub.get_message(timeout=1) for _ in range(2)]
    ends = sorted((m["channel"], json.loads(m["data"])["lease"]) for m in told if m)
    assert ends == [
        (queue.keys.control(W2), _token(held[W2])),
        (queue.keys.control(W3), _token(held[W3])),
    ]
    job = queue.get_job(jid)
    assert job.state == "failed" and job.error == "run on w-1 failed: boom"
    runs = _runs(queue, jid)
    assert [runs[w]["state"] for w in (W1, W2, W3)] == ["failed", "lost", "lost"]
    assert _complete(queue, jid, _token(held[W2]), "1", None).outcome == "refused"
    assert _fail(queue, jid, _token(held[W3]), "x", "x", 0, None).outcome == "refused"
    assert r.zcard(queue.keys.run_leases) == 0
    _clean(queue)


def _expire(r: redis.Redis, queue: Queue, job_id: int, worker: str) -> None:
    r.zadd(queue.keys.run_leases, {f"{job_id}@{worker}": 1})


def test_an_expired_run_lease_makes_the_run_lost_and_its_place_is_taken_again(
    queue: Queue, r: redis.Redis
) -> None:
    jid = queue.create_job("t").fan_out(2).save().id
    assert jid is not None
    a, b = _claim(queue, W1), _claim(queue, W2)
    # A heartbeat renews the run's lease; a stale token's pair is lost.
    lost = queue.scripts.call(
        calls.heartbeat(queue.keys, W1, LEASE, "{}", [(jid, _token(a)), (jid, "999")], instance="i")
    )
    assert lost == [(jid, "999")]
    _expire(r, queue, jid, W1)
    assert queue.scripts.call(calls.recover(queue.keys, 3, 100)) == (1, 0)
    runs = _runs(queue, jid)
    assert runs[W1]["state"] == "lost" and runs[W2]["state"] == "running"
    assert queue.get_job(jid).to_dict().get("state") == "active"
    assert int(r.hget(queue.keys.job(jid), "stalls")) == 1
    lost = queue.scripts.call(
        calls.heartbeat(queue.keys, W1, LEASE, "{}", [(jid, _token(a))], instance="i")
    )
    assert lost == [(jid, _token(a))]  # the lost run's worker learns at its heartbeat
    assert _complete(queue, jid, _token(a), "1", None).outcome == "refused"
    _clean(queue)
    c = _claim(queue, W3)  # another worker takes the place
    assert c[0] == jid
    _complete(queue, jid, _token(b), "2", None)
    _complete(queue, jid, _token(c), "3", None)
    assert queue.get_job(jid).result == {W2: 2, W3: 3}
    _clean(queue)


def test_a_pinned_fan_out_job_lost_run_goes_back_to_the_same_worker(
    queue: Queue, r: redis.Redis
) -> None:
    jid = queue.create_job("t").only([W1, W2]).fan_out(2).save().id
    assert jid is not None
    assert queue.get_job(jid).state == "pinned"
    assert _claim(queue, W3) in (None, PINS)
    a = _claim(queue, W1)
    assert a[0] == jid
    assert r.zrange(queue.keys.places("t", W2), 0, -1) == [f"0{len(str(jid))}|{jid}"]
    _clean(queue)
    _expire(r, queue, jid, W1)
    assert queue.scripts.call(calls.recover(queue.keys, 3, 100)) == (1, 0)
    _clean(queue)
    again = _claim(queue, W1)  # restarted, the same pinned worker takes its place again
    assert again[0] == jid and _token(again) != _token(a)
    b = _claim(queue, W2)
    _complete(queue, jid, _token(again), "1", None)
    _complete(queue, jid, _token(b), "2", None)
    assert queue.get_job(jid).result == {W1: 1, W2: 2}
    _clean(queue)


def test_past_the_stall_limit_a_lost_run_fails_the_job(queue: Queue, r: redis.Redis) -> None:
    jid = queue.create_job("t").fan_out(2).save().id
    assert jid is not None
    _claim(queue, W1)
    _claim(queue, W2)
    _expire(r, queue, jid, W1)
    assert queue.scripts.call(calls.recover(queue.keys, 0, 100)) == (0, 1)
    job = queue.get_job(jid)
    assert job.state == "failed" and "stalled 1 times" in (job.error or "")
    assert {run["state"] for run in job.runs()} == {"lost"}
    assert r.zcard(queue.keys.run_leases) == 0
    _clean(queue)


def test_a_released_run_is_lost_without_a_stall(queue: Queue, r: redis.Redis) -> None:
    jid = queue.create_job("t").fan_out(1).save().id
    assert jid is not None
    a = _claim(queue, W1)
    assert queue.scripts.call(calls.release(queue.keys, jid, _token(a))) is True
    assert queue.scripts.call(calls.release(queue.keys, jid, _token(a))) is False
    assert _runs(queue, jid)[W1]["state"] == "lost"
    assert r.hget(queue.keys.job(jid), "stalls") is None
    _clean(queue)
    b = _claim(queue, W1)
    assert b[0] == jid
    _complete(queue, jid, _token(b), "1", None)
    assert queue.get_job(jid).state == "complete"


def test_fan_out_all_targets_exactly_the_live_workers_of_the_type(
    queue: Queue, r: redis.Redis
) -> None:
    _register(queue, W1, {"t": 1})
    _register(queue, W2, {"t": 2, "u": 1})
    _register(queue, W3, {"u": 1})  # does not serve t
    _register(queue, W4, {"t": 1}, stopping=True)
    r.hset(queue.keys.worker("w-dead"), mapping={"heartbeat": 1, "lease_ms": 10, "info": "{}"})
    r.zadd(queue.keys.workers, {"w-dead": 1})
    job = queue.create_job("t").fan_out("all").save()
    jid = job.id
    assert jid is not None
    stored = queue.get_job(jid)
    assert stored.state == "pinned" and stored.only() == [W1, W2]
    assert stored.fan_out()["k"] == 2  # type: ignore[index]
    among = queue.create_job("t").only([W2, W3]).fan_out("all").save()
    assert queue.get_job(among.id).only() == [W2]  # type: ignore[arg-type]
    a, b = _claim(queue, W1), _claim(queue, W2)
    assert a[0] == jid and b[0] == jid
    _complete(queue, jid, _token(a), "1", None)
    _complete(queue, jid, _token(b), "2", None)
    assert queue.get_job(jid).result == {W1: 1, W2: 2}
    _clean(queue)


def test_fan_out_all_with_no_worker_alive_completes_at_once(queue: Queue) -> None:
    job = queue.create_job("t").fan_out("all").save()
    stored = queue.get_job(job.id)  # type: ignore[arg-type]
    assert stored.state == "complete" and stored.result == {}
    assert stored.runs() == []
    _clean(queue)


def test_late_joiners_join(queue: Queue, r: redis.Redis) -> None:
    _register(queue, W1, {"t": 1})
    jid = queue.create_job("t").fan_out("all", late_joiners=True).save().id
    assert jid is not None
    a = _claim(queue, W1)
    assert a[0] == jid
    joined = _claim(queue, W2)  # W2 started serving t after the save: it joins
    assert joined[0] == jid
    stored = queue.get_job(jid)
    assert stored.only() == [W1, W2] and stored.fan_out()["k"] == 2  # type: ignore[index]
    _clean(queue)
    _complete(queue, jid, _token(a), "1", None)
    assert queue.get_job(jid).state == "active"
    _complete(queue, jid, _token(joined), "2", None)
    assert queue.get_job(jid).result == {W1: 1, W2: 2}
    assert not r.exists(queue.keys.late("t"))
    assert _claim(queue, W3) in (None, PINS)  # nothing left to join
    _clean(queue)


def test_cancel_stops_every_run(queue: Queue, r: redis.Redis) -> None:
    jid = queue.create_job("t").fan_out(3).save().id
    assert jid is not None
    held = {w: _claim(queue, w) for w in (W1, W2)}
    with r.pubsub() as sub:
        sub.subscribe(queue.keys.control(W1), queue.keys.control(W2))
        for _ in range(2):
            sub.get_message(timeout=1)
        queue.cancel(jid, "enough")
        told = [sub.get_message(timeout=1) for _ in range(2)]
    assert sorted(json.loads(m["data"])["lease"] for m in told if m) == sorted(
        _token(c) for c in held.values()
    )
    job = queue.get_job(jid)
    assert job.state == "failed" and {run["state"] for run in job.runs()} == {"lost"}
    assert r.zcard(queue.keys.run_leases) == 0 and not r.exists(queue.keys.open("t"))
    assert _claim(queue, W3) in (None, PINS)
    _clean(queue)


def test_removing_a_fan_out_job_leaves_no_key(queue: Queue, r: redis.Redis, prefix: str) -> None:
    before = keys_under(r, prefix)
    jid = queue.create_job("t").fan_out(2).save().id
    assert jid is not None
    _claim(queue, W1)
    queue.remove(jid)
    left = keys_under(r, prefix)
    gone = {queue.keys.runs(jid), queue.keys.job(jid), queue.keys.run_leases}
    gone |= {queue.keys.open("t"), queue.keys.history(jid)}
    assert not gone & left and before <= left
    _clean(queue)


@pytest.mark.parametrize(
    ("k", "options"),
    [
        (0, {}),
        (65, {}),
        (True, {}),
        ("some", {}),
        (2, {"at_once": 3}),
        (2, {"at_once": 0}),
        (2, {"max_failed_runs": -1}),
        (2, {"late_joiners": True}),
        ("all", {"late_joiners": 1}),
    ],
)
def test_bad_options_are_refused_and_write_nothing(
    queue: Queue, r: redis.Redis, prefix: str, k: Any, options: dict[str, Any]
) -> None:
    before = keys_under(r, prefix)
    with pytest.raises(InvalidJob):
        queue.create_job("t").fan_out(k, **options).save()
    assert keys_under(r, prefix) == before


def test_fan_out_conflicts_with_only_and_group_are_refused(
    queue: Queue, r: redis.Redis, prefix: str
) -> None:
    before = keys_under(r, prefix)
    with pytest.raises(InvalidJob):
        queue.create_job("t").only([W1]).fan_out(2)
    with pytest.raises(InvalidJob):
        queue.create_job("t").fan_out(2).only([W1]).save()  # checked again at the save
    with pytest.raises(InvalidJob):
        queue.create_job("t").group("g").fan_out(2)
    with pytest.raises(InvalidJob):
        queue.create_job("t").fan_out(2).group("g").save()
    assert keys_under(r, prefix) == before
    saved = queue.create_job("t").save()
    with pytest.raises(InvalidJob):
        saved.fan_out(2)
    assert queue.get_job(saved.id).fan_out() is None  # type: ignore[arg-type]


def test_a_plain_type_is_untouched(queue: Queue) -> None:
    plain = queue.create_job("t").save()
    claimed = _claim(queue, W1)
    assert claimed[0] == plain.id and "run" not in claimed[1]
    assert "fanOut" not in queue.get_job(plain.id).to_dict()  # type: ignore[arg-type]
    assert _claim(queue, W1) in (None, PINS)


def test_kue_doctor_finds_and_repairs_run_leases_and_orphan_runs(
    queue: Queue, r: redis.Redis
) -> None:
    jid = queue.create_job("t").fan_out(2).save().id
    assert jid is not None
    a = _claim(queue, W1)
    _claim(queue, W2)
    _clean(queue)  # active, with no job lease: not stuck (its runs have leases)
    r.zrem(queue.keys.run_leases, f"{jid}@{W1}")  # a running run without a lease
    r.zadd(queue.keys.run_leases, {f"{jid}@{W3}": 10**13})  # a lease of no run
    r.hset(queue.keys.runs(99_999), W1, json.dumps({"state": "complete"}))  # of no job
    report = doctor.check(queue)
    kinds = sorted(f.kind for f in report.findings)
    assert kinds == ["orphan-runs", "run-without-lease", "stray-run-lease"]
    doctor.repair(queue, report.findings)
    assert not r.exists(queue.keys.runs(99_999))
    assert r.zscore(queue.keys.run_leases, f"{jid}@{W3}") is None
    assert r.zscore(queue.keys.run_leases, f"{jid}@{W1}") == 0  # expired: recovery's now
    assert queue.scripts.call(calls.recover(queue.keys, 3, 100)) == (1, 0)
    assert _runs(queue, jid)[W1]["state"] == "lost"
    assert _complete(queue, jid, _token(a), "1", None).outcome == "refused"
    _clean(queue)
