"""kue doctor on the keys of feeds and of kue rules (``kue_rules.doctor``, which plugs into
kue_core's doctor through the ``kue.doctor`` entry point group: kue_core imports nothing of
kue_rules)."""

from __future__ import annotations

import json

import pytest
import redis

from kue_core import Queue, doctor
from kue_rules.keys import rules_key

pytestmark = pytest.mark.single_node


def test_the_rules_checks_plug_in_through_the_entry_point() -> None:
    import kue_rules.doctor

    assert kue_rules.doctor.check in doctor._plugged_in()


def _kinds(queue: Queue) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for f in doctor.check(queue).findings:
        out.setdefault(f.kind, []).append(f.key)
    return out


def test_a_feed_no_watcher_reads_is_reported(queue: Queue, r: redis.Redis) -> None:
    queue.feed("acq", "complete")
    assert _kinds(queue) == {"unread-feed": [queue.keys.feed("complete", "acq")]}
    r.hset(
        rules_key(queue.keys, "watchers"),
        queue.keys.feed("complete", "acq"),
        json.dumps({"input": queue.keys.feed("complete", "acq")}),
    )
    assert _kinds(queue) == {}


def test_a_bad_record_and_a_lock_without_expiry_are_reported(queue: Queue, r: redis.Redis) -> None:
    r.hset(rules_key(queue.keys, "watchers"), "in", '{"input": "in"}')
    r.set(rules_key(queue.keys, "lock:in"), "someone", px=10_000)
    assert _kinds(queue) == {}
    r.persist(rules_key(queue.keys, "lock:in"))
    r.hset(rules_key(queue.keys, "watchers"), "junk", "not json")
    assert _kinds(queue) == {
        "bad-rules-record": [rules_key(queue.keys, "watchers")],
        "stuck-rules-lock": [rules_key(queue.keys, "lock:in")],
    }
