"""Pinned jobs (``kue_core.features.pins``) on a real Redis: a job pinned to some workers waits in
state ``pinned`` where only they find it, goes to them first at equal priority, never holds
up the type's other jobs, and comes back pinned whatever ends an attempt early (a retry, a
lost lease, a release); moving, cancelling, re-prioritising and removing it keep every index
right, and bad input writes nothing."""

from __future__ import annotations

import threading
from typing import Any

import pytest
import redis

from kue_core import InvalidJob, InvalidTransition, Job, JobNotFound, Queue, defaults, doctor
from kue_core.store import calls
from kue_core.store.calls import PINS, Waits
from tests.conftest import keys_under, wait_for
from tests.scripts.claiming import live

A, B, LEASE = "gpu-1", "cpu-1", 30_000


def _claim(queue: Queue, worker: str, job_type: str = "t", lease: int = LEASE) -> Any:
    return queue.scripts.call(calls.claim(queue.keys, job_type, worker, lease))


def _places(r: redis.Redis, queue: Queue, worker: str, job_type: str = "t") -> list[int]:
    return [int(m.split("|")[1]) for m in r.zrange(queue.keys.places(job_type, worker), 0, -1)]


def test_a_pinned_job_waits_pinned_where_only_its_workers_find_it(
    queue: Queue, r: redis.Redis
) -> None:
    job = queue.create_job("t", {"n": 1}).only([A, "gpu-2", A]).save()
    assert job.only() == [A, "gpu-2"]  # repeats dropped, order kept
    assert job.state == "pinned"  # the saved job says so too, as docs/pinned.md shows
    delayed = queue.create_job("t").only([A]).delay(60_000).save()
    assert delayed.state == queue.get_job(delayed.id).state == "delayed"  # type: ignore[arg-type]
    again = queue.get_job(job.id)  # type: ignore[arg-type]
    assert again.state == "pinned" and again.only() == [A, "gpu-2"]
    assert again.to_dict()["only"] == [A, "gpu-2"]
    assert queue.counts("t")["pinned"] == 1 and queue.counts("t")["inactive"] == 0
    assert _places(r, queue, A) == [job.id] and _places(r, queue, "gpu-2") == [job.id]
    assert _claim(queue, B) == PINS  # nothing for this worker; the type has pinned jobs
    claimed = _claim(queue, A)
    assert claimed[0] == job.id and claimed[1]["workerId"] == A
    assert _places(r, queue, A) == [] and _places(r, queue, "gpu-2") == []
    assert queue.counts("t")["pinned"] == 0 and queue.counts("t")["active"] == 1
    live(queue)  # A, a live process, holds a lease: its job is not stuck
    assert doctor.check(queue).findings == []


def test_pinned_jobs_never_hold_up_the_jobs_behind_them(queue: Queue) -> None:
    pinned = [queue.create_job("t").priority("critical").only([A]).save().id for _ in range(50)]
    plain = [queue.create_job("t", {"i": i}).save().id for i in range(5)]
    got = []
    for _ in plain:
        claimed = _claim(queue, B)
        got.append(claimed[0])
        queue.scripts.call(
            calls.complete(queue.keys, claimed[0], claimed[1]["lease"], "null", None)
        )
    assert got == plain  # the other worker took every plain job, FIFO, none of the pinned
    assert _claim(queue, B) == PINS
    assert _claim(queue, A)[0] == pinned[0]  # critical: before anything else


def test_priority_decides_between_pinned_and_plain_and_pinned_wins_ties(queue: Queue) -> None:
    low = queue.create_job("t").priority("low").only([A]).save().id
    normal = queue.create_job("t").save().id
    tie = queue.create_job("t").only([A]).save().id
    order = []
    while (claimed := _claim(queue, A)) not in (None, PINS):
        order.append(claimed[0])
    assert order == [tie, normal, low]


def test_what_ends_an_attempt_early_brings_a_pinned_job_back_pinned(
    queue: Queue, r: redis.Redis
) -> None:
    job = queue.create_job("t").only([A]).attempts(3).save()
    jid = job.id
    assert jid is not None
    claimed = _claim(queue, A)
    outcome = queue.scripts.call(
        calls.fail(queue.keys, jid, claimed[1]["lease"], "boom", "boom", 0, None)
    ).outcome
    assert outcome == "inactive"  # a retry at once: it waits for its worker again
    assert queue.get_job(jid).state == "pinned" and _places(r, queue, A) == [jid]
    claimed = _claim(queue, A)
    queue.scripts.call(calls.release(queue.keys, jid, claimed[1]["lease"]))
    assert queue.get_job(jid).state == "pinned" and _places(r, queue, A) == [jid]
    _claim(queue, A)
    live(queue)  # A registers, then stops renewing its lease: it runs out
    seconds, micros = r.time()
    r.zadd(queue.keys.worker_leases, {A: int(seconds) * 1000 + int(micros) // 1000})
    assert wait_for(lambda: queue.scripts.call(calls.recover(queue.keys, 5, 100))[0] == 1)
    assert queue.get_job(jid).state == "pinned" and _places(r, queue, A) == [jid]
    assert doctor.check(queue).findings == []
    assert r.zscore(queue.keys.worker_leases, A) is None  # its jobs recovered, it is gone


def test_a_pinned_retry_after_a_backoff_comes_back_pinned(queue: Queue, r: redis.Redis) -> None:
    jid = queue.create_job("t").only([A]).attempts(2).save().id
    assert jid is not None
    claimed = _claim(queue, A)
    queue.scripts.call(calls.fail(queue.keys, jid, claimed[1]["lease"], "boom", "boom", 1, None))
    assert queue.get_job(jid).state == "delayed"
    promote = calls.promote(queue.keys, 100)
    assert wait_for(lambda: (queue.scripts.call(promote), queue.get_job(jid).state)[1] == "pinned")
    assert _places(r, queue, A) == [jid]


def test_moves_by_hand_keep_a_pinned_job_pinned(queue: Queue, r: redis.Redis) -> None:
    jid = queue.create_job("t").only([A]).save().id
    plain = queue.create_job("t").save().id
    assert jid is not None and plain is not None
    queue.get_job(jid).set_state("inactive")  # a job with workers of its own waits pinned
    assert queue.get_job(jid).state == "pinned"
    queue.get_job(jid).set_state("delayed")
    assert _places(r, queue, A) == []
    queue.get_job(jid).set_state("inactive")
    assert queue.get_job(jid).state == "pinned" and _places(r, queue, A) == [jid]
    with pytest.raises(InvalidTransition):
        queue.get_job(plain).set_state("pinned")
    assert queue.get_job(plain).state == "inactive"
    queue.get_job(jid).priority("high").save()
    assert r.zscore(queue.keys.places("t", A), f"{len(str(jid)):02d}|{jid}") == -10
    queue.move(jid, "u")
    assert _places(r, queue, A, "t") == [] and _places(r, queue, A, "u") == [jid]
    assert queue.get_job(jid).state == "pinned"
    assert doctor.check(queue).findings == []


def test_cancel_and_remove_take_a_pinned_job_out_of_its_workers_places(
    queue: Queue, r: redis.Redis
) -> None:
    one = queue.create_job("t").only([A, B]).save().id
    two = queue.create_job("t").only([A]).save().id
    assert one is not None and two is not None
    queue.cancel(one, "not needed")
    assert queue.get_job(one).state == "failed"
    assert _places(r, queue, A) == [two] and _places(r, queue, B) == []
    queue.remove(two)
    assert _places(r, queue, A) == []
    assert doctor.check(queue).findings == []


def test_a_claim_over_several_types_tells_which_have_pinned_jobs(queue: Queue) -> None:
    queue.create_job("t").only([A]).save()
    got = queue.scripts.call(calls.claim(queue.keys, ["u", "t"], B, LEASE))
    assert got == Waits((None, PINS))


@pytest.mark.parametrize(
    "bad",
    [[], "gpu-1", ["gpu 1"], [""], ["-x"], [1], ["x" * 101], [f"w{i}" for i in range(65)]],
)
def test_bad_pins_are_refused_and_write_nothing(
    queue: Queue, r: redis.Redis, prefix: str, bad: Any
) -> None:
    with pytest.raises(InvalidJob):
        queue.create_job("t").only(bad).save()
    assert keys_under(r, prefix) == set()


def test_both_clients_re_pin_a_waiting_job(client: Any, r: redis.Redis) -> None:
    job = client.create_job("t").only([A]).save()
    moved = client.set_only(job.id, [B])
    assert moved.only() == [B] and moved.state == "pinned"
    freed = job.set_only(None)
    assert freed.only() is None and freed.state == "inactive"
    assert client.get_job(job.id).only() is None
    with pytest.raises(InvalidJob):
        job.set_only([])
    with pytest.raises(JobNotFound):
        client.set_only(999, [A])


def test_pins_are_given_before_the_save(queue: Queue) -> None:
    job = queue.create_job("t").save()
    with pytest.raises(InvalidJob):
        job.only([A])


def test_the_doctor_finds_and_repairs_pinned_jobs_out_of_their_places(
    queue: Queue, r: redis.Redis
) -> None:
    lost = queue.create_job("t").only([A, B]).save().id
    bare = queue.create_job("t").only([A]).save().id
    gone = queue.create_job("t").only([A]).save().id
    assert lost is not None and bare is not None and gone is not None
    r.zrem(queue.keys.places("t", B), f"{len(str(lost)):02d}|{lost}")
    r.hdel(queue.keys.job(bare), "only")
    r.zadd(queue.keys.places("t", "gpu-9"), {"01|9": 0, "junk": 1})
    report = doctor.check(queue)
    kinds = [(f.kind, f.job_id) for f in report.findings]
    assert ("lost-pinned-job", lost) in kinds and ("unpinned-job", bare) in kinds
    assert [k for k, _ in kinds].count("stale-pinned-job") == 3  # bare's, 9, junk
    doctor.repair(queue, report.findings)
    assert doctor.check(queue).findings == []
    assert _places(r, queue, B) == [lost] and queue.get_job(bare).state == "inactive"
    assert r.exists(queue.keys.places("t", "gpu-9")) == 0
    assert _claim(queue, B)[0] == lost


def test_an_idle_worker_wakes_for_a_job_pinned_to_it(redis_url: str, prefix: str) -> None:
    """Its idle slot waits on its own wake list too: the job starts well within the longest
    idle wait (IDLE_WAIT), which is how long a slot that missed it would take. (The type has
    pinned jobs before the slots start, so that they wait on their own lists from the first.
    The first pinned job of a type wakes the idle slots through the type's list, and a slot
    between a claim and its wait at that moment may miss it, for IDLE_WAIT at most.)"""
    ran: list[str] = []
    with Queue(redis_url, prefix, worker_id=A) as gpu, Queue(redis_url, prefix) as other:
        other.create_job("t").only([B]).save()  # no such worker runs: it waits
        other.process("t", 1, lambda job: ran.append("other"))
        gpu.process("t", 1, lambda job: ran.append(A))
        other.create_job("t").save()  # both idle after this one
        assert wait_for(lambda: len(ran) == 1)
        assert wait_for(lambda: gpu.counts("t")["complete"] == 1)
        job = other.create_job("t").only([A]).save()
        assert wait_for(lambda: ran[1:] == [A], timeout=defaults.IDLE_WAIT * 0.6)
        assert wait_for(lambda: other.get_job(job.id).state == "complete")  # type: ignore[arg-type]


def test_re_pinning_a_running_job_stops_it_in_its_worker_and_its_new_worker_runs_it(
    redis_url: str, prefix: str
) -> None:
    """``set_only`` on a job running on A, to B: A's handler is told through its control
    channel (its lease, a minute, is far from running out), and B runs the job."""
    ran: list[str] = []
    stopped = threading.Event()

    def on_a(job: Job) -> str:
        ran.append(A)
        assert wait_for(lambda: job.stopping, 10)
        stopped.set()
        return "a"

    with (
        Queue(redis_url, prefix, worker_id=A, lease_ms=60_000) as gpu,
        Queue(redis_url, prefix) as client,
    ):
        gpu.process("t", 1, on_a)
        job = client.create_job("t").only([A]).save()
        jid = job.id
        assert jid is not None
        assert wait_for(lambda: ran == [A])
        moved = job.set_only([B])
        assert moved is job and job.state == "pinned" and job.only() == [B]
        assert wait_for(stopped.is_set, 10)
        with Queue(redis_url, prefix, worker_id=B) as cpu:
            cpu.process("t", 1, lambda job: ran.append(B) or "b")
            done = wait_for(lambda: (j := client.get_job(jid)).state == "complete" and j, 10)
        assert ran == [A, B] and done.result == "b" and done.worker_id == B
        assert done.attempts_made == 1  # the stopped attempt is not counted
        assert doctor.check(client).findings == []
