"""The dashboard's server samples the statistics' history itself (kue_http.sampler), so that
the backlog is kept while no kue worker runs; a read-only server writes nothing; the sampler
stops with the server."""

from __future__ import annotations

import redis

from kue_core import Queue
from kue_http import close, create_app
from tests.conftest import wait_for
from tests.integration.test_history import sampled


def test_the_server_samples_while_no_worker_runs(
    redis_url: str, prefix: str, queue: Queue, r: redis.Redis
) -> None:
    for _ in range(3):
        queue.create_job("email").save()
    assert not queue.workers()
    app = create_app({"KUE_REDIS_URL": redis_url, "KUE_PREFIX": prefix, "KUE_HISTORY_SAMPLE": True})
    sampler = app.extensions["kue_sampler"]
    try:
        wait_for(lambda: r.get(queue.keys.series_minute) is not None, timeout=10)
        point = sampled(queue, "email", "1h")
        assert (point["waiting"], point["delayed"], point["complete"]) == (3, 0, 0)
        assert queue.sample_history() is False  # the minute is sampled once, by whoever first
        with app.test_client() as client:  # a request in the same process starts no other
            thread = sampler.thread
            assert client.get("/api/history?type=email&range=1h").status_code == 200
            assert sampler.thread is thread and thread.is_alive()
    finally:
        close(app)
    wait_for(lambda: not thread.is_alive(), timeout=5)


def test_a_read_only_server_does_not_sample(
    redis_url: str, prefix: str, queue: Queue, r: redis.Redis
) -> None:
    queue.create_job("email").save()
    config = {"KUE_REDIS_URL": redis_url, "KUE_PREFIX": prefix, "KUE_HISTORY_SAMPLE": True}
    for off in ({"KUE_READONLY": True}, {"KUE_HISTORY_SAMPLE": False}):
        app = create_app({**config, **off})
        assert "kue_sampler" not in app.extensions
        with app.test_client() as client:
            assert client.get("/api/history").status_code == 200
        close(app)
    assert r.get(queue.keys.series_minute) is None
    assert queue.sample_history() is True  # nobody had: the first call writes the minute
