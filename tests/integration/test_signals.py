"""Waiting for a signal without holding a slot (issue 55, second step;
kue_core/features/signals.py): a handler raising ``WaitForSignal`` suspends its job (no slot,
no lease, indexed as a state of its own); ``queue.signal`` resumes it, or keeps a signal sent
before the wait; the next attempt reads ``job.signals``; a wait's timeout resumes the job or
fails it; one signal of a name counts, whatever is sent at once."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
import redis

from kue_core import (
    InvalidJob,
    InvalidTransition,
    Job,
    JobNotFound,
    Queue,
    WaitForSignal,
    current_job,
    doctor,
)
from kue_core.aio import AsyncQueue

from ..clients import Loop
from ..conftest import wait_for

#: What doctor.repair() answers for one finding it fixed.
FIXED = ["repaired"]


def approving(runs: list[dict[str, Any]], **wait: Any) -> Any:
    """A handler that waits for signal ``approval`` and completes with its payload."""

    def handler(job: Job) -> Any:
        runs.append({"signals": job.signals, "resumed": job.resumed})
        if "approval" in job.signals:
            return {"approved": job.signals["approval"]}
        if job.resumed is not None and job.resumed.by == "timeout":
            return "expired"
        raise WaitForSignal("approval", **wait)

    return handler


def state(q: Queue, job_id: int) -> str | None:
    return q.get_job(job_id).state


@pytest.mark.parametrize("kind", ["def", "async"])
def test_a_job_waits_suspended_until_its_signal_resumes_it(
    kind: str, redis_url: str, prefix: str, r: redis.Redis
) -> None:
    runs: list[dict[str, Any]] = []
    sync = approving(runs, timeout=60_000)

    async def handler_async(job: Job) -> Any:
        return sync(job)

    with Queue(redis_url, prefix=prefix) as q:
        job = q.create_job("approve", {"doc": 7}).save()
        other = q.create_job("approve", {"doc": 8}).save()
        q.process("approve", 1, sync if kind == "def" else handler_async)  # one slot
        wait_for(lambda: state(q, job.id) == "suspended" and state(q, other.id) == "suspended")
        # Both wait and the one slot is free: neither holds it.
        assert q.counts("approve")["suspended"] == 2 and q.counts("approve")["active"] == 0
        assert q.ids("suspended", "approve") == [job.id, other.id]
        waiting = q.get_job(job.id)
        assert waiting.waiting_for is not None and waiting.waiting_for.name == "approval"
        assert waiting.attempts_made == 0  # no attempt counted
        assert all(not w.get("jobs") for w in q.workers())  # nor does its worker hold it
        assert q.signal(job.id, "approval", {"by": "ann"}) == "resumed"
        wait_for(lambda: state(q, job.id) == "complete")
        done = q.get_job(job.id)
        assert done.result == {"approved": {"by": "ann"}}
        assert done.resumed is not None and (done.resumed.name, done.resumed.by) == (
            "approval",
            "signal",
        )
        assert [e["state"] for e in q.history(job.id)] == [
            "inactive",
            "active",
            "suspended",
            "inactive",
            "active",
            "complete",
        ]
        assert state(q, other.id) == "suspended"  # still waiting for its own
        assert doctor.check(q).healthy


def test_a_signal_sent_before_the_wait_is_kept_for_it(redis_url: str, prefix: str) -> None:
    runs: list[dict[str, Any]] = []
    with Queue(redis_url, prefix=prefix) as q:
        job = q.create_job("approve", {}).save()
        assert q.signal(job.id, "approval", "yes") == "kept"  # it has not run yet
        assert q.signal(job.id, "approval", "no") == "already"  # the first one counts
        q.process("approve", 1, approving(runs))
        wait_for(lambda: state(q, job.id) == "complete")
        assert q.get_job(job.id).result == {"approved": "yes"}
        assert len(runs) == 1  # it did not wait at all


def test_a_signal_kept_while_the_job_runs_resumes_it_as_it_waits(
    redis_url: str, prefix: str
) -> None:
    running, go = threading.Event(), threading.Event()
    runs: list[dict[str, Any]] = []
    inner = approving(runs)

    def handler(job: Job) -> Any:
        if not runs:
            running.set()
            go.wait(30)
        return inner(job)

    with Queue(redis_url, prefix=prefix) as q:
        job = q.create_job("approve", {}).save()
        q.process("approve", 1, handler)
        assert running.wait(30)
        assert q.signal(job.id, "approval", 1) == "kept"
        go.set()
        wait_for(lambda: state(q, job.id) == "complete")
        assert q.get_job(job.id).result == {"approved": 1}
        assert [e["state"] for e in q.history(job.id)][-4:] == [
            "suspended",
            "inactive",
            "active",
            "complete",
        ]


@pytest.mark.parametrize("on_timeout", ["resume", "fail"])
def test_a_wait_past_its_timeout_resumes_or_fails_as_asked(
    on_timeout: str, redis_url: str, prefix: str
) -> None:
    runs: list[dict[str, Any]] = []
    with Queue(redis_url, prefix=prefix) as q:
        job = q.create_job("approve", {}).save()
        q.process("approve", 1, approving(runs, timeout=300, on_timeout=on_timeout))
        if on_timeout == "resume":
            wait_for(lambda: state(q, job.id) == "complete", timeout=15)
            done = q.get_job(job.id)
            assert done.result == "expired"
            assert done.resumed is not None and done.resumed.by == "timeout"
        else:
            wait_for(lambda: state(q, job.id) == "failed", timeout=15)
            assert "timed out waiting for signal approval" in (q.get_job(job.id).error or "")
            with pytest.raises(InvalidTransition, match="failed"):
                q.signal(job.id, "approval", "too late")
        assert q.counts("approve")["suspended"] == 0
        assert doctor.check(q).healthy


def test_one_of_many_signals_sent_at_once_resumes_the_job(redis_url: str, prefix: str) -> None:
    runs: list[dict[str, Any]] = []
    with Queue(redis_url, prefix=prefix) as q:
        job = q.create_job("approve", {}).save()
        q.process("approve", 1, approving(runs))
        wait_for(lambda: state(q, job.id) == "suspended")
        with ThreadPoolExecutor(8) as pool:
            told = list(pool.map(lambda n: q.signal(job.id, "approval", n), range(16)))
        assert sorted(told) == ["already"] * 15 + ["resumed"]
        wait_for(lambda: state(q, job.id) == "complete")
        assert len(runs) == 2  # the wait, then one resumption
        assert q.get_job(job.id).result == {"approved": told.index("resumed")}


def test_bad_signals_are_refused_and_change_nothing(redis_url: str, prefix: str) -> None:
    with Queue(redis_url, prefix=prefix) as q:
        job = q.create_job("approve", {}).save()
        with pytest.raises(JobNotFound):
            q.signal(999_999, "approval")
        with pytest.raises(InvalidJob, match="signal's name"):
            q.signal(job.id, "no spaces", 1)
        with pytest.raises(InvalidJob, match="at most"):
            q.signal(job.id, "approval", "x" * 70_000)
        with pytest.raises(InvalidJob, match="JSON"):
            q.signal(job.id, "approval", {1, 2})
        assert q.get_job(job.id).signals == {} and state(q, job.id) == "inactive"
        with pytest.raises(InvalidJob, match="signal's name"):
            WaitForSignal("")
        for timeout in (0, 10**400, float("nan"), float("inf")):
            with pytest.raises(InvalidJob, match="timeout"):
                WaitForSignal("a", timeout=timeout)
        deep: list[Any] = []
        for _ in range(100_000):
            deep = [deep]
        with pytest.raises(InvalidJob, match="nested too deeply"):
            q.signal(job.id, "approval", deep)
        with pytest.raises(InvalidJob, match="on_timeout"):
            WaitForSignal("a", on_timeout="later")


def test_a_suspended_job_can_be_cancelled_or_removed(
    redis_url: str, prefix: str, r: redis.Redis
) -> None:
    runs: list[dict[str, Any]] = []
    with Queue(redis_url, prefix=prefix) as q:
        a = q.create_job("approve", {}).save()
        b = q.create_job("approve", {}).save()
        q.process("approve", 1, approving(runs, timeout=60_000))
        wait_for(lambda: state(q, a.id) == state(q, b.id) == "suspended")
        q.cancel(a.id, "not needed")
        q.remove(b.id)
        assert q.get_job(a.id).state == "failed"
        assert not r.zcard(f"{prefix}:jobs:suspended")
        assert not r.zcard(f"{prefix}:jobs:approve:suspended")
        assert doctor.check(q).healthy


def test_the_asyncio_client_and_a_typed_task(redis_url: str, prefix: str) -> None:
    with Queue(redis_url, prefix=prefix) as q:

        @q.task("sign")
        def sign(doc: int) -> Any:
            got = current_job().signals
            if "approval" not in got:
                raise WaitForSignal("approval")
            return {"doc": doc, "by": got["approval"]}

        job = sign.enqueue(3)
        q.process_tasks()
        wait_for(lambda: state(q, job.id) == "suspended")

        async def send() -> str:
            async with AsyncQueue(redis_url, prefix=prefix) as aq:
                return await aq.signal(job.id, "approval", "ann")

        assert Loop().run(send()) == "resumed"
        assert sign.result(job, 20) == {"doc": 3, "by": "ann"}


@pytest.mark.parametrize("broken", ["wait gone", "wait unnamed", "signal unheard"])
def test_the_doctor_resumes_a_wait_that_cannot_end(
    broken: str, redis_url: str, prefix: str, r: redis.Redis
) -> None:
    runs: list[dict[str, Any]] = []
    with Queue(redis_url, prefix=prefix) as q:
        job = q.create_job("approve", {}).save()
        q.process("approve", 1, approving(runs))
        wait_for(lambda: state(q, job.id) == "suspended")
        key = f"{prefix}:job:{job.id}"
        if broken == "wait gone":  # a hand edit, a partial restore
            r.hdel(key, "suspended")
        elif broken == "wait unnamed":
            r.hset(key, "suspended", '{"name": "", "until": null, "on_timeout": "resume"}')
        else:  # the signal is there, but nothing resumed the job
            r.hset(key, mapping={"signal:approval": '"late"', "signals": 1})
        report = doctor.check(q)
        assert [f.kind for f in report.findings] == ["lost-wait"]
        assert [o.status for o in doctor.repair(q, report.findings)] == FIXED
        if broken != "signal unheard":  # its handler runs again, and waits again, whole
            wait_for(lambda: len(runs) == 2 and state(q, job.id) == "suspended")
            assert q.get_job(job.id).waiting_for is not None
        else:
            wait_for(lambda: state(q, job.id) == "complete")
            assert q.get_job(job.id).result == {"approved": "late"}
        assert any(e.get("by") == "doctor" for e in q.history(job.id))
        assert doctor.check(q).healthy


def test_only_a_handler_suspends_a_job_and_a_fan_out_job_cannot(
    redis_url: str, prefix: str
) -> None:
    with Queue(redis_url, prefix=prefix) as q:
        job = q.create_job("approve", {}).save()
        with pytest.raises(InvalidTransition, match="WaitForSignal"):
            job.set_state("suspended")
        with pytest.raises(InvalidJob, match="suspended"):
            q.bulk("suspended", {"state": "inactive"})
        assert state(q, job.id) == "inactive"  # type: ignore[arg-type]
        fan = q.create_job("fan", {}).fan_out(1).save()
        q.process("fan", 1, lambda j: (_ for _ in ()).throw(WaitForSignal("approval")))
        wait_for(lambda: state(q, fan.id) == "failed")  # type: ignore[arg-type]
        assert "a fan-out job cannot wait for a signal" in (q.get_job(fan.id).error or "")  # type: ignore[arg-type]


def test_a_wait_ends_with_a_hand_move_and_an_update_keeps_it(
    redis_url: str, prefix: str, r: redis.Redis
) -> None:
    runs: list[dict[str, Any]] = []
    with Queue(redis_url, prefix=prefix) as q:
        a = q.create_job("approve", {}).delay(1).save()
        b = q.create_job("approve", {}).save()
        c = q.create_job("approve", {}).save()
        q.process("approve", 1, approving(runs, timeout=3_600_000))
        wait_for(lambda: all(state(q, j.id) == "suspended" for j in (a, b, c)))  # type: ignore[arg-type]
        deadline = q.get_job(a.id).waiting_for.until  # type: ignore[arg-type, union-attr]
        # An update (Kue's Job#update) keeps the wait's deadline, delay or not.
        q.get_job(a.id).priority("high").save()  # type: ignore[arg-type]
        assert r.zscore(f"{prefix}:jobs:suspended", f"0{len(str(a.id))}|{a.id}") == deadline
        assert q.get_job(a.id).waiting_for.until == deadline  # type: ignore[arg-type, union-attr]
        # Moved by hand to delayed: the wait ends, due now (not at the wait's deadline).
        q.get_job(b.id).set_state("delayed")  # type: ignore[arg-type]
        wait_for(lambda: len([s for s in runs if s["resumed"] is None]) >= 4)
        # Cancelled: its wait ends with it.
        q.cancel(c.id)  # type: ignore[arg-type]
        cancelled = q.get_job(c.id)  # type: ignore[arg-type]
        assert cancelled.waiting_for is None and cancelled.promote_at < deadline  # type: ignore[operator]
        assert doctor.check(q).healthy


def test_a_move_to_another_type_a_due_time_and_a_reused_key(
    redis_url: str, prefix: str, r: redis.Redis
) -> None:
    """Moved to another type, a suspended job waits for a worker there (not left suspended
    with its wait gone); an update giving a due time keeps the wait's deadline; a duplicate
    of its ``reuse`` key gives it the new data and it keeps waiting."""
    runs: list[dict[str, Any]] = []
    with Queue(redis_url, prefix=prefix) as q:
        a = q.create_job("approve", {}).save()
        b = q.create_job("approve", {}).attempts(2).save()
        c = q.create_job("approve", {"v": 1}).unique("doc:7", "reuse").save()
        q.process("approve", 1, approving(runs, timeout=3_600_000, on_timeout="fail"))
        ids = (a.id, b.id, c.id)
        wait_for(lambda: all(state(q, j) == "suspended" for j in ids))  # type: ignore[arg-type]
        deadline = q.get_job(b.id).waiting_for.until  # type: ignore[arg-type, union-attr]
        q.move(a.id, "other")  # type: ignore[arg-type]
        moved = q.get_job(a.id)  # type: ignore[arg-type]
        assert (moved.type, moved.state, moved.waiting_for) == ("other", "inactive", None)
        assert q.ids("inactive", "other") == [a.id] and q.ids("suspended") == [b.id, c.id]
        q.get_job(b.id).delay(1000).save()  # type: ignore[arg-type]
        zid = f"0{len(str(b.id))}|{b.id}"
        assert r.zscore(f"{prefix}:jobs:suspended", zid) == deadline
        assert q.get_job(b.id).promote_at == deadline  # type: ignore[arg-type]
        dup = q.create_job("approve", {"v": 2}).unique("doc:7", "reuse").save()
        assert dup.id == c.id
        held = q.get_job(c.id)  # type: ignore[arg-type]
        assert (held.state, held.data, held.waiting_for.name) == ("suspended", {"v": 2}, "approval")  # type: ignore[union-attr]
        assert doctor.check(q).healthy


def test_waiting_again_for_a_signal_it_has_fails_the_job(redis_url: str, prefix: str) -> None:
    with Queue(redis_url, prefix=prefix) as q:
        job = q.create_job("approve", {}).attempts(3).save()
        q.signal(job.id, "approval", None)  # type: ignore[arg-type]
        # A handler that tests the payload rather than the name: it would wait again and again.
        q.process("approve", 1, lambda j: (_ for _ in ()).throw(WaitForSignal("approval")))
        wait_for(lambda: state(q, job.id) == "failed")  # type: ignore[arg-type]
        assert "which it has" in (q.get_job(job.id).error or "")  # type: ignore[arg-type]
