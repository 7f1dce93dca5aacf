"""``GET /api/history``: a type's (or all types') history over a range, as
``Queue.stats_history`` reads it; bad arguments are a 400 that changes nothing."""

from __future__ import annotations

import redis
from flask.testing import FlaskClient

from kue_core import Queue
from kue_core.features import history
from tests.conftest import finish
from tests.integration.test_history import sampled


def test_the_history_of_a_type_and_of_all(
    client: FlaskClient, queue: Queue, r: redis.Redis
) -> None:
    queue.create_job("email").save()
    queue.create_job("email").save()
    assert queue.scripts.drive(history.sample(queue.keys))
    finish(queue, "email", True)
    r.set(queue.keys.series_minute, int(r.get(queue.keys.series_minute) or 0) - 1)
    assert queue.scripts.drive(history.sample(queue.keys))
    res = client.get("/api/history?type=email&range=1h")
    assert res.status_code == 200, res.json
    body = res.json
    assert body == queue.stats_history("email", "1h")
    point = sampled(queue, "email", "1h")
    assert point in body["points"] and (point["complete"], point["waiting"]) == (1, 1)
    every = client.get("/api/history")  # all types, 24h
    assert every.status_code == 200
    assert every.json["type"] is None and every.json["range"] == "24h"
    assert len(every.json["points"]) == 1440 and every.json["total"]["complete"] == 1
    for span, step in (("7d", 3_600_000), ("30d", 86_400_000)):
        got = client.get(f"/api/history?range={span}").json
        assert got["step_ms"] == step and sampled(queue, None, span)["complete"] == 1


def test_bad_arguments_are_a_400(client: FlaskClient, r: redis.Redis, queue: Queue) -> None:
    for query in ("?range=2d", "?range=", "?type=", "?type=%01x"):
        res = client.get(f"/api/history{query}")
        assert res.status_code == 400, query
        assert "error" in res.json
    assert not list(r.scan_iter(f"{queue.prefix}:history:*"))
