"""Job control over the API: cancel a job, move it to another type, replace its data, stop a
worker process. Each route: what it does, bad input (400, nothing changed), an unknown job or
worker (404), what the job's state refuses (409), read-only mode (405) and authentication."""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from flask import Flask
from flask.testing import FlaskClient

from kue_core import Job, Queue, defaults
from kue_http import close, create_app
from tests.conftest import finish, snapshot, wait_for, written_since


@pytest.fixture
def held(queue: Queue) -> Iterator[tuple[Job, threading.Event]]:
    """A job of type ``t`` running in a worker of this process, whose thread handler runs
    until its attempt is stopped; and an event set when the handler has returned."""
    started, returned = threading.Event(), threading.Event()

    def handler(job: Job) -> str:
        started.set()
        wait_for(lambda: job.stopping, timeout=30)
        returned.set()
        return "finished anyway"

    job = queue.create_job("t", {"n": 1}).save()
    queue.process("t", handler)
    # Its handler has begun: a job is active from its claim, and one cancelled or moved
    # before its handler begins is rightly never run (its slot's thread held up under load).
    assert started.wait(15)
    yield job, returned
    queue.shutdown(1)


def _worker_id(queue: Queue) -> str:
    [info] = wait_for(queue.workers)
    worker_id: str = info["id"]
    return worker_id


# -- cancel ----------------------------------------------------------------------------------
def test_cancel_a_waiting_job(client: FlaskClient, queue: Queue) -> None:
    job = queue.create_job("email", {"to": "a"}).attempts(3).save()
    res = client.post(f"/api/job/{job.id}/cancel", json={"reason": "sent by hand"})
    assert res.status_code == 200
    assert res.json["message"] == f"cancelled job {job.id}"  # type: ignore[index]
    assert res.json["job"]["state"] == "failed"  # type: ignore[index]
    assert res.json["job"]["error"] == "cancelled: sent by hand"  # type: ignore[index]
    stored = queue.get_job(job.id)
    assert (stored.state, stored.error) == ("failed", "cancelled: sent by hand")
    last = client.get(f"/api/job/{job.id}/history").json[-1]  # type: ignore[index]
    assert (last["state"], last["from"], last["cancelled"]) == (
        "failed",
        "inactive",
        "sent by hand",
    )


@pytest.mark.parametrize("body", [{}, None], ids=["empty object", "no body"])
def test_cancel_without_a_reason(client: FlaskClient, queue: Queue, body: Any) -> None:
    """The body is optional, but a POST must still be sent as JSON (CSRF)."""
    job = queue.create_job("email").delay(60_000).save()
    if body is None:
        res = client.post(f"/api/job/{job.id}/cancel", content_type="application/json")
    else:
        res = client.post(f"/api/job/{job.id}/cancel", json=body)
    assert res.status_code == 200, res.json
    assert queue.get_job(job.id).error == "cancelled"


def test_cancel_a_running_job(
    client: FlaskClient, queue: Queue, held: tuple[Job, threading.Event]
) -> None:
    job, returned = held
    res = client.post(f"/api/job/{job.id}/cancel/", json={"reason": "stuck"})
    assert res.status_code == 200
    assert res.json["job"]["state"] == "failed"  # type: ignore[index]
    # Its handler learns that its attempt is over; what it returns then is dropped.
    assert wait_for(returned.is_set)
    stored = queue.get_job(job.id)
    assert (stored.state, stored.error, stored.result) == ("failed", "cancelled: stuck", None)


def test_cancelling_a_complete_job_is_a_conflict(client: FlaskClient, queue: Queue) -> None:
    queue.create_job("t").save()
    jid = finish(queue, "t", ok=True)
    res = client.post(f"/api/job/{jid}/cancel", json={})
    assert res.status_code == 409 and res.json["error"]  # type: ignore[index]
    assert queue.get_job(jid).state == "complete"


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ("[]", "JSON object"),
        ('"stop"', "JSON object"),
        ("null", "JSON object"),
        ('{"reason": 5}', "reason must be a string"),
        ('{"reason": null}', "reason must be a string"),
        ('{"why": "x"}', "unknown field"),
        ("{", ""),
        (f'{{"reason": "{"x" * (defaults.MAX_REASON + 1)}"}}', "reason"),
    ],
)
def test_bad_cancel_requests_change_nothing(
    client: FlaskClient, queue: Queue, r: redis.Redis, prefix: str, data: str, message: str
) -> None:
    job = queue.create_job("t").save()
    before = snapshot(r, prefix)
    res = client.post(f"/api/job/{job.id}/cancel", data=data, content_type="application/json")
    assert res.status_code == 400 and message in res.json["error"]  # type: ignore[index]
    assert not written_since(r, prefix, before)


def test_a_reason_of_the_longest_length_is_kept(client: FlaskClient, queue: Queue) -> None:
    job = queue.create_job("t").save()
    reason = "é" * defaults.MAX_REASON
    assert client.post(f"/api/job/{job.id}/cancel", json={"reason": reason}).status_code == 200
    assert queue.get_job(job.id).error == f"cancelled: {reason}"


def test_cancel_an_unknown_job(client: FlaskClient) -> None:
    assert client.post("/api/job/999999/cancel", json={}).status_code == 404
    assert client.post("/api/job/abc/cancel", json={}).status_code == 400


# -- retry and promote -----------------------------------------------------------------------
def test_retry_a_failed_job_and_promote_a_delayed_one(client: FlaskClient, queue: Queue) -> None:
    queue.create_job("t").save()
    failed = finish(queue, "t", ok=False)
    later = queue.create_job("t").delay(3_600_000).save()
    res = client.post(f"/api/job/{failed}/retry", json={})
    assert res.status_code == 200 and res.json["message"] == f"retried job {failed}"  # type: ignore[index]
    assert res.json["job"]["state"] == "inactive"  # type: ignore[index]
    assert res.json["job"]["attempts"]["made"] == 0  # type: ignore[index]
    res = client.post(f"/api/job/{later.id}/promote", content_type="application/json")
    assert res.status_code == 200 and res.json["job"]["state"] == "inactive"  # type: ignore[index]
    assert queue.ids("inactive", "t") == [failed, later.id]


def test_retry_and_promote_refuse_other_states_unknown_jobs_and_bodies(
    client: FlaskClient, queue: Queue, r: redis.Redis, prefix: str
) -> None:
    waiting = queue.create_job("t").save()
    before = snapshot(r, prefix)
    for action, wanted in (("retry", "not failed or complete"), ("promote", "not delayed")):
        res = client.post(f"/api/job/{waiting.id}/{action}", json={})
        assert res.status_code == 409 and wanted in res.json["error"]  # type: ignore[index]
        assert client.post(f"/api/job/999999/{action}", json={}).status_code == 404
        assert client.post(f"/api/job/x/{action}", json={}).status_code == 400
        res = client.post(f"/api/job/{waiting.id}/{action}", json={"now": True})
        assert res.status_code == 400 and "unknown field" in res.json["error"]  # type: ignore[index]
        res = client.post(f"/api/job/{waiting.id}/{action}", json=[])
        assert res.status_code == 400
    assert not written_since(r, prefix, before)


# -- move ------------------------------------------------------------------------------------
def test_move_a_waiting_job(client: FlaskClient, queue: Queue) -> None:
    job = queue.create_job("email", {"to": "a"}).priority("high").save()
    res = client.put(f"/api/job/{job.id}/type/sms")
    assert res.status_code == 200
    assert res.json["message"] == f"moved job {job.id} to sms"  # type: ignore[index]
    moved = queue.get_job(job.id)
    assert (moved.type, moved.state, moved.data) == ("sms", "inactive", {"to": "a"})
    assert res.json["job"] == moved.to_dict()  # type: ignore[index]
    assert queue.ids("inactive", "sms") == [job.id] and queue.ids("inactive", "email") == []
    last = client.get(f"/api/job/{job.id}/history").json[-1]  # type: ignore[index]
    assert last["moved"] == {"from": "email", "to": "sms"}
    # A type may hold a slash: the rest of the path is the type.
    assert client.put(f"/api/job/{job.id}/type/mail/bulk?force=false").status_code == 200
    assert queue.get_job(job.id).type == "mail/bulk"
    assert client.put(f"/api/job/{job.id}/type/mail/bulk/").status_code == 200  # no change


def test_move_a_running_job_needs_force(
    client: FlaskClient, queue: Queue, held: tuple[Job, threading.Event]
) -> None:
    job, _ = held
    res = client.put(f"/api/job/{job.id}/type/other")
    assert res.status_code == 409 and res.json["error"]  # type: ignore[index]
    assert (queue.get_job(job.id).type, queue.get_job(job.id).state) == ("t", "active")
    res = client.put(f"/api/job/{job.id}/type/other?force=true")
    assert res.status_code == 200
    assert (res.json["job"]["type"], res.json["job"]["state"]) == ("other", "inactive")  # type: ignore[index]


@pytest.mark.parametrize(
    "url",
    ["type/a%00b", "type/" + "x" * 300, "type/%20", "type/sms?force=yes", "type/sms?force=1"],
)
def test_bad_move_requests_change_nothing(
    client: FlaskClient, queue: Queue, r: redis.Redis, prefix: str, url: str
) -> None:
    job = queue.create_job("t").save()
    before = snapshot(r, prefix)
    res = client.put(f"/api/job/{job.id}/{url}")
    assert res.status_code == 400 and res.json["error"]  # type: ignore[index]
    assert not written_since(r, prefix, before)


def test_move_an_unknown_job(client: FlaskClient) -> None:
    assert client.put("/api/job/999999/type/sms").status_code == 404


# -- data ------------------------------------------------------------------------------------
@pytest.mark.parametrize("data", [{"to": "b", "n": [1, 2]}, [1, "two"], "text", 7, None])
def test_replace_the_data_of_a_waiting_job(client: FlaskClient, queue: Queue, data: Any) -> None:
    job = queue.create_job("email", {"to": "a"}).save()
    text = json.dumps(data)  # null too (json=None would send no body)
    res = client.put(f"/api/job/{job.id}/data", data=text, content_type="application/json")
    assert res.status_code == 200
    assert res.json["message"] == f"updated the data of job {job.id}"  # type: ignore[index]
    assert res.json["job"]["data"] == data and queue.get_job(job.id).data == data  # type: ignore[index]
    last = client.get(f"/api/job/{job.id}/history").json[-1]  # type: ignore[index]
    assert (last["state"], last["edited"]) == ("inactive", True)


def test_replace_the_data_of_a_failed_job_then_retry_it(client: FlaskClient, queue: Queue) -> None:
    queue.create_job("t", {"n": 1}).save()
    jid = finish(queue, "t", ok=False)
    assert client.put(f"/api/job/{jid}/data/", json={"n": 2}).status_code == 200
    assert client.put(f"/api/job/{jid}/state/inactive").status_code == 200
    job = queue.get_job(jid)
    assert (job.state, job.data) == ("inactive", {"n": 2})


def test_the_data_of_a_running_or_complete_job_stays(
    client: FlaskClient, queue: Queue, held: tuple[Job, threading.Event]
) -> None:
    job, _ = held
    res = client.put(f"/api/job/{job.id}/data", json={"n": 2})
    assert res.status_code == 409 and res.json["error"]  # type: ignore[index]
    assert queue.get_job(job.id).data == {"n": 1}
    queue.create_job("done").save()
    jid = finish(queue, "done", ok=True)
    assert client.put(f"/api/job/{jid}/data", json={"n": 2}).status_code == 409


@pytest.mark.parametrize(
    ("data", "content_type", "status"),
    [
        ("", "application/json", 400),
        ("", None, 400),
        ("{", "application/json", 400),
        ("[1,", "application/json", 400),
        ('{"n": NaN}', "application/json", 400),
        ('{"n": 2}', "text/plain", 415),
    ],
)
def test_bad_data_requests_change_nothing(
    client: FlaskClient,
    queue: Queue,
    r: redis.Redis,
    prefix: str,
    data: str,
    content_type: str | None,
    status: int,
) -> None:
    job = queue.create_job("t", {"n": 1}).save()
    before = snapshot(r, prefix)
    res = client.put(f"/api/job/{job.id}/data", data=data, content_type=content_type)
    assert res.status_code == status and res.json["error"]  # type: ignore[index]
    assert not written_since(r, prefix, before)


def test_data_larger_than_the_limit_is_refused(redis_url: str, prefix: str, queue: Queue) -> None:
    job = queue.create_job("t", {"n": 1}).save()
    app = create_app({"KUE_REDIS_URL": redis_url, "KUE_PREFIX": prefix, "KUE_MAX_BODY": 1000})
    res = app.test_client().put(f"/api/job/{job.id}/data", json={"text": "x" * 1000})
    assert res.status_code == 413
    assert queue.get_job(job.id).data == {"n": 1}
    close(app)


def test_replace_the_data_of_an_unknown_job(client: FlaskClient) -> None:
    assert client.put("/api/job/999999/data", json={}).status_code == 404


# -- stopping a worker -----------------------------------------------------------------------
@pytest.fixture
def workers(redis_url: str, prefix: str) -> Iterator[Queue]:
    """Another queue object on the test's prefix, to run workers on: what a worker process
    is to the dashboard."""
    q = Queue(redis_url, prefix=prefix)
    yield q
    q.shutdown(1)
    q.close()


@pytest.mark.parametrize("body", [{"timeout": 0.5}, {}, None], ids=["timeout", "{}", "no body"])
def test_stop_a_worker_process(
    client: FlaskClient, queue: Queue, workers: Queue, body: Any
) -> None:
    workers.process("t", lambda job: None)
    worker_id = _worker_id(queue)
    assert worker_id.count(":") == 2  # host:pid:token, and it routes
    url = f"/api/workers/{worker_id}/stop"
    if body is None:
        res = client.post(url, content_type="application/json")
    else:
        res = client.post(url, json=body)
    assert res.status_code == 200
    assert res.json == {"message": f"asked worker {worker_id} to stop"}
    assert wait_for(workers.stopped_remotely.is_set)
    assert queue.workers() == []


def test_a_stopped_worker_lets_its_running_job_finish(
    client: FlaskClient, queue: Queue, workers: Queue
) -> None:
    release = threading.Event()
    job = queue.create_job("t").save()
    workers.process("t", lambda job: release.wait(10) and "finished")
    wait_for(lambda: queue.get_job(job.id).state == "active")
    worker_id = _worker_id(queue)
    res = client.post(f"/api/workers/{worker_id}/stop/", json={"timeout": 30})
    assert res.status_code == 200
    assert not workers.stopped_remotely.is_set()  # waiting for the handler
    release.set()
    assert wait_for(workers.stopped_remotely.is_set)
    done = queue.get_job(job.id)
    assert (done.state, done.result) == ("complete", "finished")


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ('{"timeout": "5"}', "timeout"),
        ('{"timeout": -1}', "timeout"),
        ('{"timeout": true}', "timeout"),
        ('{"timeout": NaN}', "timeout"),
        ('{"timeout": 1e300}', "timeout"),
        ('{"wait": 5}', "unknown field"),
        ("[5]", "JSON object"),
        ("{", ""),
    ],
)
def test_bad_stop_requests_leave_the_worker_running(
    client: FlaskClient, queue: Queue, workers: Queue, data: str, message: str
) -> None:
    workers.process("t", lambda job: None)
    worker_id = _worker_id(queue)
    url = f"/api/workers/{worker_id}/stop"
    res = client.post(url, data=data, content_type="application/json")
    assert res.status_code == 400 and message in res.json["error"]  # type: ignore[index]
    job = queue.create_job("t").save()  # still working
    wait_for(lambda: queue.get_job(job.id).state == "complete")
    assert not workers.stopped_remotely.is_set()


@pytest.mark.parametrize("worker_id", ["nobody", "host:1:0a1b2c3d", "a%0Ab", "%20"])
def test_stop_an_unknown_worker(client: FlaskClient, worker_id: str) -> None:
    res = client.post(f"/api/workers/{worker_id}/stop", json={})
    assert res.status_code == 404 and "worker" in res.json["error"]  # type: ignore[index]


# -- who may ---------------------------------------------------------------------------------
def _control_requests(jid: int, worker_id: str) -> list[tuple[str, str, Any]]:
    return [
        ("POST", f"/api/job/{jid}/promote", {}),
        ("POST", f"/api/job/{jid}/cancel", {"reason": "r"}),
        ("PUT", f"/api/job/{jid}/type/other", None),
        ("PUT", f"/api/job/{jid}/data", {"n": 2}),
        ("POST", f"/api/job/{jid}/retry", {}),
        ("POST", f"/api/workers/{worker_id}/stop", {}),
    ]


def _written_but_beats(r: redis.Redis, queue: Queue, before: Any, worker_id: str) -> dict:
    """What changed under the prefix since ``before``, but for what the worker's own heartbeats
    renew whatever the requests do: its registration and its process's lease."""
    changed = written_since(r, queue.prefix, before)
    for renewed in (queue.keys.worker(worker_id), queue.keys.workers, queue.keys.worker_leases):
        changed.pop(renewed, None)
    return changed


def _app(redis_url: str, prefix: str, **settings: object) -> Flask:
    return create_app({"KUE_REDIS_URL": redis_url, "KUE_PREFIX": prefix, **settings})


def test_read_only_refuses_job_control(
    redis_url: str, prefix: str, queue: Queue, workers: Queue, r: redis.Redis
) -> None:
    jid = queue.create_job("t").save().id
    workers.process("idle", lambda job: None)
    worker_id = _worker_id(queue)
    client = _app(redis_url, prefix, KUE_READONLY="true").test_client()
    before = snapshot(r, prefix)
    for method, url, body in _control_requests(jid, worker_id):
        for slash in ("", "/"):
            res = client.open(url + slash, method=method, json=body)
            assert res.status_code == 405 and "read-only" in res.json["error"], url  # type: ignore[index]
    assert not _written_but_beats(r, queue, before, worker_id)
    assert not workers.stopped_remotely.is_set()


@pytest.mark.parametrize(
    ("setting", "good", "bad"),
    [
        ("basic:admin:pw", "Basic " + base64.b64encode(b"admin:pw").decode(), "Basic eDp5"),
        ("bearer:t0ken", "Bearer t0ken", "Bearer nope"),
    ],
)
def test_job_control_needs_credentials(
    redis_url: str,
    prefix: str,
    queue: Queue,
    workers: Queue,
    r: redis.Redis,
    setting: str,
    good: str,
    bad: str,
) -> None:
    jid = queue.create_job("t").delay(60_000).save().id
    workers.process("idle", lambda job: None)
    worker_id = _worker_id(queue)
    client = _app(redis_url, prefix, KUE_AUTH=setting).test_client()
    before = snapshot(r, prefix)
    requests = _control_requests(jid, worker_id)
    for method, url, body in requests:
        for headers in ({}, {"Authorization": bad}):
            res = client.open(url, method=method, json=body, headers=headers)
            assert res.status_code == 401, (url, headers)
    assert not _written_but_beats(r, queue, before, worker_id)
    for method, url, body in requests:
        res = client.open(url, method=method, json=body, headers={"Authorization": good})
        assert res.status_code == 200, (url, res.json)
    job = queue.get_job(jid)
    assert (job.type, job.data, job.state) == ("other", {"n": 2}, "inactive")  # retried
    assert wait_for(workers.stopped_remotely.is_set)


def test_a_cross_site_page_cannot_control_jobs(
    client: FlaskClient, queue: Queue, r: redis.Redis, prefix: str
) -> None:
    jid = queue.create_job("t").save().id
    before = snapshot(r, prefix)
    foreign = {"Origin": "https://evil.example"}
    for method, url, body in _control_requests(jid, "host:1:0a1b2c3d"):
        res = client.open(url, method=method, json=body, headers=foreign)
        assert res.status_code == 403, url
    # What a form on another site can send: a POST with a form or text body, or none.
    assert client.post(f"/api/job/{jid}/cancel", data={"reason": "r"}).status_code == 415
    assert client.post(f"/api/job/{jid}/cancel").status_code == 415
    text = client.put(f"/api/job/{jid}/data", data='{"n": 2}', content_type="text/plain")
    assert text.status_code == 415
    assert not written_since(r, prefix, before)


def test_the_document_knows_the_longest_reason(client: FlaskClient) -> None:
    doc: dict[str, Any] = client.get("/api/openapi.json").json  # type: ignore[assignment]
    body = doc["paths"]["/job/{id}/cancel"]["post"]["requestBody"]
    schema = body["content"]["application/json"]["schema"]
    assert schema["properties"]["reason"]["maxLength"] == defaults.MAX_REASON
