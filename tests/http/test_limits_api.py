"""Flow control over the JSON API: PUT /limits/{type} sets the limits given (null removes one,
the others kept), GET /limits and /limits/{type} read them with whether they hold the type
back right now, DELETE removes them; GET /groups/{type} lists the groups in their turn,
paginated; options.group on POST /job saves a grouped job. Bad input is answered 400 with
nothing written; writes are guarded as the others; the answers match the OpenAPI document."""

from __future__ import annotations

from typing import Any

import pytest
import redis
from flask.testing import FlaskClient

from kue_core import Queue
from kue_core.store import calls
from kue_http import create_app
from tests.conftest import snapshot, written_since
from tests.http.documented import Documented

RATE = {"max": 10, "perMs": 60_000}
NONE = {"rate": None, "concurrency": None, "groupRate": None, "groupConcurrency": None}


def _put(client: FlaskClient, job_type: str, body: Any) -> Any:
    return client.put(f"/api/limits/{job_type}", json=body)


def _save(queue: Queue, job_type: str, group: str | None = None, n: int = 1) -> list[int]:
    jobs = [queue.create_job(job_type, {"n": i}) for i in range(n)]
    if group is not None:
        jobs = [job.group(group) for job in jobs]
    queue.save_many(jobs)
    return [job.id for job in jobs]  # type: ignore[misc]


def test_limits_are_set_read_kept_and_removed(client: FlaskClient, queue: Queue) -> None:
    assert client.get("/api/limits").json == {"limits": {}}
    res = _put(client, "email", {"rate": RATE, "concurrency": 4})
    assert res.status_code == 200, res.json
    entry = res.json
    assert {k: entry[k] for k in NONE} == {**NONE, "rate": RATE, "concurrency": 4}
    assert entry["heldUntil"] is None
    assert entry["status"] == {
        "held": None,
        "waitMs": None,
        "active": 0,
        "waiting": 0,
        "startedInWindow": 0,
    }
    assert queue.limits()["email"]["rate"] == (10, 60_000)
    # Keys not given are kept; null removes one.
    group = {"groupRate": {"max": 2, "perMs": 1000}, "groupConcurrency": 1}
    entry = _put(client, "email", group).json
    assert (entry["rate"], entry["concurrency"]) == (RATE, 4)
    assert (entry["groupRate"], entry["groupConcurrency"]) == ({"max": 2, "perMs": 1000}, 1)
    entry = _put(client, "email", {"rate": None}).json
    assert entry["rate"] is None and entry["concurrency"] == 4
    assert entry["status"]["startedInWindow"] is None  # no rate, no window
    assert queue.limits()["email"]["rate"] is None
    _put(client, "sms", {"concurrency": 1})
    listed = client.get("/api/limits").json["limits"]
    assert list(listed) == ["email", "sms"]
    assert listed["email"] == entry == client.get("/api/limits/email").json
    # What is read can be sent back.
    again = _put(client, "email", {k: listed["email"][k] for k in NONE})
    assert again.status_code == 200 and again.json == entry
    res = client.delete("/api/limits/email")
    assert res.status_code == 200 and res.json == {"message": "limits of email removed"}
    assert list(client.get("/api/limits").json["limits"]) == ["sms"]
    assert "email" not in queue.limits()
    unset = client.get("/api/limits/never-limited").json  # a type without limits
    assert {k: unset[k] for k in NONE} == NONE and unset["status"]["waiting"] == 0


def test_removing_every_limit_with_nulls_drops_the_type(client: FlaskClient) -> None:
    _put(client, "t", {"concurrency": 2})
    res = _put(client, "t", {"concurrency": None})
    assert res.status_code == 200 and res.json["concurrency"] is None
    assert client.get("/api/limits").json == {"limits": {}}
    assert client.delete("/api/limits/nothing-here").status_code == 200  # nothing to remove


def test_status_while_held_by_the_concurrency_cap(client: FlaskClient, queue: Queue) -> None:
    _save(queue, "capped", n=3)
    _put(client, "capped", {"concurrency": 1})
    claimed = queue.scripts.call(calls.claim(queue.keys, "capped", "w1", 30_000))
    assert claimed is not None
    status = client.get("/api/limits").json["limits"]["capped"]["status"]
    assert status == {
        "held": "concurrency",
        "waitMs": None,
        "active": 1,
        "waiting": 2,
        "startedInWindow": None,
    }
    _put(client, "capped", {"concurrency": 2})  # room again: not held
    assert client.get("/api/limits/capped").json["status"]["held"] is None


def test_status_while_held_by_the_rate(client: FlaskClient, queue: Queue) -> None:
    _save(queue, "rated", n=2)
    _put(client, "rated", {"rate": {"max": 1, "perMs": 600_000}})
    assert queue.scripts.call(calls.claim(queue.keys, "rated", "w1", 30_000)) is not None
    status = client.get("/api/limits/rated").json["status"]
    assert status["held"] == "rate" and status["startedInWindow"] == 1
    assert 0 < status["waitMs"] <= 600_000
    assert (status["active"], status["waiting"]) == (1, 1)
    queue.pause("rated")
    assert client.get("/api/limits/rated").json["status"]["held"] == "paused"
    client.delete("/api/limits/rated")
    assert client.get("/api/limits/rated").json["status"]["held"] == "paused"  # still paused
    queue.resume("rated")
    assert client.get("/api/limits/rated").json["status"]["held"] is None


def test_groups_are_listed_in_their_turn_and_paginated(client: FlaskClient, queue: Queue) -> None:
    assert client.get("/api/groups/report").json == {"total": 0, "groups": []}
    _save(queue, "report", "acme", 3)
    _save(queue, "report", "globex", 1)
    _save(queue, "report", "initech", 2)
    _save(queue, "report")  # in no group: not a group
    res = client.get("/api/groups/report")
    assert res.status_code == 200, res.json
    assert res.json == {
        "total": 3,
        "groups": [
            {"group": "acme", "waiting": 3, "active": 0},
            {"group": "globex", "waiting": 1, "active": 0},
            {"group": "initech", "waiting": 2, "active": 0},
        ],
    }
    assert res.json == queue.groups("report")
    started = [
        queue.scripts.call(calls.claim(queue.keys, "report", "w1", 30_000)) for _ in range(3)
    ]
    grouped = [claim[1].get("group") for claim in started if claim]  # type: ignore[index]
    assert len(grouped) == 3
    listed = client.get("/api/groups/report").json
    assert listed == queue.groups("report") and listed["total"] == 3
    rows = listed["groups"]
    assert sum(row["waiting"] + row["active"] for row in rows) == 6
    assert sum(row["active"] for row in rows) == len([g for g in grouped if g])
    # Those with jobs waiting first, in their turn; then those with only running jobs.
    waiting = [row["waiting"] > 0 for row in rows]
    assert waiting == sorted(waiting, reverse=True)
    page = client.get("/api/groups/report?offset=1&count=1").json
    assert page == {"total": listed["total"], "groups": listed["groups"][1:2]}
    assert client.get("/api/groups/report?offset=5").json["groups"] == []
    assert client.get("/api/groups/report/?count=1000").status_code == 200


@pytest.mark.parametrize(
    ("query", "says"),
    [
        ("offset=-1", "offset"),
        ("offset=x", "offset"),
        ("count=0", "count"),
        ("count=1001", "count"),
        ("count=1.5", "count"),
    ],
)
def test_a_bad_page_of_groups_is_refused(client: FlaskClient, query: str, says: str) -> None:
    res = client.get(f"/api/groups/report?{query}")
    assert res.status_code == 400 and says in res.json["error"], res.json


def test_post_job_with_a_group(client: FlaskClient, queue: Queue) -> None:
    res = client.post("/api/job", json={"type": "mail", "options": {"group": "tenant-42"}})
    assert res.status_code == 200, res.json
    job = client.get(f"/api/job/{res.json['id']}").json
    assert job["group"] == "tenant-42"
    assert queue.get_job(res.json["id"]).group() == "tenant-42"
    plain = client.post("/api/job", json={"type": "mail"}).json
    assert "group" not in client.get(f"/api/job/{plain['id']}").json
    many = client.post(
        "/api/job",
        json=[
            {"type": "mail", "options": {"group": "a", "priority": "high"}},
            {"type": "mail", "options": {"group": ""}},
            {"type": "mail", "options": {"group": "b"}},
        ],
    )
    assert many.status_code == 400  # the refused one; the others are saved
    assert "group" in many.json[1]["error"]
    assert [client.get(f"/api/job/{many.json[i]['id']}").json["group"] for i in (0, 2)] == [
        "a",
        "b",
    ]
    groups = client.get("/api/groups/mail").json
    assert [g["group"] for g in groups["groups"]] == ["tenant-42", "a", "b"]


@pytest.mark.parametrize(
    ("group", "says"),
    [("", "group"), ("x" * 201, "group"), ("a\nb", "control"), (42, "group"), (None, "group")],
)
def test_a_bad_group_writes_nothing(
    client: FlaskClient, r: redis.Redis, prefix: str, group: Any, says: str
) -> None:
    before = snapshot(r, prefix)
    res = client.post("/api/job", json={"type": "mail", "options": {"group": group}})
    assert res.status_code == 400 and says in res.json["error"], res.json
    assert not written_since(r, prefix, before)


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ({}, "at least one"),
        ([{"concurrency": 1}], "object"),
        ("fast", "object"),
        (0, "object"),
        ({"colour": 1}, "colour"),
        ({"concurrency": 1, "group_rate": RATE}, "group_rate"),
        ({"rate": 5}, "rate"),
        ({"rate": [10, 1000]}, "rate"),
        ({"rate": {"max": 1}}, "rate"),
        ({"rate": {"max": 1, "perMs": 1000, "burst": 2}}, "rate"),
        ({"rate": {"max": 0, "perMs": 1000}}, "max_jobs"),
        ({"rate": {"max": 1, "perMs": 0}}, "per_ms"),
        ({"rate": {"max": "1", "perMs": 1000}}, "max_jobs"),
        ({"groupRate": {"max": 1, "perMs": -5}}, "per_ms"),
        ({"rate": RATE, "concurrency": 0}, "concurrency"),
        ({"concurrency": "2"}, "concurrency"),
        ({"concurrency": True}, "concurrency"),
        ({"concurrency": 1.5}, "concurrency"),
        ({"groupConcurrency": 10**10}, "group_concurrency"),
    ],
)
def test_bad_limits_write_nothing(
    client: FlaskClient, r: redis.Redis, prefix: str, body: Any, says: str
) -> None:
    _put(client, "kept", {"rate": RATE})
    before = snapshot(r, prefix)
    for job_type in ("kept", "new"):
        res = client.put(f"/api/limits/{job_type}", json=body)
        assert res.status_code == 400 and says in res.json["error"], res.json
        assert set(res.json) == {"error"}
    assert not written_since(r, prefix, before)


def test_a_bad_type_is_refused(client: FlaskClient, r: redis.Redis, prefix: str) -> None:
    before = snapshot(r, prefix)
    for job_type in ("%20", "x" * 257, "tab%09", "unique"):
        assert _put(client, job_type, {"concurrency": 1}).status_code == 400, job_type
        assert client.delete(f"/api/limits/{job_type}").status_code == 400, job_type
        assert client.get(f"/api/limits/{job_type}").status_code == 400, job_type
        assert client.get(f"/api/groups/{job_type}").status_code == 400, job_type
    assert not written_since(r, prefix, before)


def test_limit_writes_are_guarded_as_the_others(
    redis_url: str, client: FlaskClient, r: redis.Redis, prefix: str
) -> None:
    _put(client, "t", {"concurrency": 2})
    before = snapshot(r, prefix)
    res = client.put("/api/limits/t", data='{"concurrency": 1}', content_type="text/plain")
    assert res.status_code == 415
    evil = {"Origin": "https://evil.example"}
    assert client.put("/api/limits/t", json={"concurrency": 1}, headers=evil).status_code == 403
    assert client.delete("/api/limits/t", headers=evil).status_code == 403
    res = client.post("/api/job", json={"type": "t", "options": {"group": "g"}}, headers=evil)
    assert res.status_code == 403
    readonly = create_app(
        {"KUE_REDIS_URL": redis_url, "KUE_PREFIX": prefix, "KUE_READONLY": True}
    ).test_client()
    assert readonly.put("/api/limits/t", json={"concurrency": 1}).status_code == 405
    assert readonly.delete("/api/limits/t").status_code == 405
    assert readonly.get("/api/limits").json["limits"]["t"]["concurrency"] == 2
    assert readonly.get("/api/limits/t").status_code == 200
    assert readonly.get("/api/groups/t").status_code == 200
    assert not written_since(r, prefix, before)


# -- the document -------------------------------------------------------------------------
def test_answers_match_the_openapi_document(client: FlaskClient, queue: Queue) -> None:
    check = Documented(client)
    doc, jsonschema_rs = check.doc, check.jsonschema_rs

    def valid(name: str, payload: Any) -> bool:
        schema = doc["components"]["schemas"][name]
        validator = jsonschema_rs.validator_for({**schema, "components": doc["components"]})
        return bool(validator.is_valid(payload))

    assert valid("NewLimits", {"rate": RATE, "concurrency": None})
    assert valid("NewLimits", NONE)
    assert not valid("NewLimits", {})
    assert not valid("NewLimits", {"rate": {"max": 1}})
    assert not valid("NewLimits", {"group_rate": RATE})
    assert valid("NewJob", {"type": "t", "options": {"group": "tenant-42"}})
    assert not valid("NewJob", {"type": "t", "options": {"group": ""}})

    one, groups = "/limits/{type}", "/groups/{type}"
    check("get", "/api/limits", "/limits")
    all_four = {**NONE, "rate": RATE, "concurrency": 1, "groupRate": RATE, "groupConcurrency": 1}
    check("put", "/api/limits/t", one, json=all_four)
    check("put", "/api/limits/t", one, 400, json={"concurrency": 0})
    created = check("post", "/api/job", "/job", json={"type": "t", "options": {"group": "g"}})
    _save(queue, "t", "h", 2)
    # held by the cap now
    assert queue.scripts.call(calls.claim(queue.keys, "t", "w1", 30_000)) is not None
    entry = check("get", "/api/limits/t", one)
    assert entry["status"]["held"] == "concurrency"
    check("get", "/api/limits", "/limits")
    check("get", f"/api/job/{created['id']}", "/job/{id}")
    listed = check("get", "/api/groups/t", groups)
    assert listed["total"] == 2
    check("get", "/api/groups/t?count=0", groups, 400)
    check("get", "/api/groups/unknown", groups)
    check("get", "/api/limits/unknown", one)
    check("delete", "/api/limits/t", one)
    check("delete", "/api/limits/%20", one, 400)
