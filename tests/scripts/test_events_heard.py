"""Kue's events go out when someone hears them (lib/events.lua, EVENTS_UNASKED): a call sends
its first four events as they come, then asks once whether <p>:events has a subscriber (by
name or by pattern) and sends no more when none has. Feeds are written all the same."""

from __future__ import annotations

import pytest
import redis

from kue_core import Queue
from tests.conftest import heard, on_cluster, wait_for

#: lib/events.lua's EVENTS_UNASKED.
UNASKED = 4


def _published(r: redis.Redis) -> int:
    """PUBLISH commands this Redis has run (also those from scripts)."""
    stats = r.info("commandstats")
    return int(stats.get("cmdstat_publish", {}).get("calls", 0))


def test_a_call_with_nobody_listening_sends_its_first_events_only(
    queue: Queue, r: redis.Redis, redis_url: str
) -> None:
    before = _published(r)
    jobs = queue.save_many([queue.create_job("t", {"n": i}) for i in range(10)])
    assert len(jobs) == 10 and r.llen(f"{queue.prefix}:t:jobs") == 10
    # Nothing else publishes here while the test runs: the count is the save call's. On a
    # cluster, other nodes' subscribers hear this node's messages: every event goes out.
    assert _published(r) - before == (10 if on_cluster(redis_url) else UNASKED)


def test_feeds_are_written_whoever_listens(queue: Queue, r: redis.Redis, redis_url: str) -> None:
    queue.feed("t", "complete")
    before = _published(r)
    # fan_out("all") with no worker alive: each job completes as it is saved.
    jobs = queue.save_many([queue.create_job("t").fan_out("all") for _ in range(8)])
    assert {j.state for j in queue.get_jobs([j.id for j in jobs])} == {"complete"}
    fed = r.lrange(f"{queue.prefix}:feed:complete:t", 0, -1)
    assert sorted(fed) == sorted(f"t/{j.id}" for j in jobs)
    assert _published(r) - before == (8 if on_cluster(redis_url) else UNASKED)


@pytest.mark.parametrize("how", ["channel", "pattern"])
def test_a_subscriber_hears_every_event(queue: Queue, r: redis.Redis, how: str) -> None:
    channel = f"{queue.prefix}:events"

    pattern = how == "pattern"
    with heard(r, channel[:-1] + "*" if pattern else channel, pattern) as got:
        jobs = queue.save_many([queue.create_job("t", {"n": i}) for i in range(10)])
        wait_for(lambda: len(got) >= 10)
    assert [(e["id"], e["event"]) for e in got] == [(j.id, "enqueue") for j in jobs]


def test_kues_own_stream_is_counted_and_hears_every_event(queue: Queue) -> None:
    stream = queue.event_stream(5)
    try:
        jobs = queue.save_many([queue.create_job("t", {"n": i}) for i in range(10)])
        heard = [stream.next_event(5) for _ in jobs]
    finally:
        stream.close()
    assert [(e.id, e.name) for e in heard if e] == [(j.id, "enqueue") for j in jobs]
