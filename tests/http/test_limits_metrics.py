"""Flow control in ``/metrics``: ``kue_jobs_held_back{type, reason}`` counts the waiting jobs of
each type held back now, under its reason (paused, remote, concurrency, rate; 0 under the
others, nothing for a type without limits), and ``kue_limit`` / ``kue_limit_window_seconds``
give each type's limits."""

from __future__ import annotations

import json

import redis
from flask.testing import FlaskClient
from prometheus_client.parser import text_string_to_metric_families

from kue_core import Queue
from kue_core.store import calls
from kue_http.metrics import HELD_REASONS


def _samples(client: FlaskClient, name: str) -> dict[tuple[str, ...], float]:
    """The samples of metric ``name``: their label values (sorted by label name) -> value."""
    res = client.get("/metrics")
    assert res.status_code == 200
    families = {f.name: f for f in text_string_to_metric_families(res.get_data(as_text=True))}
    return {tuple(v for _, v in sorted(s.labels.items())): s.value for s in families[name].samples}


def test_jobs_held_back_by_each_reason(client: FlaskClient, queue: Queue, r: redis.Redis) -> None:
    for job_type, n in (("capped", 3), ("rated", 2), ("paused", 4), ("remote", 1), ("free", 5)):
        for _ in range(n):
            queue.create_job(job_type).save()
    queue.limit("capped", concurrency=1)
    queue.limit("rated", rate=(1, 60_000))
    queue.limit("idle", concurrency=2)  # no job waiting: held back by nothing
    for job_type in ("capped", "rated"):
        assert queue.scripts.call(calls.claim(queue.keys, job_type, "kue:test:1", 60_000))
    queue.pause("paused")
    seconds, _ = r.time()
    r.hset(queue.keys.limits, "remote", json.dumps({"until": (int(seconds) + 60) * 1000}))
    held = _samples(client, "kue_jobs_held_back")
    expected = {"capped": ("concurrency", 2), "rated": ("rate", 1), "paused": ("paused", 4)}
    expected["remote"] = ("remote", 1)
    for job_type, (why, n) in expected.items():
        for reason in HELD_REASONS:
            assert held[(reason, job_type)] == (n if reason == why else 0), (job_type, reason)
    assert {held[(reason, "idle")] for reason in HELD_REASONS} == {0}
    assert not [k for k in held if k[1] == "free"]  # no limit: no series


def test_held_back_ends_with_the_limit(client: FlaskClient, queue: Queue) -> None:
    queue.create_job("capped").save()
    queue.create_job("capped").save()
    queue.limit("capped", concurrency=1)
    assert queue.scripts.call(calls.claim(queue.keys, "capped", "kue:test:1", 60_000))
    assert _samples(client, "kue_jobs_held_back")[("concurrency", "capped")] == 1
    queue.limit("capped", concurrency=2)
    assert _samples(client, "kue_jobs_held_back")[("concurrency", "capped")] == 0
    queue.remove_limits("capped")
    assert not _samples(client, "kue_jobs_held_back")


def test_limits_as_gauges(client: FlaskClient, queue: Queue) -> None:
    queue.limit("email", rate=(10, 1000), concurrency=3)
    queue.limit('a"b\\c', group_rate=(5, 120_000), group_concurrency=2)
    limits = _samples(client, "kue_limit")
    assert limits == {
        ("concurrency", "email"): 3,
        ("rate", "email"): 10,
        ("group_concurrency", 'a"b\\c'): 2,
        ("group_rate", 'a"b\\c'): 5,
    }
    windows = _samples(client, "kue_limit_window_seconds")
    assert windows == {("rate", "email"): 1.0, ("group_rate", 'a"b\\c'): 120.0}
    text = client.get("/metrics").get_data(as_text=True)
    assert "# TYPE kue_jobs_held_back gauge" in text and "# TYPE kue_limit gauge" in text
