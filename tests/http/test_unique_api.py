"""Unique jobs over REST (``options.unique`` of ``POST /api/job``), through the Flask test
client against the suite's real Redis: a duplicate saves nothing and is answered
``job deduplicated`` with the id of the job holding the key."""

from __future__ import annotations

from typing import Any

import pytest
import redis
from flask.testing import FlaskClient

from kue_core import Queue
from tests.conftest import finish, keys_under


def _post(client: FlaskClient, body: Any) -> Any:
    return client.post("/api/job", json=body)


def _unique(unique: Any, data: Any = None, **options: Any) -> dict[str, Any]:
    return {"type": "t", "data": data or {}, "options": {"unique": unique, **options}}


def _count(client: FlaskClient) -> int:
    stats = client.get("/api/stats").json
    return sum(v for k, v in stats.items() if k.endswith("Count"))  # type: ignore[union-attr]


def test_a_duplicate_is_answered_with_the_first_job(client: FlaskClient) -> None:
    first = _post(client, _unique({"key": "order:42"}, {"n": 1}))
    assert first.status_code == 200
    jid = first.json["id"]
    assert first.json == {"message": "job created", "id": jid}
    again = _post(client, _unique({"key": "order:42"}, {"n": 2}))
    assert again.status_code == 200
    assert again.json == {"message": "job deduplicated", "id": jid}
    assert _count(client) == 1
    job = client.get(f"/api/job/{jid}").json
    assert job["data"] == {"n": 1}  # until_done: the duplicate changed nothing
    assert job["unique"] == {"key": "order:42", "mode": "until_done"}
    other = _post(client, _unique({"key": "order:43"}))
    assert other.json["message"] == "job created" and other.json["id"] != jid
    assert client.get(f"/api/job/{other.json['id']}").json["unique"]["key"] == "order:43"
    no_key = client.get(f"/api/job/{_post(client, {'type': 't'}).json['id']}").json
    assert "unique" not in no_key


def test_the_key_is_free_again_once_the_job_is_done(client: FlaskClient, queue: Queue) -> None:
    jid = _post(client, _unique({"key": "k", "mode": "until_done"})).json["id"]
    assert finish(queue, "t", ok=True) == jid
    again = _post(client, _unique({"key": "k"}))
    assert again.json["message"] == "job created" and again.json["id"] != jid


def test_an_array_with_two_jobs_of_one_key(client: FlaskClient) -> None:
    res = _post(client, [_unique({"key": "k"}, {"n": 1}), _unique({"key": "k"}, {"n": 2})])
    assert res.status_code == 200
    first, second = res.json
    assert first == {"message": "job created", "id": first["id"]}
    assert second == {"message": "job deduplicated", "id": first["id"]}
    assert _count(client) == 1


def test_an_array_mixes_created_deduplicated_and_refused(client: FlaskClient) -> None:
    jid = _post(client, _unique({"key": "k"})).json["id"]
    res = _post(client, [_unique({"key": "k"}), _unique({"key": ""}), {"type": "t"}])
    assert res.status_code == 400
    dup, bad, plain = res.json
    assert dup == {"message": "job deduplicated", "id": jid}
    assert set(bad) == {"error"} and bad["error"]
    assert plain["message"] == "job created"
    assert _count(client) == 2


def test_throttle_holds_the_key_for_its_ttl(client: FlaskClient, queue: Queue) -> None:
    unique = {"key": "mail:ann", "mode": "throttle", "ttl": 60_000}
    jid = _post(client, _unique(unique)).json["id"]
    assert client.get(f"/api/job/{jid}").json["unique"] == {"key": "mail:ann", "mode": "throttle"}
    assert finish(queue, "t", ok=True) == jid
    again = _post(client, _unique(unique))  # finished, but within the ttl
    assert again.json == {"message": "job deduplicated", "id": jid}


def test_debounce_replaces_a_delayed_jobs_data(client: FlaskClient) -> None:
    unique = {"key": "reindex", "mode": "debounce"}
    jid = _post(client, _unique(unique, {"n": 1}, delay=60_000)).json["id"]
    due = client.get(f"/api/job/{jid}").json["promote_at"]
    again = _post(client, _unique(unique, {"n": 2}, delay=120_000))
    assert again.json == {"message": "job deduplicated", "id": jid}
    job = client.get(f"/api/job/{jid}").json
    assert job["data"] == {"n": 2} and job["promote_at"] > due and job["state"] == "delayed"
    assert _count(client) == 1


@pytest.mark.parametrize(
    "unique",
    [
        "order:42",
        ["order:42"],
        None,
        7,
        {},
        {"mode": "until_done"},
        {"key": "k", "extra": 1},
        {"key": "k", "ttl": 1000, "keys": "x"},
        {"key": ""},
        {"key": 7},
        {"key": None},
        {"key": "a\x00b"},
        {"key": "a\nb"},
        {"key": "jobs"},
        {"key": "k" * 201},
        {"key": "k", "mode": "bogus"},
        {"key": "k", "mode": None},
        {"key": "k", "mode": 1},
        {"key": "k", "ttl": 0},
        {"key": "k", "ttl": -5},
        {"key": "k", "ttl": "1000"},
        {"key": "k", "ttl": True},
        {"key": "k", "ttl": 0.5},
        {"key": "k", "ttl": 10**15 + 1},
        {"key": "k", "mode": "throttle"},
        {"key": "k", "mode": "throttle", "ttl": None},
        {"key": "k", "mode": "reuse", "ttl": 1000},
    ],
)
def test_a_bad_unique_is_refused_and_nothing_saved(
    client: FlaskClient, r: redis.Redis, prefix: str, unique: Any
) -> None:
    res = _post(client, _unique(unique))
    assert res.status_code == 400, res.json
    assert set(res.json) == {"error"} and res.json["error"]
    assert keys_under(r, prefix) == set()


def test_the_longest_key_and_every_mode_are_accepted(client: FlaskClient) -> None:
    for i, unique in enumerate(
        [
            {"key": "k" * 200},
            {"key": "a", "mode": "until_done", "ttl": 60_000},
            {"key": "b", "mode": "throttle", "ttl": 1},
            {"key": "c", "mode": "debounce"},
            {"key": "d", "mode": "reuse"},
            {"key": "e <b>é</b>", "ttl": None},
        ]
    ):
        res = _post(client, _unique(unique))
        assert res.status_code == 200 and res.json["message"] == "job created", (i, res.json)
        mode = unique.get("mode", "until_done")
        job = client.get(f"/api/job/{res.json['id']}").json
        assert job["unique"] == {"key": unique["key"], "mode": mode}
