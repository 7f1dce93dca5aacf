"""Job event feeds (``kue_core.features.feeds``): the jobs of a fed type that complete or fail for
good
go, as ``<type>/<id>``, to a list in the same script call; other types and events do not."""

from __future__ import annotations

import pytest
import redis

from kue_core import InvalidJob, Job, NoRetry, Queue
from tests.conftest import keys_under, wait_for


def test_a_feed_gets_the_jobs_that_end_so(queue: Queue, r: redis.Redis) -> None:
    assert queue.feed("f", "complete") == queue.keys.feed("complete", "f")
    assert queue.feed("f", "failed") == queue.keys.feed("failed", "f")
    queue.feed("f", "complete")  # again: no change
    assert queue.feeds() == {"f": ["complete", "failed"]}
    assert queue.limits() == {}  # a feed is no limit

    def handler(job: Job) -> str:
        if job.data["ok"]:
            return "fine"
        raise NoRetry("bad")

    ok = queue.create_job("f", {"ok": True}).save()
    bad = queue.create_job("f", {"ok": False}).attempts(3).save()
    queue.create_job("g", {"ok": True}).save()
    queue.process(["f", "g"], 2, handler)
    assert wait_for(lambda: queue.count("complete") == 2 and queue.count("failed") == 1)
    assert r.lrange(queue.keys.feed("complete", "f"), 0, -1) == [f"f/{ok.id}"]
    assert r.lrange(queue.keys.feed("failed", "f"), 0, -1) == [f"f/{bad.id}"]
    assert not r.exists(queue.keys.feed("complete", "g"))  # g has no feed


def test_a_failed_attempt_that_retries_is_not_fed(queue: Queue, r: redis.Redis) -> None:
    queue.feed("f", "failed")
    tries: list[int] = []

    def handler(job: Job) -> str:
        tries.append(job.id)
        if len(tries) == 1:
            raise RuntimeError("once")
        return "ok"

    job = queue.create_job("f").attempts(2).save()
    queue.process("f", handler)
    assert wait_for(lambda: queue.get_job(job.id).state == "complete")
    assert not r.exists(queue.keys.feed("failed", "f"))


def test_unfeed_stops_it_and_drops_its_list(queue: Queue, r: redis.Redis) -> None:
    queue.feed("f", "complete")
    queue.process("f", lambda job: 1)
    queue.create_job("f").save()
    assert wait_for(lambda: r.llen(queue.keys.feed("complete", "f")) == 1)
    queue.unfeed("f", "complete")
    assert queue.feeds() == {}
    assert not r.exists(queue.keys.feed("complete", "f"))
    assert r.hget(queue.keys.limits, "f") is None  # no rules left: the field goes
    queue.create_job("f").save()
    assert wait_for(lambda: queue.count("complete", "f") == 2)
    assert not r.exists(queue.keys.feed("complete", "f"))


@pytest.mark.parametrize("event", ["start", "enqueue", "", None, 3])
def test_a_feed_of_another_event_is_refused(queue: Queue, r: redis.Redis, event: object) -> None:
    before = keys_under(r, queue.prefix)
    with pytest.raises(InvalidJob, match="a feed carries one of complete, failed"):
        queue.feed("f", event)  # type: ignore[arg-type]
    assert keys_under(r, queue.prefix) == before


def test_a_feed_keeps_the_other_rules_of_its_type(queue: Queue) -> None:
    queue.limit("f", concurrency=2)
    queue.pause("f")
    queue.feed("f", "complete")
    assert queue.limits()["f"]["concurrency"] == 2
    queue.unfeed("f", "complete")
    assert queue.limits()["f"]["concurrency"] == 2 and "f" in queue.paused()
