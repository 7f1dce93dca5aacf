"""Wait and run statistics per type and UTC day, recorded by the claim and the attempt's end."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta

import pytest
import redis

from kue_core import InvalidJob, Job, Queue, defaults
from kue_core.features.timings import Recorder, day_of
from tests.conftest import wait_for


@pytest.fixture
def wq(redis_url: str, prefix: str) -> Iterator[Queue]:
    # A lease no load outlasts: the waits are counted exactly, and a process held up past a
    # short lease (two cores, under coverage) rightly has its jobs claimed, and waited, again.
    q = Queue(redis_url, prefix=prefix, lease_ms=30_000)
    yield q
    q.close()


def _today(r: redis.Redis) -> str:
    seconds, _ = r.time()
    return datetime.fromtimestamp(seconds, UTC).date().isoformat()


def test_waits_and_runs_are_counted_per_type(wq: Queue, r: redis.Redis) -> None:
    queue = wq
    go = threading.Event()

    def handler(job: Job) -> None:
        go.wait(5)
        time.sleep(0.03)  # the run being measured, not a synchronisation
        if job.data.get("fail"):
            raise ValueError("no")

    for i in range(4):
        queue.create_job("a", {"fail": i == 3}).save()
    queue.create_job("b").save()
    time.sleep(0.05)  # the jobs wait at least this long: the wait being measured
    queue.process("a", 2, handler)
    go.set()
    wait_for(lambda: queue.count("complete", "a") == 3 and queue.count("failed", "a") == 1)
    # Added to Redis by the worker's next flush (every defaults.TALLY_FLUSH).
    wait_for(lambda: queue.timings("a")["run"]["count"] == 4)
    a = queue.timings("a")
    assert a["type"] == "a" and a["day"] == _today(r)
    assert a["wait"]["count"] == 4 and a["run"]["count"] == 4  # the failed attempt ran too
    assert a["wait"]["mean_ms"] >= 50 and a["run"]["mean_ms"] >= 30
    assert a["run"]["stddev_ms"] >= 0
    for kind in ("wait", "run"):
        buckets = a[kind]["buckets"]
        assert [b for b, _ in buckets] == [*defaults.DURATION_BUCKETS_MS, None]
        assert sum(n for _, n in buckets) == 4
    assert a["run"]["buckets"][0][1] == 0  # nothing ran under 5 ms
    every = queue.timings()
    assert every["day"] == a["day"] and set(every["types"]) == {"a", "b"}
    assert every["types"]["a"]["run"] == a["run"]
    assert every["types"]["b"]["wait"] == {
        "count": 0,
        "mean_ms": None,
        "stddev_ms": None,
        "buckets": [[b, 0] for b in [*defaults.DURATION_BUCKETS_MS, None]],
    }
    key = queue.keys.timings("a", a["day"], "run")
    assert 0 < r.ttl(key) <= defaults.TIMINGS_TTL


def test_they_reach_redis_within_a_second_whatever_the_lease(redis_url: str, prefix: str) -> None:
    """As the completion counters do: not with the heartbeat, which a long lease spaces out
    (every 20 s here)."""
    queue = Queue(redis_url, prefix=prefix, lease_ms=60_000)
    try:
        queue.process("a", lambda job: None)
        for n in (1, 2):
            job = queue.create_job("a").save()
            wait_for(lambda: queue.get_job(job.id).state == "complete")  # type: ignore[arg-type]  # noqa: B023
            # The first may come with the heartbeats of the worker's start; the second comes
            # long before the next heartbeat could bring it.
            wait_for(lambda: queue.timings("a")["run"]["count"] == n, timeout=10)  # noqa: B023
        assert queue.timings("a")["wait"]["count"] == 2
    finally:
        queue.close()


def test_a_past_day_and_bad_input(queue: Queue) -> None:
    queue.create_job("a").save()
    old = queue.timings("a", date(2020, 1, 1))
    assert old["day"] == "2020-01-01" and old["wait"]["count"] == 0
    assert queue.timings("a", "2020-01-01") == old
    for bad in ("2020-13-01", "yesterday", "2020-1-1", 20200101, datetime(2020, 1, 1)):
        with pytest.raises(InvalidJob):
            queue.timings("a", bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidJob):
        queue.timings("")


@pytest.mark.parametrize(
    "day", ["1970-01-01", "2000-02-29", "2000-03-01", "2024-02-29", "2024-12-31", "2100-03-01"]
)
def test_a_time_is_counted_on_its_utc_day(day: str) -> None:
    start = datetime.fromisoformat(day).replace(tzinfo=UTC)
    first = int(start.timestamp() * 1000)
    last = int((start + timedelta(days=1)).timestamp() * 1000) - 1
    assert day_of(first) == day_of(last) == day
    recorder = Recorder()
    recorder.add("t", "run", 7, first)
    recorder.add("t", "run", 9, last)
    recorder.add("t", "run", 11, last + 1)
    assert sorted(key[1] for key in recorder._pending) == sorted({day, day_of(last + 1)})
