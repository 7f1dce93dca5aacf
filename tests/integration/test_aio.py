"""The asyncio client's own parts: events as an async iterator, ``job.wait`` (on both
clients), many saves at once on one event loop, recovery of lost functions, the embedded
Redis, and URLs it does not serve. What it shares with ``Queue`` is checked by the contract
tests that run on both (the ``client`` fixture)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import psutil
import pytest
import redis

from kue_core import (
    ConnectionFailed,
    Event,
    InvalidJob,
    JobFailed,
    JobNotFound,
    NoRetry,
    Queue,
    WaitTimeout,
    defaults,
)
from kue_core.aio import AsyncJob, AsyncQueue
from tests.clients import run
from tests.conftest import on_cluster, own_clients

pytestmark = pytest.mark.single_node


@pytest.fixture
def url(redis_url: str) -> str:
    if on_cluster(redis_url):
        pytest.skip("single server")
    return redis_url


def test_events_are_heard_as_they_happen_filtered_by_name_and_type(
    url: str, prefix: str, sync_queue: Queue
) -> None:
    async def main() -> list[Event]:
        async with AsyncQueue(url, prefix) as queue:
            heard: list[Event] = []
            async with queue.events("complete", job_type="email") as stream:
                first = await queue.create_job("email", {"n": 1}).save()
                await queue.create_job("sms").save()
                second = await queue.create_job("email", {"n": 2}).save()
                sync_queue.process("email", lambda job: {"sent": job.data["n"]})
                sync_queue.process("sms", lambda job: None)
                async for event in stream:
                    heard.append(event)
                    if len(heard) == 2:
                        break
            assert [e.id for e in heard] == [first.id, second.id]
            return heard

    heard = run(main())
    assert [(e.name, e.args, e.type) for e in heard] == [
        ("complete", ({"sent": 1},), "email"),
        ("complete", ({"sent": 2},), "email"),
    ]


def test_a_stream_of_every_event_and_of_one_job(url: str, prefix: str) -> None:
    async def main() -> tuple[list[str], list[str]]:
        async with AsyncQueue(url, prefix) as queue:
            everything = queue.events()
            await everything.open()
            job = await queue.create_job("t").save()
            mine = queue.events(job_id=job.id)
            await mine.open()
            other = await queue.create_job("t").save()
            await other.set_priority("high")
            await job.cancel("enough")
            names = [(await everything.get(5)) for _ in range(4)]
            own = [(await mine.get(5)) for _ in range(2)]
            assert await mine.get(0.05) is None  # nothing more of this job
            await everything.aclose()
            await mine.aclose()
            return [f"{e.id}:{e.name}" for e in names if e], [e.name for e in own if e]

    names, own = run(main())
    assert names[0].endswith(":enqueue") and names[1].endswith(":enqueue")
    assert names[2:] == [f"{names[0].split(':')[0]}:cancelled", f"{names[0].split(':')[0]}:failed"]
    assert own == ["cancelled", "failed"]


def test_bad_event_filters_are_refused(url: str, prefix: str) -> None:
    async def main() -> None:
        async with AsyncQueue(url, prefix) as queue:
            with pytest.raises(InvalidJob, match="unknown event 'finished'"):
                queue.events("finished")
            with pytest.raises(InvalidJob, match="type"):
                queue.events(job_type="")
            with pytest.raises(InvalidJob):
                queue.events(job_id="x")

    run(main())


def test_wait_gives_the_result_or_the_error(client: Any, sync_queue: Queue) -> None:
    def handler(job: Any) -> Any:
        if job.data.get("fail"):
            raise NoRetry("no such address")
        return {"echo": job.data["v"]}

    ok = client.create_job("w", {"v": 7}).save()
    bad = client.create_job("w", {"fail": True}).delay(300).save()  # fails during the wait
    sync_queue.process("w", 2, handler)
    assert ok.wait(10) == {"echo": 7}
    with pytest.raises(JobFailed, match="no such address") as failed:
        bad.wait(10)
    # Its error as stored (and as the failed event tells it): the message, then the traceback.
    assert failed.value.job_id == bad.id and failed.value.error == sync_queue.get_job(bad.id).error
    assert failed.value.error.startswith("NoRetry: no such address\nTraceback")
    assert str(failed.value) == f"job {bad.id} failed: NoRetry: no such address"
    # A job that ended before the wait: read, not waited for; the same error either way.
    assert ok.wait(0) == {"echo": 7}
    with pytest.raises(JobFailed) as again:
        bad.wait(0)
    assert again.value.error == failed.value.error


def test_wait_times_out_and_hears_a_removal(client: Any) -> None:
    job = client.create_job("nobody").save()
    start = time.monotonic()
    with pytest.raises(WaitTimeout, match=f"job {job.id}"):
        job.wait(0.2)
    assert time.monotonic() - start >= 0.2
    gone = client.create_job("nobody").save()
    gone.remove()
    with pytest.raises(JobNotFound):
        gone.wait(5)
    for bad in (-1, float("nan"), "1", True):
        with pytest.raises(InvalidJob, match="timeout"):
            job.wait(bad)
    with pytest.raises(InvalidJob, match="not saved"):
        client.create_job("t").wait(1)


def test_a_removal_during_the_wait_ends_it(url: str, prefix: str) -> None:
    async def main() -> None:
        async with AsyncQueue(url, prefix) as queue:
            job = await queue.create_job("t").save()
            waiting = asyncio.ensure_future(job.wait(10))
            deadline = time.monotonic() + 5
            while await queue.client.pubsub_numsub(queue.keys.events) == [(queue.keys.events, 0)]:
                assert time.monotonic() < deadline and not waiting.done()
                await asyncio.sleep(0.005)  # until the wait has subscribed
            await queue.remove(job.id)
            with pytest.raises(JobNotFound):
                await asyncio.wait_for(waiting, 5)

    run(main())


def _open_to(r: redis.Redis) -> set[int]:
    """The local ports of this process's connections to ``r``'s server: counted here, not by
    the server's client count, which clients of earlier tests leaving would change too."""
    port = int(r.client_info()["laddr"].rsplit(":", 1)[1])
    me = psutil.Process()
    sockets = me.net_connections("tcp") if hasattr(me, "net_connections") else me.connections()
    return {c.laddr[1] for c in sockets if c.raddr and c.raddr[1] == port}


def test_a_thousand_saves_at_once_on_one_loop(url: str, prefix: str, r: redis.Redis) -> None:
    async def main() -> list[int]:
        async with AsyncQueue(url, prefix) as queue:
            before = _open_to(r)
            jobs = [queue.create_job("bulk", {"i": i}) for i in range(1000)]
            saved = await asyncio.gather(*(job.save() for job in jobs))
            # They shared at most AIO_CONNECTIONS connections, which the pool keeps open.
            opened = len(_open_to(r) - before)
            assert 1 <= opened <= defaults.AIO_CONNECTIONS, opened
            assert (await queue.counts("bulk"))["inactive"] == 1000
            return [job.id for job in saved]

    ids = run(main())
    assert sorted(ids) == list(range(1, 1001))
    assert r.llen(f"{prefix}:bulk:jobs") == 1000  # one wake-up token each, as Kue


def test_functions_lost_by_the_server_are_loaded_again(
    url: str, prefix: str, r: redis.Redis
) -> None:
    async def main() -> None:
        async with AsyncQueue(url, prefix) as queue:
            await queue.create_job("t").save()
            r.execute_command("FUNCTION", "FLUSH")
            r.script_flush()
            job = await queue.create_job("t").save()
            assert job.id == 2
            assert len(await queue.save_many([queue.create_job("t") for _ in range(3)])) == 3

    if int(r.info("server")["redis_version"].split(".")[0]) < 7:
        pytest.skip("Redis functions are Redis 7's")
    run(main())


def test_the_embedded_redis_is_shared_with_the_blocking_client(tmp_path: Path) -> None:
    async def main() -> int:
        async with AsyncQueue(data_dir=tmp_path, prefix="emb") as queue:
            job = await queue.create_job("t", {"k": "v"}).save()
            return job.id  # type: ignore[return-value]

    job_id = run(main())
    with Queue(data_dir=tmp_path, prefix="emb") as queue:
        assert queue.get_job(job_id).data == {"k": "v"}


@pytest.mark.parametrize(
    ("bad", "why"),
    [
        ("http://x", "invalid Redis URL"),
        ("redis+cluster://127.0.0.1:7000", "must carry a hash tag"),
        ("redis+cluster://127.0.0.1:7000/1", "only database 0"),
        ("redis+sentinel://u:pw-1@127.0.0.1:26379", "name the Sentinel service"),
        ("redis+sentinel://127.0.0.1:26379/main?nope=1", "unknown option 'nope'"),
    ],
)
def test_urls_it_cannot_serve_are_refused_as_queue_refuses_them(bad: str, why: str) -> None:
    for make in (AsyncQueue, Queue):
        with pytest.raises(ConnectionFailed, match=why) as info:
            make(bad, prefix="q")
        assert "pw-1" not in str(info.value)
    with pytest.raises(InvalidJob, match="prefix"):
        AsyncQueue("redis://localhost", prefix="a b")


def test_first_calls_at_once_from_threads_find_their_way(
    url: str, prefix: str, r: redis.Redis
) -> None:
    # Sixteen threads' first saves on a new client, at once, after the server lost its
    # functions (Redis 7: each may load the library; all but one find it loaded) or on a
    # server without functions (Redis 6.2: each FCALL fails, whichever thread learnt it first).
    import threading

    if int(r.info("server")["redis_version"].split(".")[0]) >= 7:
        r.execute_command("FUNCTION", "FLUSH")
    queue = Queue(url, prefix=prefix)
    barrier = threading.Barrier(16)
    ids: list[int] = []
    errors: list[BaseException] = []

    def save() -> None:
        barrier.wait()
        try:
            ids.append(queue.create_job("t").save().id)  # type: ignore[arg-type]
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=save) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    queue.close()
    assert errors == [] and sorted(ids) == list(range(1, 17))


def test_callers_that_give_up_leave_the_shared_connection_in_step(
    url: str, prefix: str, r: redis.Redis
) -> None:
    # Saves cancelled while their replies are on the way: every other save still gets its
    # own reply (the job it saved), never a neighbour's.
    async def main() -> list[tuple[int, int]]:
        async with AsyncQueue(url, prefix) as queue:

            async def save(i: int) -> tuple[int, int]:
                job = await queue.create_job("t", {"i": i}).save()
                return i, job.id  # type: ignore[return-value]

            tasks = [asyncio.ensure_future(save(i)) for i in range(400)]
            await asyncio.sleep(0)  # all queued and written
            for task in tasks[::3]:
                task.cancel()
            done = await asyncio.gather(*tasks, return_exceptions=True)
            kept = [d for d in done if isinstance(d, tuple)]
            assert len(kept) >= 400 - len(tasks[::3])
            after = await queue.create_job("t", {"i": "after"}).save()
            assert (await queue.get_job(after.id)).data == {"i": "after"}  # type: ignore[arg-type]
            return kept

    for i, job_id in run(main()):
        assert r.hget(f"{prefix}:job:{job_id}", "data") == f'{{"i":{i}}}'


def test_a_killed_connection_fails_only_the_calls_it_owed(
    url: str, prefix: str, r: redis.Redis
) -> None:
    # The shared connection dies with saves under way: each either returns an id (its job is
    # in Redis), or raises a connection error; nothing hangs, and the next save works.
    async def main() -> tuple[list[int], int]:
        async with AsyncQueue(url, prefix) as queue:
            await queue.create_job("t").save()  # the pipe's connection is open
            mine = [c["id"] for c in own_clients(r) if c.get("cmd") in ("fcall", "evalsha")]
            assert mine
            saves = [asyncio.ensure_future(queue.create_job("t").save()) for _ in range(300)]
            await asyncio.sleep(0)
            for client_id in mine:
                r.client_kill_filter(_id=client_id)
            done = await asyncio.wait_for(asyncio.gather(*saves, return_exceptions=True), 30)
            errors = [d for d in done if isinstance(d, BaseException)]
            assert all(isinstance(e, (redis.ConnectionError, ConnectionError)) for e in errors)
            ids = [d.id for d in done if not isinstance(d, BaseException)]
            after = await queue.create_job("t", {"after": True}).save()
            return ids, after.id  # type: ignore[return-value]

    ids, after = run(main())
    for job_id in [*ids, after]:
        assert r.exists(f"{prefix}:job:{job_id}")


def test_closing_fails_calls_under_way_and_later_ones(url: str, prefix: str) -> None:
    async def main() -> None:
        queue = AsyncQueue(url, prefix)
        await queue.create_job("t").save()
        saves = [asyncio.ensure_future(queue.create_job("t").save()) for _ in range(50)]
        await asyncio.sleep(0)
        await queue.close()
        done = await asyncio.wait_for(asyncio.gather(*saves, return_exceptions=True), 10)
        assert all(isinstance(d, (AsyncJob, ConnectionError, redis.ConnectionError)) for d in done)
        with pytest.raises(ConnectionFailed, match="closed"):
            await queue.create_job("t").save()

    run(main())


def test_a_connection_closed_while_idle_is_replaced_not_failed_on(
    url: str, prefix: str, r: redis.Redis
) -> None:
    async def main() -> None:
        async with AsyncQueue(url, prefix) as queue:
            await queue.create_job("t").save()
            for c in own_clients(r):
                if c.get("cmd") in ("fcall", "evalsha"):
                    r.client_kill_filter(_id=c["id"])  # as a restart or a timeout would
            again = await queue.create_job("t").save()  # no error: a new connection
            assert again.id == 2

    run(main())


def test_a_new_async_job_takes_tags_and_tracking(client: Any) -> None:
    job = client.create_job("t", {"title": "hello"}).tag("vip").track().save()
    got = client.get_job(job.id)
    assert got.tags() == ["vip"] and got.tracked
    if not isinstance(client, Queue):  # a saved AsyncJob's tags change through its queue
        with pytest.raises(InvalidJob, match=r"await queue\.tag\(job\.id"):
            got.tag("more")
        with pytest.raises(InvalidJob, match=r"await queue\.track\(job\.id, on=False\)"):
            got.untrack()
        # Progress and log lines are a worker's to write, on its own Job: refused, not a
        # coroutine left unawaited.
        with pytest.raises(InvalidJob, match="a worker's to report"):
            got.progress(1, 2)
        with pytest.raises(InvalidJob, match="a worker's to write"):
            got.log("a line")
        assert got.progress() == 0  # reading it is anyone's


def test_a_call_redis_does_not_answer_in_time_fails_and_the_next_goes_through(
    url: str, prefix: str, r: redis.Redis
) -> None:
    """The pipelined connection reads its replies with no timer per reply, but a call that
    gets no byte back for the client's socket timeout still fails (within two timeouts),
    rather than waiting as long as Redis is silent; once Redis answers, calls go through on
    a new connection."""

    async def main() -> float:
        client = redis.asyncio.Redis.from_url(url, socket_timeout=0.3)
        async with AsyncQueue(prefix=prefix, client=client) as queue:
            await queue.create_job("t").save()  # the pipe's connection is open
            r.execute_command("CLIENT", "PAUSE", 3000, "ALL")  # Redis answers no one for 3 s
            began = time.monotonic()
            with pytest.raises((ConnectionFailed, redis.ConnectionError)):
                await queue.create_job("t").save()
            failed_after = time.monotonic() - began
            deadline = time.monotonic() + 10
            while True:  # the pause ends: a save goes through
                try:
                    await queue.create_job("t").save()
                    break
                except (ConnectionFailed, redis.ConnectionError):
                    assert time.monotonic() < deadline
            await client.aclose()
            return failed_after

    failed_after = run(main())
    assert 0.25 <= failed_after < 2.0  # one to two socket timeouts, not the pause's 3 s


def test_replies_larger_than_one_read_arrive_whole(url: str, prefix: str) -> None:
    """A reply the socket delivers in several reads (a job of 1 MB of data), and many
    replies in one read (calls made at once), are each read whole and in order."""

    async def main() -> None:
        async with AsyncQueue(url, prefix) as queue:
            big = "x" * (1 << 20)
            saved = await asyncio.gather(
                *(
                    queue.create_job("t", {"i": i, "big": big if i % 7 == 0 else ""}).save()
                    for i in range(50)
                )
            )
            got = await asyncio.gather(*(queue.get_job(job.id) for job in saved))
            assert [job.data["i"] for job in got] == list(range(50))
            assert all(
                len(job.data["big"]) == (1 << 20 if i % 7 == 0 else 0) for i, job in enumerate(got)
            )

    run(main())
