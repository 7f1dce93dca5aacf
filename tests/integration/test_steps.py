"""Steps remembered across attempts (issue 55, third step; kue_core/features/steps.py): a step
runs once and its JSON result is recorded with the job; later attempts (a retry, after a
signal) get the record and do not run it again; the record is fenced by the attempt's token
and sealed on an encrypted queue; steps, streamed output and signals are in the timeline."""

from __future__ import annotations

import asyncio
import base64
import threading
from collections import Counter
from typing import Any

import pytest
import redis

from kue_core import InvalidJob, Job, Queue, Stopped, WaitForSignal, current_job, sealing
from kue_core.store import calls

from ..conftest import wait_for

K1 = "k1:" + base64.b64encode(bytes(range(32))).decode()


def test_a_retry_does_not_run_the_recorded_steps_again(redis_url: str, prefix: str) -> None:
    ran: Counter[str] = Counter()

    def charge(amount: int) -> dict[str, Any]:
        ran["charge"] += 1
        return {"charge": f"ch_{amount}", "amount": (amount, "eur")}

    def handler(job: Job) -> Any:
        receipt = job.step("charge", charge, 40)
        mail = job.step("mail", lambda: ran.update(["mail"]) or "sent")
        ran["ship"] += 1
        if ran["ship"] == 1:
            raise RuntimeError("the carrier is down")
        return {"receipt": receipt, "mail": mail}

    with Queue(redis_url, prefix=prefix) as q:
        job = q.create_job("order", {}).attempts(3).save()
        q.process("order", 1, handler)
        wait_for(lambda: q.get_job(job.id).state == "complete")  # type: ignore[arg-type]
        assert ran == {"charge": 1, "mail": 1, "ship": 2}
        done = q.get_job(job.id)  # type: ignore[arg-type]
        # The first run returned what the replay did: the value read back from its JSON.
        assert done.result == {
            "receipt": {"charge": "ch_40", "amount": [40, "eur"]},
            "mail": "sent",
        }
        assert done.to_dict()["steps"] == {
            "charge": {"charge": "ch_40", "amount": [40, "eur"]},
            "mail": "sent",
        }
        stepped = [(e.get("step"), e.get("attempt")) for e in q.history(job.id) if "step" in e]  # type: ignore[arg-type]
        assert stepped == [("charge", 1), ("mail", 1)]


def test_async_steps_and_a_step_before_a_signal(redis_url: str, prefix: str) -> None:
    ran: Counter[str] = Counter()

    async def reserve(n: int) -> int:
        ran["reserve"] += 1
        return n * 2

    async def handler(job: Job) -> Any:
        seats = await job.astep("reserve", reserve, 3)
        job.stream(f"reserved {seats}")
        if "approval" not in job.signals:
            raise WaitForSignal("approval")
        return {"seats": seats, "by": job.signals["approval"]}

    with Queue(redis_url, prefix=prefix) as q:
        job = q.create_job("book", {}).save()
        q.process("book", 1, handler)
        wait_for(lambda: q.get_job(job.id).state == "suspended")  # type: ignore[arg-type]
        assert q.signal(job.id, "approval", "ann") == "resumed"  # type: ignore[arg-type]
        wait_for(lambda: q.get_job(job.id).state == "complete")  # type: ignore[arg-type]
        assert q.get_job(job.id).result == {"seats": 6, "by": "ann"}  # type: ignore[arg-type]
        assert ran == {"reserve": 1}
        # The timeline: the step, the stream, the wait and its signal.
        marks = [
            next((k for k in ("step", "streamed", "signal") if k in e), e["state"])
            for e in q.history(job.id)  # type: ignore[arg-type]
        ]
        assert marks == [
            "inactive",
            "active",
            "step",
            "streamed",
            "signal",  # suspended, waiting for it
            "signal",  # resumed by it
            "active",
            "streamed",  # the run after the signal streams again: its parts are attempt 2
            "complete",
        ]


def test_one_step_awaited_twice_at_once_runs_once(redis_url: str, prefix: str) -> None:
    """Two ``astep`` calls of one name at once (gathered): the second waits for the first and
    returns its record, so ``fn`` runs once; a step that raises makes its concurrent twin
    raise too, and records nothing."""
    ran: Counter[str] = Counter()
    gate = asyncio.Event()

    async def reserve(n: int) -> int:
        ran["reserve"] += 1
        await gate.wait()  # the second call arrives while the first runs
        return n * 2

    async def broken() -> int:
        ran["broken"] += 1
        await asyncio.sleep(0)
        raise RuntimeError("the supplier is down")

    async def handler(job: Job) -> Any:
        first = asyncio.ensure_future(job.astep("reserve", reserve, 3))
        second = asyncio.ensure_future(job.astep("reserve", reserve, 3))
        await asyncio.sleep(0.05)
        gate.set()
        got = await asyncio.gather(first, second)
        errors = await asyncio.gather(
            job.astep("broken", broken), job.astep("broken", broken), return_exceptions=True
        )
        return {"got": got, "errors": [type(e).__name__ for e in errors]}

    with Queue(redis_url, prefix=prefix) as q:
        job = q.create_job("book", {}).save()
        q.process("book", 1, handler)
        wait_for(lambda: q.get_job(job.id).state == "complete")  # type: ignore[arg-type]
        done = q.get_job(job.id)  # type: ignore[arg-type]
        assert done.result == {"got": [6, 6], "errors": ["RuntimeError", "InvalidJob"]}
        assert ran == {"reserve": 1, "broken": 1}
        assert done.to_dict()["steps"] == {"reserve": 6}


def test_one_step_called_from_two_threads_runs_once(redis_url: str, prefix: str) -> None:
    """A def handler's threads calling one step at once: fn runs once and both get its
    record."""
    ran: Counter[str] = Counter()
    inside = threading.Event()

    def charge() -> str:
        ran["charge"] += 1
        inside.set()
        wait_for(lambda: ran["waiting"] >= 1, timeout=5)  # the other thread is at the step
        return f"ch_{ran['charge']}"

    def handler(job: Job) -> Any:
        got: list[Any] = []

        def second() -> None:
            inside.wait(5)
            ran["waiting"] += 1
            got.append(job.step("charge", charge))

        t = threading.Thread(target=second)
        t.start()
        got.append(job.step("charge", charge))
        t.join()
        return got

    with Queue(redis_url, prefix=prefix) as q:
        job = q.create_job("order", {}).save()
        q.process("order", 1, handler)
        wait_for(lambda: q.get_job(job.id).state == "complete")  # type: ignore[arg-type]
        assert q.get_job(job.id).result == ["ch_1", "ch_1"]  # type: ignore[arg-type]
        assert ran["charge"] == 1


def test_a_typed_task_records_steps_through_current_job(redis_url: str, prefix: str) -> None:
    ran: Counter[str] = Counter()
    with Queue(redis_url, prefix=prefix) as q:

        @q.task("convert", attempts=2)
        def convert(n: int) -> int:
            value = current_job().step("fetch", lambda: ran.update(["fetch"]) or n + 1)
            ran["runs"] += 1
            if ran["runs"] == 1:
                raise RuntimeError("once more")
            return value * 10

        job = convert.enqueue(4)
        q.process_tasks()
        assert convert.result(job, 20) == 50
        assert ran == {"fetch": 1, "runs": 2}


def test_a_step_record_is_fenced_and_checked(redis_url: str, prefix: str) -> None:
    with Queue(redis_url, prefix=prefix) as q:
        job = q.create_job("order", {}).save()
        with pytest.raises(InvalidJob, match="handler running it"):
            job.step("charge", lambda: 1)
        claimed = q.scripts.call(calls.claim(q.keys, "order", "kue:test:1", 10_000))
        assert claimed and claimed != "paused"
        token = claimed[1]["lease"]
        with pytest.raises(Stopped):
            q.scripts.call(calls.step(q.keys, job.id, "stale", "charge", "1", 1))  # type: ignore[arg-type]
        assert q.scripts.call(calls.step(q.keys, job.id, token, "charge", "1", 1)) is True  # type: ignore[arg-type]
        assert q.scripts.call(calls.step(q.keys, job.id, token, "charge", "2", 1)) is False  # type: ignore[arg-type]
        assert q.get_job(job.id).to_dict()["steps"] == {"charge": 1}  # type: ignore[arg-type]
    errors: list[str] = []

    def handler(j: Job) -> None:
        for name, fn in (("no space", lambda: 1), ("ok", lambda: {1, 2})):
            try:
                j.step(name, fn)
            except InvalidJob as e:
                errors.append(str(e))

    async def on_loop(j: Job) -> None:
        try:
            j.step("sync", lambda: 1)
        except InvalidJob as e:
            errors.append(str(e))

    with Queue(redis_url, prefix=prefix) as q:
        a = q.create_job("bad", {}).save()
        b = q.create_job("loop", {}).save()
        q.process("bad", 1, handler)
        q.process("loop", 1, on_loop)
        wait_for(lambda: {q.get_job(a.id).state, q.get_job(b.id).state} == {"complete"})  # type: ignore[arg-type]
    assert len(errors) == 3
    assert any("step's name" in e for e in errors)
    assert any("JSON" in e for e in errors)
    assert any("await job.astep" in e for e in errors)


def test_an_encrypted_queue_seals_step_results(redis_url: str, prefix: str, r: redis.Redis) -> None:
    with Queue(redis_url, prefix=prefix, encryption_keys=K1) as q:
        job = q.create_job("order", {}).save()
        q.process("order", 1, lambda j: j.step("card", lambda: {"last4": "4242"}))
        wait_for(lambda: q.get_job(job.id).state == "complete")  # type: ignore[arg-type]
        assert q.get_job(job.id).to_dict()["steps"] == {"card": {"last4": "4242"}}  # type: ignore[arg-type]
    stored = r.hget(f"{prefix}:job:{job.id}", "step:card")
    assert stored and sealing.key_id_of(stored) == "k1" and "4242" not in stored  # type: ignore[arg-type]


def test_an_isolated_handler_records_steps_and_streams(redis_url: str, prefix: str) -> None:
    """A handler in a child process has its attempt's token: its steps and parts are fenced
    and written as a worker's own handler's are."""
    from . import task_functions

    with Queue(redis_url, prefix=prefix) as q:
        job = q.create_job("isolated-steps", {"n": 2}).attempts(2).save()
        q.process("isolated-steps", 1, task_functions.steps_then_fail_once, isolation="process")
        assert [p.value for p in job.stream_iter(timeout=60)] == ["fetched 3", "fetched 3"]
        done = q.get_job(job.id)  # type: ignore[arg-type]
        assert done.state == "complete" and done.result == 30
        assert done.to_dict()["steps"] == {"fetch": 3}
        assert q.client.get(f"{prefix}:fetched") == "1"  # the step ran once, in the first child
