"""The routes Kue lacks: history, bulk actions, pause/resume, workers, throughput, health,
search, the event stream and the Prometheus metrics."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import pytest
import redis
from flask.testing import FlaskClient

from kue_core import Queue
from kue_core.store import calls
from kue_http import create_app
from tests.conftest import finish, snapshot, wait_for, written_since


def test_history(client: FlaskClient, queue: Queue) -> None:
    queue.create_job("t").save()
    jid = finish(queue, "t", ok=True)
    res = client.get(f"/api/job/{jid}/history")
    assert res.status_code == 200
    entries = res.json
    assert [e["state"] for e in entries] == ["inactive", "active", "complete"]  # type: ignore[union-attr]
    assert entries[1]["worker"] == "kue:test:1" and entries[2]["attempt"] == 1  # type: ignore[index]
    assert client.get("/api/job/999999/history").status_code == 404
    assert client.get("/api/job/abc/history").status_code == 400


def test_bulk_actions(client: FlaskClient, queue: Queue) -> None:
    for _ in range(3):
        queue.create_job("email").save()
        finish(queue, "email", ok=False)
    queue.create_job("video").save()
    finish(queue, "video", ok=False)
    for _ in range(2):
        queue.create_job("sms").delay(60_000).save()

    res = client.post("/api/jobs/failed/retry?type=email", json={})
    assert res.status_code == 200
    assert res.json == {"message": "retried 3 failed email jobs", "count": 3}
    assert queue.count("failed") == 1 and queue.count("inactive", "email") == 3

    res = client.post("/api/jobs/delayed/promote", json={})
    assert res.json == {"message": "promoted 2 delayed jobs", "count": 2}
    assert queue.count("delayed") == 0 and queue.count("inactive") == 5

    res = client.delete("/api/jobs/inactive")
    assert res.json == {"message": "removed 5 inactive jobs", "count": 5}
    assert queue.counts() == {**dict.fromkeys(queue.counts(), 0), "failed": 1}


@pytest.mark.parametrize(
    ("method", "url"),
    [
        ("delete", "/api/jobs/active"),
        ("delete", "/api/jobs/nope"),
        ("delete", "/api/jobs/failed?type="),
        ("post", "/api/jobs/failed/retry?type=a%0Ab"),
        ("put", "/api/paused/a%00b"),
        ("delete", "/api/paused/" + "x" * 300),
    ],
)
def test_bad_bulk_and_pause_requests_change_nothing(
    client: FlaskClient, queue: Queue, r: redis.Redis, prefix: str, method: str, url: str
) -> None:
    queue.create_job("t").save()
    finish(queue, "t", ok=False)
    before = snapshot(r, prefix)
    res = getattr(client, method)(url, json={} if method == "post" else None)
    assert res.status_code == 400 and "error" in res.json
    assert not written_since(r, prefix, before)


def test_pause_and_resume(client: FlaskClient, queue: Queue) -> None:
    assert client.get("/api/paused").json == []
    res = client.put("/api/paused/email")
    assert res.json == {"message": "paused email", "changed": True}
    assert client.put("/api/paused/email").json["changed"] is False  # type: ignore[index]
    assert client.get("/api/paused").json == ["email"] == queue.paused()
    queue.create_job("email").save()
    assert queue.scripts.call(calls.claim(queue.keys, "email", "w", 1000)) == "paused"
    assert client.delete("/api/paused/email").json == {"message": "resumed email", "changed": True}
    assert queue.paused() == []


def test_workers(client: FlaskClient, redis_url: str, prefix: str) -> None:
    assert client.get("/api/workers").json == []
    gate = threading.Event()
    # A lease no load outlasts: one of 300 ms lost to a hold-up under load (two cores, under
    # coverage) rightly has the job run again and its stuck handler counted as left running.
    # The job shows from its claim, the types with the heartbeat process() asks at once.
    queue = Queue(redis_url, prefix=prefix, lease_ms=30_000)
    queue.process("slow", 2, lambda job: gate.wait(5))
    job = queue.create_job("slow").save()

    def running() -> Any:
        found = client.get("/api/workers").json
        return found if found and found[0]["jobs"] else None

    workers = wait_for(running)
    assert len(workers) == 1
    assert workers[0]["jobs"] == [job.id] and workers[0]["types"] == {"slow": 2}
    assert workers[0]["heartbeat"] > 0
    assert workers[0]["abandoned_threads"] == 0
    assert workers[0]["runtime"] == queue.runtime
    gate.set()
    queue.close()
    assert client.get("/api/workers").json == []  # a worker that shut down is gone at once


def test_threads_left_running_are_counted(client: FlaskClient, redis_url: str, prefix: str) -> None:
    gate = threading.Event()
    queue = Queue(redis_url, prefix=prefix)
    try:
        queue.process("stuck", 1, lambda job: gate.wait(30))
        job = queue.create_job("stuck").ttl(100).save()
        wait_for(lambda: queue.get_job(job.id).state == "failed")  # type: ignore[arg-type]
        workers = wait_for(
            lambda: [w for w in client.get("/api/workers").json if w["abandoned_threads"]]
        )
        assert workers[0]["abandoned_threads"] == 1 and workers[0]["jobs"] == []
        lines = client.get("/metrics").get_data(as_text=True).splitlines()
        assert "kue_abandoned_threads 1.0" in lines
    finally:
        gate.set()
        queue.close()


def test_throughput(client: FlaskClient, queue: Queue) -> None:
    for ok in (True, True, False):
        queue.create_job("t").save()
        finish(queue, "t", ok=ok)
    minutes = client.get("/api/throughput?minutes=3").json
    assert len(minutes) == 3  # type: ignore[arg-type]
    assert sum(m["complete"] for m in minutes) == 2  # type: ignore[union-attr]
    assert sum(m["failed"] for m in minutes) == 1  # type: ignore[union-attr]
    assert len(client.get("/api/throughput").json) == 60  # type: ignore[arg-type]
    for bad in ("0", "-5", "abc", "100000", "1.5"):
        res = client.get(f"/api/throughput?minutes={bad}")
        assert res.status_code == 400 and "minutes" in res.json["error"]  # type: ignore[index]


def test_health(client: FlaskClient) -> None:
    res = client.get("/api/health")
    assert res.status_code == 200 and res.json == {"status": "ok", "redis": "up"}


def test_health_without_redis() -> None:
    app = create_app({"KUE_REDIS_URL": "redis://127.0.0.1:1/0", "KUE_REDIS_TIMEOUT": 1})
    res = app.test_client().get("/api/health")
    assert res.status_code == 503 and res.json == {"status": "unavailable", "redis": "down"}


def test_search(client: FlaskClient, queue: Queue) -> None:
    a = queue.create_job("email", {"title": "Welcome <Ada>"}).save()
    b = queue.create_job("video", {"title": "cat.mp4"}).save()
    assert client.get("/api/job/search?q=welcome").json == [str(a.id)]  # Kue: id strings
    assert client.get("/api/job/search?q=ca").json == [str(b.id)]  # the last word: a start
    assert client.get("/api/job/search?q=mp4").json == [str(b.id)]
    c = queue.create_job("video", {"title": "Welcome reel"}).save()
    assert client.get("/api/job/search?q=welc").json == [str(c.id), str(a.id)]  # newest first
    assert client.get("/api/job/search?q=welc&count=1").json == [str(c.id)]
    assert client.get("/api/job/search?q=welc&offset=1").json == [str(a.id)]
    assert client.get("/api/job/search?q=welc&type=email").json == [str(a.id)]
    assert client.get("/api/job/search?q=vid").json == [str(c.id), str(b.id)]  # a type's word
    assert client.get("/api/job/search?q=welc&state=failed").json == []
    for bad in ("", "?q=", "?q=x&count=-1", "?q=x&count=many", "?q=x&state=gone", "?q=--"):
        res = client.get(f"/api/job/search{bad}")
        assert res.status_code == 400 and res.is_json


def _events(client: FlaskClient, url: str) -> Any:
    """The stream's ``data:`` payloads, read as they come (with a deadline per call)."""
    res = client.get(url, buffered=False)
    assert res.status_code == 200 and res.mimetype == "text/event-stream"
    chunks = iter(res.response)

    def take(count: int, timeout: float = 5.0) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        deadline = time.monotonic() + timeout
        while len(out) < count:
            assert time.monotonic() < deadline, f"only {out} arrived"
            text = next(chunks).decode()  # a keep-alive comes at least every 0.2 s
            out += [json.loads(line[5:]) for line in text.splitlines() if line.startswith("data:")]
        return out

    return res, take


def test_event_stream_filters_by_type_and_id(client: FlaskClient, queue: Queue) -> None:
    res, take = _events(client, "/api/events?type=email")
    queue.create_job("video").save()
    email = queue.create_job("email").save()
    first = take(1)[0]
    assert first == {
        "id": email.id,
        "event": "enqueue",
        "args": ["enqueue", "email"],
        "type": "email",
    }
    # Node Kue's messages carry no type: they might be of this type, so they pass.
    kue_message = {"id": 99, "event": "complete", "args": ["complete", None, None]}
    queue.client.publish(queue.keys.events, json.dumps(kue_message))
    assert take(1) == [kue_message]
    res.close()

    res, take = _events(client, f"/api/events?id={email.id}")
    queue.create_job("email").save()
    queue.get_job(email.id).set_state("complete")  # type: ignore[arg-type]
    queue.get_job(email.id).remove()  # type: ignore[arg-type]
    assert [(e["id"], e["event"]) for e in take(1)] == [(email.id, "remove")]
    res.close()


def test_event_stream_sends_keep_alives(client: FlaskClient) -> None:
    res = client.get("/api/events", buffered=False)
    chunks = iter(res.response)
    assert next(chunks).decode().startswith("retry: ")
    assert next(chunks) == b": keep-alive\n\n"
    res.close()


@pytest.mark.parametrize(
    "query", ["type=", "type=a%00b", "id=0", "id=x", "id=99999999999999999999"]
)
def test_event_stream_refuses_bad_filters(client: FlaskClient, query: str) -> None:
    res = client.get(f"/api/events?{query}")
    assert res.status_code == 400 and res.is_json


def test_prometheus_metrics(client: FlaskClient, queue: Queue) -> None:
    queue.create_job("email").save()
    queue.create_job("email").save()
    finish(queue, "email", ok=True)
    queue.create_job("video").delay(60_000).save()
    queue.pause("video")
    queue.create_job("sms").save()
    finish(queue, "sms", ok=False)
    res = client.get("/metrics")
    assert res.status_code == 200 and res.mimetype == "text/plain"
    lines = set(res.get_data(as_text=True).splitlines())
    assert 'kue_jobs{state="inactive",type="email"} 1.0' in lines
    assert 'kue_jobs{state="complete",type="email"} 1.0' in lines
    assert 'kue_jobs{state="delayed",type="video"} 1.0' in lines
    assert 'kue_jobs_completed_total{type="email"} 1.0' in lines
    assert 'kue_jobs_failed_total{type="sms"} 1.0' in lines
    assert "kue_job_duration_seconds_count 1.0" in lines
    assert 'kue_job_duration_seconds_bucket{le="+Inf"} 1.0' in lines
    assert 'kue_paused{type="video"} 1.0' in lines
    assert "kue_workers 0.0" in lines
