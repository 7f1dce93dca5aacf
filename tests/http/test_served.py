"""The app under a real gunicorn, as docs/http-api.md runs it, with a worker in another process: the
API answers, and an event stream sees the job the worker completes."""

from __future__ import annotations

import http.client
import json
import signal
import subprocess
import sys
import textwrap
import time
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import Server

WORKER = textwrap.dedent(
    """
    import signal, sys
    from kue_core import Queue

    stop = {signal.SIGTERM, signal.SIGINT}
    signal.pthread_sigmask(signal.SIG_BLOCK, stop)  # before any thread starts: sigwait gets it
    queue = Queue(sys.argv[1], prefix=sys.argv[2])
    queue.process("served", 2, lambda job: {"doubled": job.data["n"] * 2})
    print("ready", flush=True)
    signal.sigwait(stop)
    queue.close()
    """
)


@pytest.fixture
def server(redis_url: str, prefix: str) -> Iterator[str]:
    s = Server(redis_url, prefix, "kue_http:create_app()")
    s.start()
    yield s.base
    s.kill()


def _request(base: str, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(base + path, data=data, method=method)
    if data is not None:
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=10) as res:
            return res.status, json.loads(res.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_gunicorn_serves_the_api(server: str) -> None:
    status, created = _request(server, "POST", "/api/job", {"type": "served", "data": {"n": 1}})
    assert status == 200 and created["message"] == "job created"
    status, job = _request(server, "GET", f"/api/job/{created['id']}")
    assert status == 200 and job["state"] == "inactive" and job["data"] == {"n": 1}
    status, error = _request(server, "GET", "/api/job/999999")
    assert status == 404 and "999999" in error["error"]
    assert _request(server, "GET", "/api/stats")[1]["inactiveCount"] == 1


def test_event_stream_sees_a_worker_in_another_process_complete(
    server: str, redis_url: str, prefix: str
) -> None:
    host, port = server.removeprefix("http://").split(":")
    stream = http.client.HTTPConnection(host, int(port), timeout=10)
    stream.request("GET", "/api/events?type=served")
    res = stream.getresponse()
    assert res.status == 200 and res.headers["Content-Type"].startswith("text/event-stream")
    assert res.readline().startswith(b"retry: ")  # subscribed: no event can be missed now

    worker = subprocess.Popen(
        [sys.executable, "-c", WORKER, redis_url, prefix], stdout=subprocess.PIPE, text=True
    )
    try:
        assert worker.stdout and worker.stdout.readline().strip() == "ready"
        _, created = _request(server, "POST", "/api/job", {"type": "served", "data": {"n": 21}})
        seen: list[dict[str, Any]] = []
        deadline = time.monotonic() + 15
        while not any(e["event"] == "complete" for e in seen):
            assert time.monotonic() < deadline, f"no complete event; saw {seen}"
            line = res.readline()  # keep-alives arrive every 0.5 s; the timeout is 10 s
            assert line, "the stream ended"
            if line.startswith(b"data:"):
                seen.append(json.loads(line[5:]))
        done = next(e for e in seen if e["event"] == "complete")
        assert done == {
            "id": created["id"],
            "event": "complete",
            "args": ["complete", {"doubled": 42}],
            "type": "served",
        }
        assert [e["event"] for e in seen] == ["enqueue", "start", "complete"]
    finally:
        stream.close()
        worker.send_signal(signal.SIGTERM)
        assert worker.wait(timeout=15) == 0
