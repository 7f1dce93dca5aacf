"""The admin and statistics methods on both clients (the ``client`` fixture: ``Queue``, then
``AsyncQueue``): counts per type, throughput, totals, timings, bulk actions, feeds,
retention, memory and pinned waits run the same operations and give the same answers; bad
input is refused on both and writes nothing."""

from __future__ import annotations

from typing import Any

import pytest
import redis

from kue_core import InvalidJob, Job, NoRetry, Queue, defaults
from tests.conftest import keys_under, wait_for


def _worked(sync_queue: Queue) -> tuple[Job, Job]:
    """One job of type a completed and one failed for good, by a worker of this process."""

    def handler(job: Job) -> str:
        if job.data.get("fail"):
            raise NoRetry("no")
        return "ok"

    done = sync_queue.create_job("a").save()
    failed = sync_queue.create_job("a", {"fail": True}).save()
    sync_queue.process("a", 1, handler)
    wait_for(lambda: sync_queue.count("complete") == 1 and sync_queue.count("failed") == 1)
    # The worker adds its completions to the statistics once a second (defaults.TALLY_FLUSH).
    wait_for(lambda: sync_queue.totals()["complete"] == {"a": 1})
    return done, failed


def test_statistics_are_the_same_on_both_clients(client: Any, sync_queue: Queue) -> None:
    _worked(sync_queue)
    client.create_job("b").save()
    assert client.counts_by_type() == sync_queue.counts_by_type()
    assert client.counts_by_type()["a"]["complete"] == 1
    assert client.counts_by_type()["b"]["inactive"] == 1
    minutes = client.throughput(5)
    assert len(minutes) == 5 and sum(m["complete"] for m in minutes) == 1
    assert sum(m["failed"] for m in minutes) == 1
    totals = client.totals()
    assert totals["complete"] == {"a": 1} and totals["failed"] == {"a": 1}
    assert sum(n for _, n in totals["durations"]) == 1
    wait_for(lambda: client.timings("a")["run"]["count"] == 2)  # flushed by the worker
    one = client.timings("a")
    assert one == sync_queue.timings("a") and one["type"] == "a"
    every = client.timings(day=one["day"])
    assert every["types"]["a"] == {"wait": one["wait"], "run": one["run"]}
    assert set(every["types"]) == {"a", "b"}
    for bad in (lambda: client.throughput(0), lambda: client.timings(day="yesterday")):
        with pytest.raises(InvalidJob):
            bad()


def test_bulk_actions_on_both_clients(client: Any, sync_queue: Queue) -> None:
    _, failed = _worked(sync_queue)
    sync_queue.shutdown(5)
    later = client.create_job("c").delay(60_000).save()
    assert client.retry_all() == 1 and client.get_job(failed.id).state == "inactive"
    assert client.promote_all("c") == 1 and client.get_job(later.id).state == "inactive"
    assert client.remove_all("inactive", "c") == 1
    assert client.counts_by_type()["c"]["inactive"] == 0
    with pytest.raises(InvalidJob):
        client.remove_all("nowhere")


def test_feeds_on_both_clients(client: Any, r: redis.Redis) -> None:
    assert client.feed("f", "complete") == client.keys.feed("complete", "f")
    assert client.feeds() == {"f": ["complete"]}
    client.unfeed("f", "complete")
    assert client.feeds() == {}
    before = keys_under(r, client.keys.prefix)
    with pytest.raises(InvalidJob, match="a feed carries one of complete, failed"):
        client.feed("f", "start")
    assert keys_under(r, client.keys.prefix) == before


def test_retention_and_memory_on_both_clients(client: Any, r: redis.Redis) -> None:
    count, age = defaults.RETAIN_COMPLETE
    assert client.retention()["complete"] == {"count": count, "age": age, "source": "default"}
    got = client.set_retention(complete={"count": 10, "age": 60_000}, failed=None)
    assert got["complete"] == {"count": 10, "age": 60_000, "source": "queue"}
    assert got["failed"] == {"count": None, "age": None, "source": "queue"}
    both = client.set_retention(complete="default", failed=3)  # a forget and a write at once
    assert both["complete"]["source"] == "default" and both["failed"]["count"] == 3
    before = r.hgetall(client.keys.retention)
    for bad in ({"done": 5}, {}, {"complete": 1, "failed": {"age": "1d"}}):
        with pytest.raises(InvalidJob):
            client.set_retention(**bad)
    assert r.hgetall(client.keys.retention) == before
    memory = client.memory()
    assert memory["used"] > 0 and memory["peak"] >= memory["used"]
    assert set(memory) == {"used", "peak", "maxmemory", "policy"}


def test_pinned_waits_on_both_clients(client: Any, sync_queue: Queue) -> None:
    first = client.create_job("p").only(["w1", "w2"]).save()
    second = client.create_job("p").only(["w2"]).save()
    assert client.pinned_waits() == {"w1": [first.id], "w2": [first.id, second.id]}
    assert client.pinned_waits() == sync_queue.pinned_waits()
    assert client.pinned_waits(count=1) == {"w1": [first.id], "w2": [first.id]}
    with pytest.raises(InvalidJob):
        client.pinned_waits(count=0)


def test_counts_and_logs_on_both_clients(client: Any, sync_queue: Queue) -> None:
    job = sync_queue.create_job("l").save()
    sync_queue.create_job("m").delay(60_000).save()
    sync_queue.get_job(job.id).log("first %s", 1)  # type: ignore[arg-type, union-attr]
    assert client.get_log(job.id) == ["first 1"] == sync_queue.get_log(job.id)
    assert client.get_log(999_999) == []  # an unknown job has no lines, as in Kue
    assert client.count("inactive") == 1 and client.count("delayed", "m") == 1
    assert client.count("delayed", "l") == 0
    with pytest.raises(InvalidJob):
        client.count("nowhere")
