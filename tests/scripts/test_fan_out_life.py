"""Fan-out jobs over their life (``kue_core.features.runs``), through the scripts: every way back to
waiting starts a job over (no runs, none done or failed: k new runs to complete), and a
publish by key with ``reset_runs`` gives its failed workers another go; kue doctor finds
nothing after each."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
import redis

from kue_core import InvalidJob, Queue
from kue_core.store import calls
from kue_core.store.calls import PINS
from tests.conftest import keys_under
from tests.scripts.claiming import claim as _claim
from tests.scripts.claiming import clean as _clean
from tests.scripts.claiming import complete as _complete
from tests.scripts.claiming import fail as _fail
from tests.scripts.claiming import token as _token

W1, W2, W3, LEASE = "w-1", "w-2", "w-3", 30_000


def _counters(r: redis.Redis, queue: Queue, job_id: int) -> list[str | None]:
    return r.hmget(queue.keys.job(job_id), "runs_done", "runs_failed")  # type: ignore[return-value]


def _register(queue: Queue, worker: str) -> None:
    info = json.dumps({"types": {"t": 1}, "stopping": False})
    start = calls.heartbeat(queue.keys, worker, LEASE, info, [], instance=worker, mode="start")
    assert queue.scripts.call(start) == []


def _half_done(queue: Queue, job_id: int) -> Any:
    """W1's run completed, W2's running: returns W2's claim."""
    first = _claim(queue, W1)
    assert first[0] == job_id
    assert _complete(queue, job_id, _token(first), "1", None).outcome == "complete"
    second = _claim(queue, W2)
    assert second[0] == job_id
    return second


def _runs_again_to_complete(queue: Queue, job_id: int, workers: tuple[str, ...]) -> None:
    """The job needs a new run on each of ``workers``: it completes only after the last."""
    held = [_claim(queue, w, str(queue.get_job(job_id).type)) for w in workers]
    assert all(c[0] == job_id for c in held), held
    for i, claimed in enumerate(held):
        assert queue.get_job(job_id).state == "active"
        assert _complete(queue, job_id, _token(claimed), json.dumps(i), None).outcome == (
            "complete"
        )
    done = queue.get_job(job_id)
    assert done.state == "complete"
    assert done.result == {w: i for i, w in enumerate(workers)}


Move = Callable[[Queue, int], None]

MOVES: dict[str, Move] = {
    "set_state inactive": lambda q, jid: q.get_job(jid).set_state("inactive") and None,
    "set_state delayed": lambda q, jid: q.get_job(jid).set_state("delayed") and None,
    "move with force": lambda q, jid: q.move(jid, "u", force=True) and None,
}


@pytest.mark.parametrize("how", list(MOVES))
def test_an_active_fan_out_job_sent_back_to_waiting_starts_over(
    queue: Queue, r: redis.Redis, how: str
) -> None:
    jid = queue.create_job("t").fan_out(2).save().id
    assert jid is not None
    running = _half_done(queue, jid)
    with r.pubsub() as sub:
        sub.subscribe(queue.keys.control(W2))
        sub.get_message(timeout=1)
        MOVES[how](queue, jid)
        told = sub.get_message(timeout=1)
    assert told is not None and json.loads(told["data"])["lease"] == _token(running)
    assert not r.exists(queue.keys.runs(jid))
    assert _counters(r, queue, jid) == ["0", "0"]
    assert r.zcard(queue.keys.run_leases) == 0
    assert _complete(queue, jid, _token(running), "2", None).outcome == "refused"
    _clean(queue)
    job = queue.get_job(jid)
    if job.state == "delayed":
        queue.promote_all()
    assert queue.get_job(jid).state == "inactive"
    # W1 completed a run before: it starts over, so W1 runs it again, and two runs are due.
    _runs_again_to_complete(queue, jid, (W1, W2))
    _clean(queue)


def test_a_failed_fan_out_job_retried_by_hand_starts_over(queue: Queue, r: redis.Redis) -> None:
    jid = queue.create_job("t").fan_out(2, max_failed_runs=1).save().id
    assert jid is not None
    done = _claim(queue, W1)
    _complete(queue, jid, _token(done), "1", None)
    for w in (W2, W3):
        claimed = _claim(queue, w)
        _fail(queue, jid, _token(claimed), "boom", "boom", 0, None)
    assert queue.get_job(jid).state == "failed"
    assert _counters(r, queue, jid) == ["1", "2"]
    assert queue.retry_all("t") == 1
    assert queue.get_job(jid).state == "inactive"
    assert not r.exists(queue.keys.runs(jid)) and _counters(r, queue, jid) == ["0", "0"]
    _clean(queue)
    _runs_again_to_complete(queue, jid, (W1, W2))
    _clean(queue)


def test_a_fan_out_job_failed_then_set_back_to_inactive_starts_over(
    queue: Queue, r: redis.Redis
) -> None:
    jid = queue.create_job("t").fan_out(2).save().id
    assert jid is not None
    claimed = _claim(queue, W1)
    _fail(queue, jid, _token(claimed), "boom", "boom", 0, None)
    assert queue.get_job(jid).state == "failed"
    queue.get_job(jid).set_state("inactive")
    assert not r.exists(queue.keys.runs(jid)) and _counters(r, queue, jid) == ["0", "0"]
    _clean(queue)
    _runs_again_to_complete(queue, jid, (W1, W2))


def test_a_fan_out_all_job_keeps_its_targets_when_it_starts_over(
    queue: Queue, r: redis.Redis
) -> None:
    _register(queue, W1)
    _register(queue, W2)
    jid = queue.create_job("t").fan_out("all", late_joiners=True).save().id
    assert jid is not None
    _half_done(queue, jid)
    _register(queue, W3)  # alive now, but not a target until it claims (a late joiner)
    queue.get_job(jid).set_state("inactive")
    job = queue.get_job(jid)
    assert job.state == "pinned" and job.only() == [W1, W2]
    assert job.fan_out()["k"] == 2  # type: ignore[index]
    assert r.zscore(queue.keys.late("t"), f"0{len(str(jid))}|{jid}") is not None
    assert not r.exists(queue.keys.runs(jid)) and _counters(r, queue, jid) == ["0", "0"]
    _clean(queue)
    _runs_again_to_complete(queue, jid, (W1, W2, W3))
    _clean(queue)


def test_a_late_joiners_job_keeps_a_list_of_workers(queue: Queue, r: redis.Redis) -> None:
    _register(queue, W1)
    jid = queue.create_job("t").fan_out("all", late_joiners=True).save().id
    assert jid is not None
    before = r.hgetall(queue.keys.job(jid))
    with pytest.raises(InvalidJob, match="late joiners"):
        queue.set_only(jid, None)
    assert r.hgetall(queue.keys.job(jid)) == before
    assert queue.set_only(jid, [W1, W2]).only() == [W1, W2]  # another list: allowed
    _clean(queue)


def test_a_reuse_save_of_a_finished_fan_out_job_starts_it_over(
    queue: Queue, r: redis.Redis
) -> None:
    jid = queue.create_job("t").fan_out(2).unique("k", "reuse").save().id
    assert jid is not None
    running = _half_done(queue, jid)
    _complete(queue, jid, _token(running), "2", None)
    assert queue.get_job(jid).state == "complete"
    again = queue.create_job("t", {"n": 2}).fan_out(2).unique("k", "reuse").save()
    assert again.id == jid and again.deduplicated and again.state == "inactive"
    assert not r.exists(queue.keys.runs(jid)) and _counters(r, queue, jid) == ["0", "0"]
    _clean(queue)
    _runs_again_to_complete(queue, jid, (W1, W2))
    _clean(queue)


def test_a_fan_out_job_moved_to_another_type_runs_there(queue: Queue, r: redis.Redis) -> None:
    jid = queue.create_job("t").fan_out(2).save().id
    assert jid is not None
    _half_done(queue, jid)
    queue.move(jid, "u", force=True)
    assert _claim(queue, W3) in (None, PINS)  # nothing left under t
    _runs_again_to_complete(queue, jid, (W1, W3))
    assert not r.exists(queue.keys.open("t")) and not r.exists(queue.keys.open("u"))
    _clean(queue)


# -- publishing by key: reset_runs --------------------------------------------------------


def _publish(queue: Queue, *, reset: bool, mode: str = "until_done") -> Any:
    return queue.create_job("t").fan_out(3, max_failed_runs=1, reset_runs=reset).unique("k", mode)


def test_a_dedup_with_reset_runs_clears_the_failed_runs_only(queue: Queue, r: redis.Redis) -> None:
    jid = _publish(queue, reset=True).save().id
    assert jid is not None
    ok = _claim(queue, W1)
    _complete(queue, jid, _token(ok), "1", None)
    bad = _claim(queue, W2)
    _fail(queue, jid, _token(bad), "boom", "boom", 0, None)
    running = _claim(queue, W3)
    assert running[0] == jid
    assert _counters(r, queue, jid) == ["1", "1"]
    again = _publish(queue, reset=True).save()
    assert again.id == jid and again.deduplicated
    runs = {run["worker"]: run["state"] for run in queue.get_job(jid).runs()}
    assert runs == {W1: "complete", W3: "running"}  # W2's failed run is gone
    assert _counters(r, queue, jid) == ["1", "0"]
    _clean(queue)
    # A fresh max_failed_runs: W3 may fail once more without failing the job.
    assert _fail(queue, jid, _token(running), "x", "x", 0, None).outcome == "inactive"
    last = [_claim(queue, w) for w in (W2, W3)]
    assert [c[0] for c in last] == [jid, jid]
    for c in last:
        _complete(queue, jid, _token(c), "2", None)
    assert queue.get_job(jid).state == "complete"
    _clean(queue)


def test_reset_runs_reopens_the_places_of_a_job_at_its_last_failure(
    queue: Queue, r: redis.Redis
) -> None:
    jid = queue.create_job("t").only([W1, W2]).fan_out(2).unique("k").save().id
    assert jid is not None
    held = _claim(queue, W1)
    failed = _claim(queue, W2)
    # max_failed_runs 0: a second publish before the failure is what keeps it going.
    r.hset(queue.keys.job(jid), "max_failed_runs", 1)
    _fail(queue, jid, _token(failed), "boom", "boom", 0, None)
    r.zrem(queue.keys.places("t", W2), f"0{len(str(jid))}|{jid}")  # as if never offered
    again = queue.create_job("t").only([W1, W2]).fan_out(2, reset_runs=True).unique("k").save()
    assert again.deduplicated
    assert r.zscore(queue.keys.places("t", W2), f"0{len(str(jid))}|{jid}") is not None
    _clean(queue)
    redo = _claim(queue, W2)
    assert redo[0] == jid
    _complete(queue, jid, _token(held), "1", None)
    _complete(queue, jid, _token(redo), "2", None)
    assert queue.get_job(jid).result == {W1: 1, W2: 2}


@pytest.mark.parametrize("mode", ["until_done", "throttle"])
def test_a_dedup_without_reset_runs_changes_no_run(queue: Queue, r: redis.Redis, mode: str) -> None:
    def publish() -> Any:
        job = queue.create_job("t").fan_out(3, max_failed_runs=1)
        return job.unique("k", mode, ttl=60_000 if mode == "throttle" else None)

    jid = publish().save().id
    assert jid is not None
    bad = _claim(queue, W1)
    _fail(queue, jid, _token(bad), "boom", "boom", 0, None)
    _claim(queue, W2)
    before = r.hgetall(queue.keys.runs(jid)), _counters(r, queue, jid)
    again = publish().save()
    assert again.deduplicated and again.id == jid
    assert (r.hgetall(queue.keys.runs(jid)), _counters(r, queue, jid)) == before
    _clean(queue)


def test_reset_runs_without_a_unique_key_is_refused(
    queue: Queue, r: redis.Redis, prefix: str
) -> None:
    before = keys_under(r, prefix)
    with pytest.raises(InvalidJob):
        queue.create_job("t").fan_out(2, reset_runs=True).save()
    with pytest.raises(InvalidJob):
        queue.create_job("t").fan_out(2, reset_runs=1).unique("k").save()  # type: ignore[arg-type]
    assert keys_under(r, prefix) == before
    assert queue.create_job("t").fan_out(2, reset_runs=True).fan_out() == {
        "k": 2,
        "atOnce": None,
        "maxFailedRuns": 0,
        "lateJoiners": False,
    }
