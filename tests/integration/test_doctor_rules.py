"""kue doctor on the keys of feeds and of kue rules (``kue_core.doctor_rules``)."""

from __future__ import annotations

import json

import pytest
import redis

from kue_core import Queue, doctor

pytestmark = pytest.mark.single_node


def _kinds(queue: Queue) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for f in doctor.check(queue).findings:
        out.setdefault(f.kind, []).append(f.key)
    return out


def test_a_feed_no_watcher_reads_is_reported(queue: Queue, r: redis.Redis) -> None:
    queue.feed("acq", "complete")
    assert _kinds(queue) == {"unread-feed": [queue.keys.feed("complete", "acq")]}
    r.hset(
        queue.keys.rules("watchers"),
        queue.keys.feed("complete", "acq"),
        json.dumps({"input": queue.keys.feed("complete", "acq")}),
    )
    assert _kinds(queue) == {}


def test_a_bad_record_and_a_lock_without_expiry_are_reported(queue: Queue, r: redis.Redis) -> None:
    r.hset(queue.keys.rules("watchers"), "in", '{"input": "in"}')
    r.set(queue.keys.rules("lock:in"), "someone", px=10_000)
    assert _kinds(queue) == {}
    r.persist(queue.keys.rules("lock:in"))
    r.hset(queue.keys.rules("watchers"), "junk", "not json")
    assert _kinds(queue) == {
        "bad-rules-record": [queue.keys.rules("watchers")],
        "stuck-rules-lock": [queue.keys.rules("lock:in")],
    }
