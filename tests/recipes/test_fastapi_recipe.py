"""The FastAPI recipe (kue_example/fastapi_app.py) served by uvicorn in a process of its own:
enqueue over HTTP, a job's progress streamed over SSE as a worker builds it, errors as JSON,
and a thousand requests at once."""

from __future__ import annotations

import http.client
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from kue_core import Queue
from kue_example.handlers import build_report
from tests.conftest import free_port

httpx = pytest.importorskip("httpx")
pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def service(redis_url: str, prefix: str) -> Iterator[str]:
    """The recipe's app under uvicorn, on the test's Redis and prefix; its base URL."""
    port = free_port()
    env = {**os.environ, "KUE_REDIS_URL": redis_url, "KUE_PREFIX": prefix, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "kue_example.fastapi_app:app", "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 20
    while True:
        try:
            if httpx.get(f"{base}/openapi.json", timeout=1).status_code == 200:
                break
        except httpx.TransportError:
            pass
        assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
        assert time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.05)
    yield base
    proc.terminate()
    proc.wait(10)


def _events(lines: Iterator[str]) -> Iterator[tuple[str, object]]:
    """(event, data) of each Server-Sent Event read from ``lines``."""
    name = None
    for line in lines:
        if line.startswith("event: "):
            name = line[7:]
        elif line.startswith("data: ") and name is not None:
            yield name, json.loads(line[6:])
            name = None


def test_a_report_is_enqueued_and_its_progress_streamed(
    service: str, redis_url: str, prefix: str
) -> None:
    made = httpx.post(f"{service}/reports", json={"title": "Q3", "pages": 5}, timeout=10)
    assert made.status_code == 202
    job_id = made.json()["id"]
    assert made.json()["events"] == f"/reports/{job_id}/events"
    seen: list[tuple[str, object]] = []
    events = f"{service}/reports/{job_id}/events"
    with (
        Queue(redis_url, prefix=prefix) as worker,
        httpx.stream("GET", events, timeout=20) as stream,
    ):
        assert stream.headers["content-type"].startswith("text/event-stream")
        for event in _events(stream.iter_lines()):
            seen.append(event)
            if len(seen) == 1:  # the stream is subscribed: only now does the job run
                worker.process("report", build_report)
            if event[0] != "progress":
                break
    assert seen[0] == ("progress", {"percent": 0, "data": None})
    assert seen[1:-1] == [
        ("progress", {"percent": p * 20, "data": {"page": p}}) for p in range(1, 6)
    ]
    assert seen[-1] == ("complete", {"title": "Q3", "pages": 5})
    got = httpx.get(f"{service}/reports/{job_id}", timeout=10).json()
    assert got["state"] == "complete" and got["result"] == {"title": "Q3", "pages": 5}
    # A finished job's stream tells its end at once.
    with httpx.stream("GET", f"{service}/reports/{job_id}/events", timeout=10) as stream:
        again = list(_events(stream.iter_lines()))
    assert again == [
        ("progress", {"percent": 100, "data": {"page": 5}}),
        ("complete", {"title": "Q3", "pages": 5}),
    ]


def test_other_jobs_are_not_reports(service: str, redis_url: str, prefix: str) -> None:
    with Queue(redis_url, prefix=prefix) as queue:
        secret = queue.create_job("payroll", {"salary": 1}).save()
    assert httpx.get(f"{service}/reports/{secret.id}", timeout=10).status_code == 404
    assert httpx.get(f"{service}/reports/{secret.id}/events", timeout=10).status_code == 404


def test_bad_requests_get_json_errors(service: str) -> None:
    assert httpx.post(f"{service}/reports", json={"title": ""}, timeout=10).status_code == 422
    assert httpx.post(f"{service}/reports", json={"pages": 3}, timeout=10).status_code == 422
    missing = httpx.get(f"{service}/reports/424242", timeout=10)
    assert missing.status_code == 404 and "doesnt exist" in missing.json()["error"]
    assert httpx.get(f"{service}/reports/424242/events", timeout=10).status_code == 404
    assert httpx.get(f"{service}/reports/0", timeout=10).status_code == 400


def test_a_thousand_requests_at_once(service: str, redis_url: str, prefix: str) -> None:
    # 50 connections at once, kept alive, each sending its share of the 1,000 requests (the
    # standard library's client: httpx's pool costs milliseconds of CPU per request here).
    local = threading.local()
    host, port = service.removeprefix("http://").split(":")

    def post(i: int) -> tuple[int, dict[str, Any]]:
        conn = getattr(local, "conn", None)
        if conn is None:
            conn = local.conn = http.client.HTTPConnection(host, int(port), timeout=60)
        body = json.dumps({"title": f"r{i}", "pages": 1})
        conn.request("POST", "/reports", body=body, headers={"content-type": "application/json"})
        reply = conn.getresponse()
        return reply.status, json.loads(reply.read())

    with ThreadPoolExecutor(50) as pool:
        replies = list(pool.map(post, range(1000)))
    assert {status for status, _ in replies} == {202}
    assert sorted(body["id"] for _, body in replies) == list(range(1, 1001))
    with Queue(redis_url, prefix=prefix) as queue:
        assert queue.count("inactive", "report") == 1000
        titles = {j.data["title"] for j in queue.range_by_type("report", "inactive", 0, -1)}
        assert titles == {f"r{i}" for i in range(1000)}
