"""An ``async def`` handler's progress reports and log lines on the loop runtime
(``runtime="loop"``, see kue_core.jobs.notes): ``job.progress()`` and ``job.log()`` hand their
write to the loop's connection and return, so the other slots, the heartbeats and the claims
go on meanwhile; ``await job.aprogress()``/``await job.alog()`` wait for Redis; and what a
handler wrote before it returned is in Redis before its job's outcome."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from kue_core import Job, Queue, Stopped, current_job
from kue_core.store.aio_transport import AsyncTransport
from kue_core.store.transport import Transport
from kue_core.worker import tasks
from tests.conftest import wait_for

#: How long a progress or log write takes below: a Redis far away, or a busy one.
SLOW_S = 0.4


@pytest.fixture
def lq(redis_url: str, prefix: str) -> Iterator[Queue]:
    # A lease no load outlasts: the tests read each job's log lines and events exactly, and a
    # process held up past a short lease (two cores, under coverage) rightly has its jobs run
    # again ("lease lost" below is a job moved away, not a lease left to expire).
    q = Queue(redis_url, prefix=prefix, lease_ms=30_000, runtime="loop")
    yield q
    q.close()


def _slow_notes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every progress and log write takes ``SLOW_S`` more: awaited on the asyncio transport
    (the loop serves others meanwhile), slept on the blocking one (its thread waits, as on a
    slow round trip)."""
    real_async, real = AsyncTransport.call, Transport.call
    # The slow writes go on to Redis in the order they were made, as real slow round trips
    # would (timers of equal deadlines alone would not promise it).
    turns = {"made": 0, "sent": 0}

    async def async_call(self: AsyncTransport, c: Any) -> Any:
        if c.name not in ("progress", "log"):
            return await real_async(self, c)
        turn, turns["made"] = turns["made"], turns["made"] + 1
        await asyncio.sleep(SLOW_S)
        while turns["sent"] != turn:
            await asyncio.sleep(0.001)
        sending = asyncio.ensure_future(real_async(self, c))
        await asyncio.sleep(0)  # it starts (and writes) before the next turn's
        turns["sent"] += 1
        return await sending

    def call(self: Transport, c: Any) -> Any:
        if c.name in ("progress", "log"):
            time.sleep(SLOW_S)
        return real(self, c)

    monkeypatch.setattr(AsyncTransport, "call", async_call)
    monkeypatch.setattr(Transport, "call", call)


def test_progress_and_log_leave_the_loop_to_the_other_slots(
    lq: Queue, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While one handler makes 6 slow writes (each SLOW_S), another slot of the same loop
    completes jobs all along: the writes never held the loop."""
    _slow_notes(monkeypatch)
    lq.save_many([lq.create_job("quick", {"i": i}) for i in range(2000)])
    quick: list[float] = []
    spent: list[float] = []
    window: list[float] = []

    async def quick_handler(job: Job) -> None:
        quick.append(time.monotonic())
        await asyncio.sleep(0.002)

    async def reporter(job: Job) -> str:
        window.append(time.monotonic())
        for i in range(3):
            began = time.monotonic()
            job.progress(i + 1, 3, {"step": i})
            job.log("step %d", i)
            spent.append(time.monotonic() - began)
        window.append(time.monotonic())
        return "reported"

    lq.process("quick", 1, quick_handler)
    wait_for(lambda: len(quick) >= 20)  # the quick slot is under way
    job = lq.create_job("report").save()
    lq.process("report", 1, reporter)
    assert job.wait(20) == "reported"
    # The calls returned at once, and the job completed once their writes were done.
    assert max(spent) < SLOW_S / 2
    began, _ = window
    ended = lq.get_job(job.id)  # type: ignore[arg-type]
    assert ended.progress() == 100 and ended.progress_data == {"step": 2}
    assert lq.get_log(job.id) == ["step 0", "step 1", "step 2"]  # type: ignore[arg-type]
    # The quick slot went on while the writes were on their way: blocking writes would have
    # held the loop (and it) for 6 x SLOW_S, and no quick job would have started in the first.
    # (How many did is the machine's to say: 15 once, on a cluster under CI's load.)
    writing = [t for t in quick if began < t < began + SLOW_S]
    assert len(writing) >= 3, f"{len(writing)} quick jobs ran while the writes were on their way"


@pytest.mark.parametrize("middleware", ["none", "def"])
def test_what_a_handler_wrote_is_in_redis_before_its_job_completes(
    lq: Queue, monkeypatch: pytest.MonkeyPatch, middleware: str
) -> None:
    """A handler that reports and returns at once: the completion waits for the writes (slow
    here), so a reader that sees the job complete sees its progress and its log. Also when a
    ``def`` middleware wraps it (the handler still runs on the loop, the middleware in a
    thread)."""
    _slow_notes(monkeypatch)
    if middleware == "def":
        lq.use(lambda job, call_next: call_next())
    heard: list[tuple[str, int]] = []
    lq.on("job progress", lambda jid, pct, data: heard.append(("progress", jid)))
    lq.on("job complete", lambda jid, result: heard.append(("complete", jid)))

    async def handler(job: Job) -> int:
        job.progress(1, 2, "half way")
        job.log("half way")
        return 1

    jobs = [lq.create_job("t").save() for _ in range(3)]
    lq.process("t", 3, handler)
    for job in jobs:
        wait_for(lambda job=job: lq.get_job(job.id).state == "complete")  # type: ignore[misc,arg-type]
        # (A completion sets the progress to 100; the data stays the handler's.)
        assert lq.get_job(job.id).progress_data == "half way"  # type: ignore[arg-type]
        assert lq.get_log(job.id) == ["half way"]  # type: ignore[arg-type]
    wait_for(lambda: len(heard) == 6)
    for job in jobs:  # each job's progress event before its completion's
        assert heard.index(("progress", job.id)) < heard.index(("complete", job.id))  # type: ignore[arg-type]


@pytest.mark.parametrize("slow", [False, True])
@pytest.mark.parametrize("wrapped", [False, True])
def test_aprogress_and_alog_return_once_redis_has_them(
    redis_url: str, prefix: str, wrapped: bool, slow: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The awaited forms (in the slot's task, or under a plain middleware, which awaits the
    handler from a thread): they return the job, once the write is done, after the writes
    made before them, also when one of those is slow to land (``slow``: as one sent again
    after a redirect, or after its script was loaded)."""
    if slow:
        real = AsyncTransport.call

        async def call(self: AsyncTransport, c: Any) -> Any:
            if c.name == "log" and str(c.args[-1]).endswith("first"):
                await asyncio.sleep(0.2)
            return await real(self, c)

        monkeypatch.setattr(AsyncTransport, "call", call)
    q = Queue(redis_url, prefix=prefix)
    if wrapped:
        q.use(lambda job, call_next: call_next())
    seen: dict[str, Any] = {}

    async def handler(job: Job) -> None:
        job.log("first")  # not awaited: still written before the awaited ones
        assert await job.aprogress(3, 4, {"n": 3}) is job
        assert await job.alog("second %s", "line") is job
        fresh = q.get_job(job.id)  # type: ignore[arg-type]
        seen["progress"] = (fresh.progress(), fresh.progress_data, job.progress())
        seen["log"] = q.get_log(job.id)  # type: ignore[arg-type]

    try:
        job = q.create_job("t").save()
        q.process("t", handler)
        job.wait(20)
        assert seen == {"progress": (75, {"n": 3}, 75), "log": ["first", "second line"]}
    finally:
        q.close()


def test_a_typed_task_reports_through_current_job(lq: Queue) -> None:
    @lq.task("fetch")
    async def fetch(url: str) -> str:
        current_job().progress(1, 2, {"url": url})
        current_job().log("fetching %s", url)
        await current_job().alog("fetched")
        return url

    job = fetch.enqueue("https://example.com")
    lq.process_tasks()
    assert fetch.result(job, 20) == "https://example.com"
    assert lq.get_job(job.id).progress_data == {"url": "https://example.com"}  # type: ignore[arg-type]
    assert lq.get_log(job.id) == ["fetching https://example.com", "fetched"]  # type: ignore[arg-type]


@pytest.mark.parametrize("how", ["cancel", "ttl", "lease lost"])
def test_a_stopped_attempt_still_raises_stopped(lq: Queue, how: str) -> None:
    """An ``async def`` handler is cancelled when its attempt is stopped (cancelled, past its
    ttl, its lease lost: here, the job moved away with ``force``); one that goes on anyway
    gets ``Stopped`` from its progress and log calls, awaited or not, as before."""
    raised: list[str] = []
    running = threading.Event()

    async def handler(job: Job) -> None:
        running.set()
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            for write in (lambda: job.progress(1, 2), lambda: job.log("late")):
                try:
                    write()
                except Stopped:
                    raised.append("sync")
            for awaited in (job.aprogress(1, 2), job.alog("late")):
                try:
                    await awaited
                except Stopped:
                    raised.append("awaited")
            raise

    job = lq.create_job("t")
    if how == "ttl":
        job.ttl(300)
    job.save()
    lq.process("t", handler)
    assert running.wait(10)
    if how == "cancel":
        lq.cancel(job.id)  # type: ignore[arg-type]
    elif how == "lease lost":
        lq.move(job.id, "elsewhere", force=True)  # type: ignore[arg-type]
    wait_for(lambda: len(raised) == 4)
    assert raised == ["sync", "sync", "awaited", "awaited"]
    if how == "lease lost":
        assert lq.get_job(job.id).type == "elsewhere"  # type: ignore[arg-type]
    else:
        wait_for(lambda: lq.get_job(job.id).state == "failed")  # type: ignore[arg-type]
    assert lq.get_log(job.id) == []  # type: ignore[arg-type]


def test_a_write_that_fails_is_reported_or_raised(redis_url: str, prefix: str) -> None:
    """A log write that Redis refuses while the handler runs (the job's log key made a
    string by hand): the write nobody awaits is reported as the worker's errors are (the
    queue's ``error`` listeners); the awaited one raises in the handler. Neither is lost.
    (The job itself is left alone, so no heartbeat or stop message ends the attempt first.)"""
    lq = Queue(redis_url, prefix=prefix, runtime="loop")
    errors: list[Exception] = []
    lq.on("error", errors.append)
    raised: list[Exception] = []
    broken = threading.Event()
    running = threading.Event()

    async def handler(job: Job) -> None:
        running.set()
        while not broken.is_set():
            await asyncio.sleep(0.005)
        job.log("not awaited")
        try:
            await job.alog("awaited")
        except redis.ResponseError as e:
            raised.append(e)

    try:
        job = lq.create_job("t").save()
        lq.process("t", handler)
        assert running.wait(10)
        lq.client.set(lq.keys.log(job.id), "not a list")  # type: ignore[arg-type]
        broken.set()
        wait_for(lambda: raised and any("WRONGTYPE" in str(e) for e in errors))
        assert "WRONGTYPE" in str(raised[0])
        wait_for(lambda: lq.get_job(job.id).state == "complete")  # type: ignore[arg-type]
    finally:
        lq.close()


def test_a_def_handlers_writes_go_on_the_loops_connection(
    lq: Queue, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A ``def`` handler's progress and log lines on the loop runtime are written on the
    loop's connection (one way into Redis), and waited for: in Redis when they return. (Of
    two slots, served on the loop however long their handlers take: the only slot of a
    process, or one of a process whose handlers block, has a thread and a connection of its
    own, which its handler's writes go on.)"""
    monkeypatch.setattr(tasks, "THREADS_S", 0.0)
    on_loop: list[str] = []
    blocking: list[str] = []
    real_async, real = AsyncTransport.call, Transport.call

    async def async_call(self: AsyncTransport, c: Any) -> Any:
        on_loop.append(c.name)
        return await real_async(self, c)

    def call(self: Transport, c: Any) -> Any:
        blocking.append(c.name)
        return real(self, c)

    monkeypatch.setattr(AsyncTransport, "call", async_call)
    monkeypatch.setattr(Transport, "call", call)
    seen: list[Any] = []

    def handler(job: Job) -> None:
        job.progress(1, 2, {"half": True})
        job.log("halfway")
        fresh = lq.get_job(job.id)  # type: ignore[arg-type]
        seen.append((fresh.progress(), fresh.progress_data, lq.get_log(job.id)))  # type: ignore[arg-type]

    lq.process("t", 2, handler)
    job = lq.create_job("t").save()
    wait_for(lambda: lq.get_job(job.id).state == "complete")  # type: ignore[arg-type]
    assert on_loop.count("progress") == 1 and on_loop.count("log") == 1
    assert "progress" not in blocking and "log" not in blocking
    assert seen[0][:2] == (50, {"half": True}) and "halfway" in seen[0][2][0]
