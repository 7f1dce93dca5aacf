"""A running job's stream of partial output (issue 55, first step; kue_core/features/streams.py):
a handler's ``job.stream(part)`` (both kinds of handler) appends to the job's Redis stream,
which a reader follows live and resumes after an entry id, to the job's end; a retry's parts
carry their attempt; a worker whose attempt is over cannot write to the stream (fenced); an
encrypted queue seals the parts; the stream goes with the job."""

from __future__ import annotations

import asyncio
import base64
import threading
from typing import Any

import pytest
import redis

from kue_core import InvalidJob, Job, JobNotFound, Queue, Stopped, doctor, sealing
from kue_core.aio import AsyncQueue
from kue_core.store import calls

from ..clients import Loop
from ..conftest import wait_for

K1 = "k1:" + base64.b64encode(bytes(range(32))).decode()


@pytest.mark.parametrize("kind", ["def", "async"])
def test_a_reader_follows_the_parts_as_they_come(
    kind: str, redis_url: str, prefix: str, r: redis.Redis
) -> None:
    go = threading.Event()
    with Queue(redis_url, prefix=prefix) as q:
        if kind == "def":

            def handler(job: Job) -> Any:
                job.stream("Once")
                job.stream({"token": " upon"})
                go.wait(30)  # the reader has the first two before the rest is written
                job.stream(" a time")
                return {"done": True}

        else:

            async def handler(job: Job) -> Any:  # type: ignore[misc]
                job.stream("Once")  # handed to the loop without waiting
                await job.astream({"token": " upon"})
                await asyncio.to_thread(go.wait, 30)
                await job.astream(" a time")
                return {"done": True}

        job = q.create_job("tell", {}).save()
        q.process("tell", 1, handler)
        seen = []
        for part in job.stream_iter(timeout=30):
            seen.append(part)
            if len(seen) == 2:
                go.set()
        assert [p.value for p in seen] == ["Once", {"token": " upon"}, " a time"]
        assert [p.attempt for p in seen] == [1, 1, 1]
        assert q.get_job(job.id).state == "complete"  # the iteration ended with the job
        # A reader resumes after the id of the last part it had.
        again = [p.value for p in q.stream_parts(job.id, after=seen[0].id)]
        assert again == [{"token": " upon"}, " a time"]
        q.remove(job.id)
        assert not r.exists(f"{prefix}:job:{job.id}:stream")  # the stream went with the job


def test_a_retrys_parts_are_told_apart(redis_url: str, prefix: str) -> None:
    with Queue(redis_url, prefix=prefix) as q:
        tries = []

        def handler(job: Job) -> Any:
            tries.append(1)
            job.stream(f"try {len(tries)}")
            if len(tries) == 1:
                raise ValueError("once more")
            return "ok"

        job = q.create_job("flaky", {}).attempts(2).save()
        q.process("flaky", 1, handler)
        parts = list(job.stream_iter(timeout=30))
        assert [(p.attempt, p.value) for p in parts] == [(1, "try 1"), (2, "try 2")]


def test_a_worker_whose_attempt_is_over_cannot_write(redis_url: str, prefix: str) -> None:
    """The stream is fenced by the attempt's token: a write under another token (a stale
    worker's, whose job was recovered and claimed again) is refused, and nothing is added."""
    with Queue(redis_url, prefix=prefix) as q:
        job = q.create_job("tell", {}).save()
        claimed = q.scripts.call(calls.claim(q.keys, "tell", "kue:test:1", 10_000))
        assert claimed and claimed != "paused"
        token = claimed[1]["lease"]
        q.scripts.call(calls.stream(q.keys, job.id, token, ['"mine"'], 100, 10_000))  # type: ignore[arg-type]
        with pytest.raises(Stopped):
            q.scripts.call(calls.stream(q.keys, job.id, "stale", ['"old"'], 100, 10_000))  # type: ignore[arg-type]
        q.scripts.call(calls.complete(q.keys, job.id, token, "{}", None))  # type: ignore[arg-type]
        with pytest.raises(Stopped):  # over: complete
            q.scripts.call(calls.stream(q.keys, job.id, token, ['"late"'], 100, 10_000))  # type: ignore[arg-type]
        assert [p.value for p in q.stream_parts(job.id)] == ["mine"]


def test_only_the_running_handler_streams_and_parts_are_bounded(
    redis_url: str, prefix: str
) -> None:
    with Queue(redis_url, prefix=prefix) as q:
        job = q.create_job("tell", {}).save()
        with pytest.raises(InvalidJob, match="handler running it"):
            job.stream("not from here")
        errors: list[BaseException] = []

        def handler(j: Job) -> None:
            try:
                j.stream("x" * 70_000)
            except InvalidJob as e:
                errors.append(e)

        q.process("tell", 1, handler)
        wait_for(lambda: q.get_job(job.id).state == "complete")  # type: ignore[arg-type]
        assert errors and "at most 65,536 bytes" in str(errors[0])
        with pytest.raises(InvalidJob, match="entry id"):
            next(q.stream_parts(job.id, after="yesterday"))


@pytest.mark.parametrize("bound", ["entries", "bytes"])
def test_a_stream_past_its_bounds_drops_its_oldest_parts(
    bound: str, redis_url: str, prefix: str, r: redis.Redis
) -> None:
    """Past the entries or bytes it may hold, the oldest parts go until it holds nine tenths
    of both; the job's ``streamed`` field counts the bytes held; the newest part stays."""
    entries, most = (20, 10**6) if bound == "entries" else (10**6, 200)
    with Queue(redis_url, prefix=prefix) as q:
        job = q.create_job("tell", {}).save()
        claimed = q.scripts.call(calls.claim(q.keys, "tell", "kue:test:1", 10_000))
        assert claimed and claimed != "paused"
        token = claimed[1]["lease"]
        written = [f'"{i:08d}"' for i in range(60)]  # 10 bytes each
        for part in written:
            q.scripts.call(calls.stream(q.keys, job.id, token, [part], entries, most))  # type: ignore[arg-type]
        held = [fields["d"] for _, fields in r.xrange(f"{prefix}:job:{job.id}:stream")]
        assert held == written[-len(held) :]  # the newest, in order
        assert 0 < len(held) <= min(entries, most // 10)
        assert int(r.hget(f"{prefix}:job:{job.id}", "streamed")) == sum(map(len, held))  # type: ignore[arg-type]
        # Trimmed to nine tenths, then filled again: never more than the bound held.
        assert len(held) > 0.9 * min(entries, most // 10) - 1


def test_an_encrypted_queue_seals_the_parts(redis_url: str, prefix: str, r: redis.Redis) -> None:
    with Queue(redis_url, prefix=prefix, encryption_keys=K1) as q:
        job = q.create_job("tell", {}).save()
        q.process("tell", 1, lambda j: j.stream({"card": "4242"}) and None)
        assert [p.value for p in job.stream_iter(timeout=30)] == [{"card": "4242"}]
    ((_, fields),) = r.xrange(f"{prefix}:job:{job.id}:stream")
    assert sealing.key_id_of(fields["d"]) == "k1" and "4242" not in fields["d"]


def test_the_asyncio_client_reads_a_stream(redis_url: str, prefix: str) -> None:
    with Queue(redis_url, prefix=prefix) as q:
        job = q.create_job("tell", {}).save()
        q.process("tell", 1, lambda j: [j.stream(w) for w in ("a", "b")] and None)

        async def read() -> list[Any]:
            async with AsyncQueue(redis_url, prefix=prefix) as aq:
                found = await aq.get_job(job.id)  # type: ignore[arg-type]
                return [p.value async for p in found.stream_iter(timeout=30)]

        loop = Loop()
        try:
            assert loop.run(read()) == ["a", "b"]
        finally:
            loop.close()


def test_the_doctor_finds_a_stream_whose_job_is_gone(
    redis_url: str, prefix: str, r: redis.Redis
) -> None:
    r.xadd(f"{prefix}:job:777:stream", {"a": "1", "d": '"left"'})  # no job 777
    with Queue(redis_url, prefix=prefix) as q:
        report = doctor.check(q)
        assert [(f.kind, f.key) for f in report.findings] == [
            ("orphan-log", f"{prefix}:job:777:stream")
        ]
        assert [o.status for o in doctor.repair(q, report.findings)] == ["repaired"]
        assert doctor.check(q).healthy and not r.exists(f"{prefix}:job:777:stream")


@pytest.mark.single_node  # counts the server's script calls
def test_parts_written_while_a_call_is_away_go_as_one(
    redis_url: str, prefix: str, r: redis.Redis
) -> None:
    """An ``async def`` handler's parts, not awaited, go in few calls (those written while
    one call is away, together once it is back), in order, all before the completion."""

    def calls_made() -> int:
        stats = r.info("commandstats")
        scripts = ("cmdstat_fcall", "cmdstat_evalsha")
        return sum(v["calls"] for k, v in stats.items() if k in scripts)

    async def handler(job: Job) -> str:
        for n in range(300):
            job.stream(n)
        return "done"

    with Queue(redis_url, prefix=prefix) as q:
        job = q.create_job("tell", {}).save()
        before = calls_made()
        q.process("tell", 1, handler)
        assert [p.value for p in job.stream_iter(timeout=30)] == list(range(300))
        assert q.get_job(job.id).state == "complete"  # type: ignore[arg-type]
        assert calls_made() - before < 60  # not one a part


def test_parts_of_a_job_removed_meanwhile_are_not_sent_again_and_again(
    redis_url: str, prefix: str
) -> None:
    """Parts waiting for a call of parts that comes back told the job is gone (removed while
    it ran) are dropped, as after the end of its attempt: one refused call (one error
    reported), not one a batch of the parts written meanwhile."""
    errors: list[Exception] = []
    with Queue(redis_url, prefix=prefix) as q, Queue(redis_url, prefix=prefix) as other:
        q.on("error", errors.append)
        q.create_job("tell", {}).save()
        done = threading.Event()

        async def handler(job: Job) -> str:
            other.remove(job.id)  # type: ignore[arg-type]  # (blocks the loop: a test's shortcut)
            for n in range(300):  # the first goes at once, the rest wait for it: 3 batches
                job.stream(n)
            done.set()
            return "done"

        q.process("tell", 1, handler)
        assert done.wait(15)
        wait_for(lambda: any(isinstance(e, JobNotFound) for e in errors))
        wait_for(lambda: q.workers() and not q.workers()[0]["jobs"])
        assert sum(isinstance(e, JobNotFound) for e in errors) == 1, errors
