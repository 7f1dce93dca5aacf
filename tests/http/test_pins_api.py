"""Pinning over the JSON API: options.only on POST /job saves a job that waits pinned for
those workers, the job's JSON carries its workers, the pinned state has its counts and
listings as any state, and a bad list is answered 400 with nothing written; the answers match
the OpenAPI document."""

from __future__ import annotations

from typing import Any

import pytest
import redis
from flask.testing import FlaskClient

from kue_core import Queue
from kue_core.store import calls
from kue_core.store.calls import PINS
from tests.conftest import keys_under
from tests.http.documented import Documented


def test_post_job_with_only_saves_a_pinned_job(client: FlaskClient, queue: Queue) -> None:
    res = client.post("/api/job", json={"type": "render", "options": {"only": ["gpu-1"]}})
    assert res.status_code == 200, res.json
    job = client.get(f"/api/job/{res.json['id']}").json
    assert job["only"] == ["gpu-1"] and job["state"] == "pinned"
    assert client.get("/api/stats").json["pinnedCount"] == 1
    listed = client.get("/api/jobs/render/pinned/0..10/asc").json
    assert [j["id"] for j in listed] == [res.json["id"]]
    plain = client.post("/api/job", json={"type": "render"}).json
    assert "only" not in client.get(f"/api/job/{plain['id']}").json
    assert (
        queue.scripts.call(calls.claim(queue.keys, "render", "gpu-1", 30_000))[0] == res.json["id"]
    )


@pytest.mark.parametrize(
    ("only", "says"),
    [
        ([], "at least one"),
        ("gpu-1", "list"),
        (["gpu 1"], "worker id"),
        ([7], "worker id"),
        ([f"w{i}" for i in range(65)], "at most"),
        (None, "list"),
    ],
)
def test_a_bad_only_writes_nothing(
    client: FlaskClient, r: redis.Redis, prefix: str, only: Any, says: str
) -> None:
    res = client.post("/api/job", json={"type": "render", "options": {"only": only}})
    assert res.status_code == 400 and says in res.json["error"], res.json
    assert keys_under(r, prefix) == set()


def test_a_pinned_job_cannot_be_put_in_pinned_by_hand_unless_it_has_workers(
    client: FlaskClient,
) -> None:
    plain = client.post("/api/job", json={"type": "render"}).json["id"]
    res = client.put(f"/api/job/{plain}/state/pinned")
    assert res.status_code == 409, res.json
    pinned = client.post("/api/job", json={"type": "t", "options": {"only": ["a"]}}).json["id"]
    assert client.put(f"/api/job/{pinned}/state/inactive").status_code == 200
    assert client.get(f"/api/job/{pinned}").json["state"] == "pinned"


def test_the_answers_match_the_openapi_document(client: FlaskClient) -> None:
    check = Documented(client)
    created = check("post", "/api/job", "/job", json={"type": "t", "options": {"only": ["a"]}})
    check("post", "/api/job", "/job", 400, json={"type": "t", "options": {"only": []}})
    check("get", f"/api/job/{created['id']}", "/job/{id}")
    check("get", "/api/stats", "/stats")


def test_put_only_changes_who_may_run_a_job(client: FlaskClient, queue: Queue) -> None:
    jid = client.post("/api/job", json={"type": "render"}).json["id"]
    res = client.put(f"/api/job/{jid}/only", json={"workers": ["gpu-1", "gpu-2"]})
    assert res.status_code == 200, res.json
    assert res.json["message"] == f"job {jid} runs on gpu-1, gpu-2"
    assert res.json["job"]["state"] == "pinned" and res.json["job"]["only"] == ["gpu-1", "gpu-2"]
    assert queue.scripts.call(calls.claim(queue.keys, "render", "cpu-1", 30_000)) in (None, PINS)
    res = client.put(f"/api/job/{jid}/only", json={"workers": None})
    assert res.json["message"] == f"job {jid} runs on any worker"
    assert res.json["job"]["state"] == "inactive" and "only" not in res.json["job"]
    assert queue.scripts.call(calls.claim(queue.keys, "render", "cpu-1", 30_000))[0] == jid  # type: ignore[index]


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ({}, "workers"),
        ({"workers": []}, "at least one worker"),
        ({"workers": ["a", "a"]}, "distinct"),
        ({"workers": ["bad id"]}, "worker id"),
        ({"workers": ["a"], "more": 1}, "unknown field"),
        ([], "JSON object"),
    ],
)
def test_a_bad_put_only_changes_nothing(
    client: FlaskClient, queue: Queue, body: Any, says: str
) -> None:
    jid = client.post("/api/job", json={"type": "render", "options": {"only": ["w1"]}}).json["id"]
    before = queue.client.hgetall(queue.keys.job(jid))
    res = client.put(f"/api/job/{jid}/only", json=body)
    assert res.status_code == 400 and says in res.json["error"], res.json
    assert queue.client.hgetall(queue.keys.job(jid)) == before
    assert client.put("/api/job/999/only", json={"workers": None}).status_code == 404


def test_post_job_with_prefer(client: FlaskClient, queue: Queue) -> None:
    old = client.post("/api/job", json={"type": "render"}).json["id"]
    body = {"type": "render", "options": {"prefer": ["gpu-1"]}}
    jid = client.post("/api/job", json=body).json["id"]
    job = client.get(f"/api/job/{jid}").json
    assert job["prefer"] == ["gpu-1"] and job["state"] == "inactive"
    assert queue.scripts.call(calls.claim(queue.keys, "render", "gpu-1", 30_000))[0] == jid  # type: ignore[index]
    assert queue.scripts.call(calls.claim(queue.keys, "render", "cpu-1", 30_000))[0] == old  # type: ignore[index]
    both = {"type": "render", "options": {"prefer": ["a"], "only": ["b"]}}
    assert client.post("/api/job", json=both).status_code == 400


def test_put_only_and_prefer_match_the_openapi_document(client: FlaskClient) -> None:
    check = Documented(client)
    created = check("post", "/api/job", "/job", json={"type": "t", "options": {"prefer": ["a"]}})
    plain = check("post", "/api/job", "/job", json={"type": "t"})
    url = f"/api/job/{plain['id']}/only"
    check("put", url, "/job/{id}/only", json={"workers": ["a"]})
    check("put", url, "/job/{id}/only", 400, json={"workers": []})
    check("get", f"/api/job/{created['id']}", "/job/{id}")
