"""``GET /api/job/<id>/stream`` (kue_http/job_stream.py): a running job's parts as Server-Sent
Events while it runs, resumed after ``Last-Event-ID`` or ``?after=``, ending with the job;
``?once=true`` sends what is held; a part is a payload, hidden from roles below admin;
bad input is a 4xx before the stream starts."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from flask import Flask

from kue_core import Job, Queue, WaitForSignal
from kue_core.store import calls
from kue_http import create_app

from .test_redaction import ADA, OLGA, VIC, app_with


def events(chunks: Iterator[bytes]) -> Iterator[dict[str, Any]]:
    """The events of an SSE body as it comes: {"event", "id", "data"} (data read as JSON)."""
    buffer = ""
    for chunk in chunks:
        buffer += chunk.decode()
        while "\n\n" in buffer:
            block, buffer = buffer.split("\n\n", 1)
            fields: dict[str, Any] = {}
            for line in block.splitlines():
                name, _, value = line.partition(": ")
                if name in ("event", "id"):
                    fields[name] = value
                elif name == "data":
                    fields["data"] = json.loads(value)
            if "event" in fields:
                yield fields


def running(q: Queue, job_type: str = "tell") -> tuple[int, str]:
    """A job claimed as worker ``kue:test:1``: its id and lease token."""
    job = q.create_job(job_type, {}).save()
    claimed = q.scripts.call(calls.claim(q.keys, job_type, "kue:test:1", 60_000))
    assert claimed and claimed != "paused"
    return job.id, claimed[1]["lease"]  # type: ignore[return-value]


def put(q: Queue, job_id: int, token: str, value: Any) -> str:
    return q.scripts.call(calls.stream(q.keys, job_id, token, [json.dumps(value)], 1000, 10**6))


def test_the_parts_come_live_and_the_stream_ends_with_the_job(
    app: Flask, redis_url: str, prefix: str
) -> None:
    with Queue(redis_url, prefix=prefix) as q:
        job_id, token = running(q)
        first = put(q, job_id, token, "Once")
        res = app.test_client().get(f"/api/job/{job_id}/stream", buffered=False)
        assert res.status_code == 200 and res.mimetype == "text/event-stream"
        seen = events(iter(res.response))
        assert next(seen) == {"event": "part", "id": first, "data": {"attempt": 1, "value": "Once"}}
        # Written while the client listens: it comes at once.
        second = put(q, job_id, token, {"token": " upon"})
        assert next(seen) == {
            "event": "part",
            "id": second,
            "data": {"attempt": 1, "value": {"token": " upon"}},
        }
        q.scripts.call(calls.complete(q.keys, job_id, token, '"done"', None))  # type: ignore[arg-type]
        assert next(seen) == {"event": "end", "data": {"state": "complete"}}
        assert list(seen) == []  # and the body ends
        res.close()
        # A browser reconnecting after the last part it had is told the end at once.
        again = app.test_client().get(
            f"/api/job/{job_id}/stream", headers={"Last-Event-ID": second}
        )
        assert list(events(iter([again.data]))) == [{"event": "end", "data": {"state": "complete"}}]
        resumed = app.test_client().get(f"/api/job/{job_id}/stream?after={first}")
        got = list(events(iter([resumed.data])))
        assert [e.get("id") for e in got] == [second, None]


def test_once_sends_what_is_held_and_names_the_state(
    app: Flask, redis_url: str, prefix: str
) -> None:
    with Queue(redis_url, prefix=prefix) as q:
        job_id, token = running(q)
        ids = [put(q, job_id, token, i) for i in range(150)]  # more than one read
        res = app.test_client().get(f"/api/job/{job_id}/stream?once=true")
        got = list(events(iter([res.data])))
        assert [e.get("id") for e in got[:-1]] == ids
        assert got[-1] == {"event": "end", "data": {"state": "active"}}


def test_once_never_ends_before_the_last_parts_of_a_job_ending_meanwhile(
    app: Flask, redis_url: str, prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The job writes its last part and completes between the read that found nothing and
    the reading of its state (forced here at that very point, with real writes): the answer
    holds that part before ``end``."""
    from kue_http import job_stream

    real = job_stream._state
    with Queue(redis_url, prefix=prefix) as q:
        job_id, token = running(q)
        first = put(q, job_id, token, "first")

        def late(queue: Queue, jid: int) -> str | None:
            put(q, job_id, token, "last words")
            q.scripts.call(calls.complete(q.keys, str(job_id), token, '"done"', None))
            monkeypatch.setattr(job_stream, "_state", real)
            return real(queue, jid)

        monkeypatch.setattr(job_stream, "_state", late)
        res = app.test_client().get(f"/api/job/{job_id}/stream?once=true&after={first}")
        got = list(events(iter([res.data])))
        assert [e["data"] for e in got] == [
            {"attempt": 1, "value": "last words"},
            {"state": "complete"},
        ]


def test_a_socket_timeout_shorter_than_a_read_s_wait_is_no_failure(
    redis_url: str, prefix: str
) -> None:
    """A blocked read waits half the connection's socket timeout at most: with a timeout of
    0.3 s (KUE_REDIS_TIMEOUT), a job's stream is followed, not ended by a timeout error."""
    app = create_app({"KUE_REDIS_URL": redis_url, "KUE_PREFIX": prefix, "KUE_REDIS_TIMEOUT": 0.3})
    with Queue(redis_url, prefix=prefix) as q:
        job_id, token = running(q)
        res = app.test_client().get(f"/api/job/{job_id}/stream", buffered=False)
        body = res.response
        assert b"connected" in next(body)
        put(q, job_id, token, "late")  # after a few reads that found nothing
        seen = next(events(body))
        assert seen["event"] == "part" and seen["data"]["value"] == "late"
        res.close()
        # And from Python: a read asked to wait 30 s on that client returns with nothing.
        start = time.monotonic()
        short: Queue = app.extensions["kue"]
        assert short.read_stream(job_id, after=seen["id"], block=30).parts == []  # type: ignore[arg-type]
        assert time.monotonic() - start < 5


def test_a_followed_job_that_comes_to_wait_for_a_signal_ends_its_stream(
    app: Flask, redis_url: str, prefix: str
) -> None:
    """A job may wait for days: its stream ends with ``end`` ``suspended`` (found at a
    keep-alive) rather than hold a server thread; followed again after its last part, once
    the signal resumed it, the stream goes on to the end."""

    def handler(job: Job) -> str:
        job.stream("asked")
        if "go" not in job.signals:
            raise WaitForSignal("go")
        job.stream(" and answered")
        return "done"

    with Queue(redis_url, prefix=prefix) as q:
        job = q.create_job("ask", {}).save()
        client = app.test_client()
        res = client.get(f"/api/job/{job.id}/stream", buffered=False)
        q.process("ask", 1, handler)
        got = list(events(res.response))
        assert [e["data"] for e in got] == [
            {"attempt": 1, "value": "asked"},
            {"state": "suspended"},
        ]
        assert q.signal(job.id, "go") == "resumed"  # type: ignore[arg-type]
        again = client.get(f"/api/job/{job.id}/stream", headers={"Last-Event-ID": got[0]["id"]})
        assert [e["data"] for e in events(iter([again.data]))] == [
            {"attempt": 2, "value": "asked"},  # the run after the signal starts over
            {"attempt": 2, "value": " and answered"},
            {"state": "complete"},
        ]


@pytest.mark.parametrize(
    ("url", "headers", "code", "message"),
    [
        ("/api/job/999999/stream", {}, 404, "999999"),
        ("/api/job/abc/stream", {}, 400, "job id"),
        ("/api/job/{id}/stream?after=yesterday", {}, 400, "entry id"),
        ("/api/job/{id}/stream", {"Last-Event-ID": "1-2-3"}, 400, "entry id"),
        ("/api/job/{id}/stream?once=maybe", {}, 400, "once must be true or false"),
    ],
)
def test_bad_input_is_refused_before_the_stream_starts(
    app: Flask,
    redis_url: str,
    prefix: str,
    url: str,
    headers: dict[str, str],
    code: int,
    message: str,
) -> None:
    with Queue(redis_url, prefix=prefix) as q:
        job_id, _ = running(q)
    res = app.test_client().get(url.replace("{id}", str(job_id)), headers=headers)
    assert res.status_code == code and res.is_json
    assert message in res.json["error"]


def test_a_part_is_hidden_from_roles_below_admin(redis_url: str, prefix: str) -> None:
    app = app_with(redis_url, prefix, KUE_SENSITIVE_FIELDS="tell:card.number")
    with Queue(redis_url, prefix=prefix) as q:
        job_id, token = running(q)
        put(q, job_id, token, {"card": {"number": "4242", "brand": "visa"}})
        put(q, job_id, token, "plain words")
        url = f"/api/job/{job_id}/stream?once=true"
        for who in (VIC, OLGA):
            got = list(events(iter([app.test_client().get(url, headers=who).data])))
            assert [e["data"]["value"] for e in got[:-1]] == ["[hidden]", "[hidden]"]
        got = list(events(iter([app.test_client().get(url, headers=ADA).data])))
        assert [e["data"]["value"] for e in got[:-1]] == [
            {"card": {"number": "[hidden]", "brand": "visa"}},
            "plain words",
        ]


def test_a_worker_streaming_to_a_listening_client(redis_url: str, prefix: str) -> None:
    """End to end: a handler streams while a client of the app listens; every part arrives
    in order, then the end."""
    app = create_app({"KUE_REDIS_URL": redis_url, "KUE_PREFIX": prefix})
    go = threading.Event()

    def handler(job: Job) -> str:
        for word in ("Once", " upon", " a", " time"):
            job.stream(word)
        go.wait(30)
        return "told"

    with Queue(redis_url, prefix=prefix) as q:
        job = q.create_job("tell", {}).save()
        q.process("tell", 1, handler)
        res = app.test_client().get(f"/api/job/{job.id}/stream", buffered=False)
        seen, words = events(iter(res.response)), []
        while len(words) < 4:
            words.append(next(seen)["data"]["value"])
        go.set()
        assert "".join(words) == "Once upon a time"
        assert next(seen) == {"event": "end", "data": {"state": "complete"}}
        res.close()


def test_a_closing_server_ends_open_streams(app: Flask, redis_url: str, prefix: str) -> None:
    from kue_http import close

    with Queue(redis_url, prefix=prefix) as q:
        job_id, _ = running(q)
    res = app.test_client().get(f"/api/job/{job_id}/stream", buffered=False)
    body = iter(res.response)
    next(body)  # connected
    done = threading.Event()

    def drain() -> None:
        for _ in body:
            pass
        done.set()

    threading.Thread(target=drain, daemon=True).start()
    close(app, timeout=5)
    assert done.wait(5)
