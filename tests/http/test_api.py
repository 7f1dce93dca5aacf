"""Kue's JSON API through the Flask test client, against the suite's real Redis."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterable
from typing import Any

import pytest
import redis
from flask.testing import FlaskClient

from kue_core import Job, Queue
from kue_http import ConfigError, create_app
from tests.conftest import finish, keys_under, snapshot, written_since


def _post(client: FlaskClient, body: Any) -> Any:
    return client.post("/api/job", json=body)


def test_stats_on_a_fresh_queue(client: FlaskClient) -> None:
    res = client.get("/api/stats")
    assert res.status_code == 200
    assert list(res.json) == [  # type: ignore[arg-type]
        "inactiveCount",
        "activeCount",
        "completeCount",
        "failedCount",
        "delayedCount",
        "blockedCount",
        "pinnedCount",
        "suspendedCount",
        "workTime",
    ]
    assert set(res.json.values()) == {0}  # type: ignore[union-attr]


def test_create_read_and_list(client: FlaskClient) -> None:
    res = _post(client, {"type": "email", "data": {"title": "hi"}, "options": {"priority": "high"}})
    assert res.status_code == 200
    assert res.json == {"message": "job created", "id": res.json["id"]}  # type: ignore[index]
    jid = res.json["id"]  # type: ignore[index]
    job = client.get(f"/api/job/{jid}").json
    assert job["id"] == jid and job["type"] == "email" and job["data"] == {"title": "hi"}  # type: ignore[index]
    assert job["priority"] == -10 and job["state"] == "inactive"  # type: ignore[index]
    assert job["attempts"] == {"made": 0, "remaining": 1, "max": 1}  # type: ignore[index]
    many = _post(client, [{"type": "email"}, {"type": "video", "options": {"delay": 60000}}])
    assert many.status_code == 200 and [j["message"] for j in many.json] == ["job created"] * 2  # type: ignore[union-attr]
    assert client.get("/api/stats").json["inactiveCount"] == 2  # type: ignore[index]
    assert client.get("/api/stats").json["delayedCount"] == 1  # type: ignore[index]
    assert sorted(client.get("/api/job/types").json) == ["email", "video"]  # type: ignore[arg-type]
    everything = client.get("/api/jobs/0..-1").json
    assert [j["id"] for j in everything] == sorted(j["id"] for j in everything)  # type: ignore[union-attr]
    assert len(everything) == 3  # type: ignore[arg-type]
    desc = client.get("/api/jobs/inactive/0..9/desc").json
    assert [j["type"] for j in desc] == ["email", "email"]  # type: ignore[union-attr]
    assert desc[0]["id"] > desc[1]["id"]  # type: ignore[index]
    by_type = client.get("/api/jobs/email/inactive/0..0").json
    assert [j["id"] for j in by_type] == [jid]  # highest priority first  # type: ignore[union-attr]
    assert client.get("/api/jobs/email/inactive/stats").json == {"count": 2}
    assert client.get("/api/jobs/video/delayed/0..9/asc").json[0]["type"] == "video"  # type: ignore[index]
    assert client.get(f"/api/job/{jid}/log").json == []


def test_empty_post_is_204_as_in_kue(client: FlaskClient, r: redis.Redis, prefix: str) -> None:
    assert _post(client, {}).status_code == 204
    assert _post(client, []).status_code == 204
    assert keys_under(r, prefix) == set()


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"data": {}}, "Must provide job type"),
        ({"type": "a\x00b"}, "type"),
        ({"type": 7}, "type"),
        ({"type": "email", "options": {"priority": "urgent"}}, "priority"),
        ({"type": "email", "options": {"attempts": -1}}, "attempts"),
        ({"type": "email", "options": {"atempts": 3}}, "unknown option 'atempts'"),
        ({"type": "email", "options": {"backoff": "function(){}"}}, "backoff"),
        ({"type": "email", "options": []}, "options"),
        ({"type": "email", "extra": 1}, "unknown field"),
        ("just a string", "JSON object"),
    ],
)
def test_bad_jobs_are_refused_and_nothing_is_written(
    client: FlaskClient, r: redis.Redis, prefix: str, body: Any, message: str
) -> None:
    before = snapshot(r, prefix)
    res = _post(client, body)
    assert res.status_code == 400, res.json
    assert message in res.json["error"]  # type: ignore[index]
    assert not written_since(r, prefix, before)


def test_an_array_is_answered_in_its_places_and_its_valid_jobs_saved(
    client: FlaskClient, queue: Queue, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As Kue: a result in each element's place, the valid jobs saved, 400 if any was refused."""
    bad_attempts = {"type": "c", "options": {"attempts": -1}}
    refusal = _post(client, bad_attempts).json["error"]  # type: ignore[index]
    saved: list[list[str]] = []
    save_many = Queue.save_many

    def spy(self: Queue, jobs: Iterable[Job]) -> list[Job]:
        batch = list(jobs)
        saved.append([j.type for j in batch])
        return save_many(self, batch)

    monkeypatch.setattr(Queue, "save_many", spy)
    res = _post(
        client,
        [{"type": "a"}, {"data": {}}, {"type": "b", "options": {"delay": 60000}}, 7, bad_attempts],
    )
    assert res.status_code == 400
    assert res.json == [
        {"message": "job created", "id": 1},
        {"error": "Must provide job type"},
        {"message": "job created", "id": 2},
        {"error": "a job is a JSON object with type, data and options"},
        {"error": refusal},
    ]
    assert saved == [["a", "b"]]  # one call, in order
    assert queue.get_job(1).type == "a" and queue.get_job(2).state == "delayed"
    assert queue.counts()["inactive"] == 1 and sorted(queue.types()) == ["a", "b"]


def test_an_array_of_refused_jobs_writes_nothing(
    client: FlaskClient, r: redis.Redis, prefix: str
) -> None:
    before = snapshot(r, prefix)
    res = _post(client, [{"type": ""}, {"type": "t", "extra": 1}])
    assert res.status_code == 400
    assert res.json == [
        {"error": "Must provide job type"},
        {"error": "unknown field(s): extra"},
    ]
    assert not written_since(r, prefix, before)


def test_an_array_of_valid_jobs_is_all_created(client: FlaskClient, queue: Queue) -> None:
    res = _post(client, [{"type": "a"}, {"type": "b"}, {"type": "a"}])
    assert res.status_code == 200
    assert res.json == [{"message": "job created", "id": i} for i in (1, 2, 3)]
    assert [queue.get_job(i).type for i in (1, 2, 3)] == ["a", "b", "a"]


def test_malformed_wrong_type_and_oversized_bodies(
    client: FlaskClient, r: redis.Redis, prefix: str
) -> None:
    res = client.post("/api/job", data="{not json", content_type="application/json")
    assert res.status_code == 400 and res.is_json
    assert res.json["error"] == (  # type: ignore[index]
        "the body is not valid JSON: Expecting property name enclosed in double quotes: "
        "line 1 column 2 (char 1)"
    )
    res = client.post("/api/job", data="[" * 100_000, content_type="application/json")
    assert res.status_code == 400 and "nested too deeply" in res.json["error"]  # type: ignore[index]
    res = client.post("/api/job", data=json.dumps({"type": "x"}), content_type="text/plain")
    assert res.status_code == 415 and res.is_json
    big = json.dumps({"type": "x", "data": {"blob": "x" * (2 * 1024 * 1024)}})
    res = client.post("/api/job", data=big, content_type="application/json")
    assert res.status_code == 413 and res.is_json
    assert keys_under(r, prefix) == set()


@pytest.mark.parametrize(
    ("path", "status"),
    [
        ("/api/job/abc", 400),
        ("/api/job/0", 400),
        ("/api/job/-3", 400),
        ("/api/job/99999999999999999999", 400),
        ("/api/job/987654", 404),
        ("/api/job/987654/log", 404),
        ("/api/jobs/a..b", 400),
        ("/api/jobs/0..99999999999999999999", 400),
        ("/api/jobs/bogus/0..9", 400),
        ("/api/jobs/0..9/sideways", 400),
        ("/api/jobs/email/bogus/0..9", 400),
        ("/api/jobs/email/bogus/stats", 400),
        ("/api/jobs/a\x00b/inactive/0..9", 400),
        ("/api/jobs/x/y/z/w/v", 400),
        ("/api/nothing-here", 404),
    ],
)
def test_bad_reads_answer_json_errors(client: FlaskClient, path: str, status: int) -> None:
    res = client.get(path)
    assert res.status_code == status and res.is_json and res.json["error"]  # type: ignore[index]


def test_a_window_larger_than_a_page_is_refused(client: FlaskClient) -> None:
    _post(client, [{"type": "t"} for _ in range(60)])
    assert len(client.get("/api/jobs/0..49").json) == 50  # type: ignore[arg-type]
    res = client.get("/api/jobs/0..-1")
    assert res.status_code == 400 and "at most 50" in res.json["error"]  # type: ignore[index]


def test_change_state_priority_and_remove(client: FlaskClient) -> None:
    jid = _post(client, {"type": "email"}).json["id"]  # type: ignore[index]
    assert client.put(f"/api/job/{jid}/state/failed").json == {"message": "updated state"}
    assert client.get(f"/api/job/{jid}").json["state"] == "failed"  # type: ignore[index]
    res = client.put(f"/api/job/{jid}/state/active")
    assert res.status_code == 409 and "worker" in res.json["error"]  # type: ignore[index]
    assert client.put(f"/api/job/{jid}/state/bogus").status_code == 400
    assert client.put("/api/job/987654/state/failed").status_code == 404
    assert client.put(f"/api/job/{jid}/priority/-7").json == {"message": "updated priority"}
    assert client.get(f"/api/job/{jid}").json["priority"] == -7  # type: ignore[index]
    assert client.put(f"/api/job/{jid}/priority/critical").status_code == 200
    assert client.get(f"/api/job/{jid}").json["priority"] == -15  # type: ignore[index]
    assert client.put(f"/api/job/{jid}/priority/urgent").status_code == 400
    assert client.delete(f"/api/job/{jid}").json == {
        "message": f"job {jid} removed",
        "removed": [jid],
    }
    assert client.get(f"/api/job/{jid}").status_code == 404
    assert client.delete(f"/api/job/{jid}").status_code == 404
    assert client.get(f"/api/job/{jid}").json == {"error": f'job "{jid}" doesnt exist'}


def test_wrong_method_is_405_json(client: FlaskClient) -> None:
    res = client.post("/api/stats")
    assert res.status_code == 405 and res.is_json


def test_unreachable_redis_answers_503_quickly() -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    app = create_app({"KUE_REDIS_URL": f"redis://127.0.0.1:{port}/0", "KUE_REDIS_TIMEOUT": 1})
    started = time.monotonic()
    res = app.test_client().get("/api/stats")
    assert res.status_code == 503 and "Redis" in res.json["error"]  # type: ignore[index]
    assert time.monotonic() - started < 10


def test_settings_come_from_the_argument_then_the_environment(
    monkeypatch: pytest.MonkeyPatch, redis_url: str, prefix: str
) -> None:
    monkeypatch.setenv("KUE_REDIS_URL", redis_url)
    monkeypatch.setenv("KUE_PREFIX", "from-env")
    monkeypatch.setenv("KUE_API_PREFIX", "/kue")
    app = create_app({"KUE_PREFIX": prefix})
    assert app.config["KUE_PREFIX"] == prefix and app.config["KUE_API_PREFIX"] == "/kue"
    assert app.test_client().get("/kue/stats").status_code == 200
    monkeypatch.setenv("KUE_READONLY", "maybe")
    with pytest.raises(ConfigError, match="KUE_READONLY"):
        create_app()


def test_unicode_and_nul_bytes_in_data_round_trip(client: FlaskClient) -> None:
    data = {"title": "größe 🚀 \u0000 end", "ключ": ["\x00", "\u2028", "<b>"]}
    res = _post(client, {"type": "emails ✉", "data": data})
    assert res.status_code == 200
    job = client.get(f"/api/job/{res.json['id']}").json  # type: ignore[index]
    assert job["type"] == "emails ✉" and job["data"] == data  # type: ignore[index]
    assert client.get("/api/jobs/emails ✉/inactive/0..9").json[0]["data"] == data  # type: ignore[index]


def test_lone_surrogates(client: FlaskClient, r: redis.Redis, prefix: str) -> None:
    # In data, JSON's escape is kept as it came and reads back the same.
    res = client.post(
        "/api/job", data='{"type": "t", "data": {"s": "\\ud800"}}', content_type="application/json"
    )
    assert res.status_code == 200
    assert client.get(f"/api/job/{res.json['id']}").json["data"] == {"s": "\ud800"}  # type: ignore[index]
    # A type is part of Redis key names, which must be valid UTF-8.
    before = snapshot(r, prefix)
    res = client.post("/api/job", data='{"type": "\\udfff"}', content_type="application/json")
    assert res.status_code == 400 and "type" in res.json["error"]  # type: ignore[index]
    assert not written_since(r, prefix, before)


def test_listings_by_finish_time(client: FlaskClient, queue: Queue) -> None:
    """``?by=finished``: complete or failed jobs in the order they finished (ties by id), a
    window of ranks from 0, not sorted by id after."""
    low = queue.create_job("a").priority("low").save()
    high = queue.create_job("b").priority("high").save()
    assert [finish(queue, t, ok=True) for t in ("b", "a")] == [high.id, low.id]
    index = queue.keys.finished("complete")
    scores = {j: queue.client.zscore(index, f"01|{j}") for j in (high.id, low.id)}
    oldest = sorted((high.id, low.id), key=lambda j: (scores[j], j))

    def ids(url: str) -> list[int]:
        res = client.get(url)
        assert res.status_code == 200, res.json
        return [j["id"] for j in res.json]  # type: ignore[union-attr]

    assert ids("/api/jobs/complete/0..9?by=finished") == oldest
    assert ids("/api/jobs/complete/0..9/desc?by=finished") == oldest[::-1]
    assert ids("/api/jobs/complete/1..1/asc?by=finished") == oldest[1:]
    assert ids("/api/jobs/a/complete/0..9/desc?by=finished") == [low.id]
    assert ids("/api/jobs/complete/0..9?by=queue") == sorted((high.id, low.id))  # Kue's
    for url, wanted in (
        ("/api/jobs/inactive/0..9?by=finished", "finish time"),
        ("/api/jobs/complete/-2..-1?by=finished", "ranks from 0"),
        ("/api/jobs/complete/5..1?by=finished", "ranks from 0"),
        ("/api/jobs/complete/0..9/sideways?by=finished", "asc or desc"),
        ("/api/jobs/0..9?by=finished", "by=finished lists"),
        ("/api/jobs/complete/0..9?by=end", "by is queue or finished"),
        ("/api/jobs/complete/0..99999?by=finished", "more than"),
    ):
        res = client.get(url)
        assert res.status_code == 400 and wanted in res.json["error"], url  # type: ignore[index]
