"""Schedules over the JSON API: PUT /schedules/{key} defines one every N ms or by cron (POST
/job's option names mapped to kue_core's), upserted by key; GET lists and reads them; pause,
resume, trigger (a job with its schedule and tick) and DELETE steer them; unknown keys 404;
bad input answered 400 with nothing written; writes guarded as the others; the answers match
the OpenAPI document."""

from __future__ import annotations

from typing import Any

import pytest
import redis
from flask.testing import FlaskClient

from kue_core import Queue
from kue_http import create_app
from tests.conftest import snapshot, written_since
from tests.http.documented import Documented

EVERY = {
    "every": 60_000,
    "offset": 1000,
    "type": "report",
    "data": {"title": "hourly"},
    "options": {
        "priority": "high",
        "attempts": 3,
        "removeOnComplete": True,
        "removeOnFail": 5,
        "tags": ["ops"],
        "searchKeys": ["title"],
        "track": True,
    },
}
CRON = {"cron": "0 9 * * 1-5", "tz": "Europe/Paris", "type": "digest", "catch_up": "none"}


def _put(client: FlaskClient, key: str, body: Any) -> Any:
    return client.put(f"/api/schedules/{key}", json=body)


def test_an_every_schedule_is_defined_with_options_under_their_rest_names(
    client: FlaskClient, queue: Queue
) -> None:
    res = _put(client, "hourly", EVERY)
    assert res.status_code == 200, res.json
    body = res.json
    assert body["key"] == "hourly" and body["kind"] == "every"
    assert (body["every"], body["offset"], body["type"]) == (60_000, 1000, "report")
    assert body["data"] == {"title": "hourly"} and body["options"] == EVERY["options"]
    assert body["catch_up"] == "one" and body["paused"] is False and body["ended"] is False
    assert body["next"] == body["upcoming"][0] and len(body["upcoming"]) == 3
    assert body["upcoming"][1] - body["upcoming"][0] == 60_000
    assert (body["runs"], body["triggered"], body["last_job"]) == (0, 0, None)
    core = queue.schedule("hourly")["options"]
    assert core["remove_on_complete"] is True and core["search_keys"] == ["title"]
    assert core["remove_on_fail"] == 5 and "removeOnFail" not in core


def test_a_backoff_is_answered_under_the_name_post_job_takes(client: FlaskClient) -> None:
    """``max_delay``, ``maxDelay``'s former name, is still taken; the answer says ``maxDelay``,
    as a job's does."""
    old = {"type": "exponential", "delay": 100, "max_delay": 5000}
    res = _put(client, "backing", {**CRON, "options": {"backoff": old}})
    assert res.status_code == 200, res.json
    assert res.json["options"]["backoff"] == {"type": "exponential", "delay": 100, "maxDelay": 5000}
    both = {**old, "maxDelay": 5000}
    res = _put(client, "backing", {**CRON, "options": {"backoff": both}})
    assert res.status_code == 400 and "not both" in res.json["error"]


def test_a_cron_schedule_in_a_time_zone(client: FlaskClient) -> None:
    res = _put(client, "digest", {**CRON, "start": 0, "end": None, "limit": 10})
    assert res.status_code == 200, res.json
    body = res.json
    assert (body["kind"], body["cron"], body["tz"]) == ("cron", "0 9 * * 1-5", "Europe/Paris")
    assert body["catch_up"] == "none" and body["limit"] == 10 and body["options"] == {}
    assert body["data"] == {} and "every" not in body and "offset" not in body
    named = _put(client, "daily", {"cron": "@daily", "type": "x"}).json
    assert (named["cron"], named["tz"]) == ("0 0 * * *", "UTC")
    former = {k: v for k, v in CRON.items() if k != "catch_up"} | {"catchUp": "all"}
    assert _put(client, "old", former).json["catch_up"] == "all"  # the former name is taken


def test_a_put_upserts_by_key_and_the_list_reads_every_schedule(client: FlaskClient) -> None:
    first = _put(client, "a", EVERY).json
    assert _put(client, "a", EVERY).json["anchor"] == first["anchor"]  # unchanged: kept
    changed = _put(client, "a", {**EVERY, "every": 120_000}).json
    assert changed["every"] == 120_000 and changed["upcoming"][1] - changed["next"] == 120_000
    _put(client, "b", CRON)
    listed = client.get("/api/schedules").json["schedules"]
    assert [s["key"] for s in listed] == ["a", "b"]
    assert listed[0] == client.get("/api/schedules/a").json
    assert listed[0]["options"] == EVERY["options"]  # as sent: what is read can be sent back
    again = _put(client, "a", {k: listed[0][k] for k in ("every", "type", "data", "options")})
    assert again.status_code == 200, again.json


def test_pause_resume_trigger_and_remove(client: FlaskClient, queue: Queue) -> None:
    _put(client, "nightly", {**EVERY, "every": 3_600_000})
    res = client.post("/api/schedules/nightly/pause", json={})
    assert res.status_code == 200, res.json
    assert res.json["message"] == "paused schedule nightly"
    assert res.json["schedule"]["paused"] is True and res.json["schedule"]["next"] is None
    assert client.get("/api/schedules/nightly").json["paused"] is True
    res = client.post("/api/schedules/nightly/trigger", json={})
    assert res.status_code == 200, res.json
    job = res.json["job"]
    assert res.json["message"] == f"triggered schedule nightly: job {job['id']}"
    assert job["type"] == "report" and job["data"] == {"title": "hourly"}
    assert job["schedule"] == "nightly" and isinstance(job["tick"], int)
    assert job["priority"] == -10 and job["tags"] == ["ops"]
    assert client.get(f"/api/job/{job['id']}").json["schedule"] == "nightly"
    read = client.get("/api/schedules/nightly").json
    assert read["triggered"] == 1 and read["last_job"]["id"] == job["id"]
    res = client.post("/api/schedules/nightly/resume", json={})
    assert res.status_code == 200 and res.json["message"] == "resumed schedule nightly"
    assert res.json["schedule"]["paused"] is False and res.json["schedule"]["next"] is not None
    res = client.delete("/api/schedules/nightly")
    assert res.status_code == 200 and res.json == {"message": "schedule nightly removed"}
    assert client.get("/api/schedules").json == {"schedules": []}
    assert queue.get_job(job["id"]).schedule_key == "nightly"  # the jobs it made stay


def test_a_unique_key_over_rest(client: FlaskClient, queue: Queue) -> None:
    """``options.unique`` as POST /job has it; a trigger that finds the key held answers
    with the holder, and the schedule counts it."""
    body = {**EVERY, "every": 3_600_000, "options": {"unique": {"key": "rep"}}}
    res = _put(client, "u", body)
    assert res.status_code == 200, res.json
    assert res.json["options"] == {"unique": {"key": "rep", "mode": "until_done"}}
    first = client.post("/api/schedules/u/trigger", json={}).json["job"]
    again = client.post("/api/schedules/u/trigger", json={}).json["job"]
    assert again["id"] == first["id"] and queue.ids("inactive", "report") == [first["id"]]
    read = client.get("/api/schedules/u").json
    assert (read["triggered"], read["deduplicated"]) == (2, 1)
    bad = _put(client, "u", {**body, "options": {"unique": {"key": "rep", "mode": "throttle"}}})
    assert bad.status_code == 400 and "ttl" in bad.json["error"]
    assert client.get("/api/schedules/u").json["options"] == res.json["options"]


def test_unknown_keys_are_404(client: FlaskClient, r: redis.Redis, prefix: str) -> None:
    before = snapshot(r, prefix)
    for method, url in (
        ("get", "/api/schedules/nope"),
        ("delete", "/api/schedules/nope"),
        ("post", "/api/schedules/nope/trigger"),
        ("post", "/api/schedules/nope/pause"),
        ("post", "/api/schedules/nope/resume"),
        ("get", "/api/schedules/a%2Fb"),  # a key holding / reaches no route
    ):
        res = client.open(url, method=method, json={} if method == "post" else None)
        assert res.status_code == 404 and res.json["error"], url
    assert "nope" in client.get("/api/schedules/nope").json["error"]
    assert not written_since(r, prefix, before)


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ({**CRON, "cron": "61 * * * *"}, "cron"),
        ({**CRON, "cron": "0 0 31 2 *"}, "cron"),
        ({**CRON, "cron": ""}, "cron"),
        ({**CRON, "tz": "Mars/Olympus"}, "time zone"),
        ({**CRON, "tz": "../etc/passwd"}, "tz"),
        ({**CRON, "every": 60_000}, "exactly one"),
        ({"type": "x"}, "exactly one"),
        ({**EVERY, "every": 10}, "interval"),
        ({**EVERY, "every": "60000"}, "interval"),
        ({**EVERY, "every": True}, "interval"),
        ({**EVERY, "offset": -1}, "offset"),
        ({**EVERY, "tz": "UTC"}, "tz"),
        ({**CRON, "offset": 5}, "offset"),
        ({**EVERY, "colour": "red"}, "colour"),
        ({**EVERY, "catch_up": "some"}, "catch_up"),
        ({**EVERY, "catchUp": "some"}, "catch_up"),
        ({**EVERY, "catch_up": ["one"]}, "catch_up is one of"),
        ({**EVERY, "catch_up": "all", "catchUp": "all"}, "catch_up only"),
        ({**EVERY, "options": {"unique": {"key": "k", "mode": "often"}}}, "unique mode"),
        ({**EVERY, "options": {"unique": "k"}}, "unique"),
        ({**EVERY, "options": {"remove_on_complete": True}}, "remove_on_complete"),
        ({**EVERY, "options": {"priority": "urgent"}}, "priority"),
        ({**EVERY, "options": {"tags": []}}, "tags"),
        ({**EVERY, "options": {"track": "yes"}}, "track"),
        ({**EVERY, "options": []}, "options"),
        ({**EVERY, "type": ""}, "type"),
        ({**EVERY, "type": None}, "type"),
        ({**EVERY, "start": 2000, "end": 1000}, "end"),
        ({**EVERY, "start": -1}, "start"),
        ({**CRON, "start": 2**53}, "start"),
        ({**EVERY, "limit": 0}, "limit"),
        ([EVERY], "object"),
        ("every minute", "object"),
    ],
)
def test_bad_definitions_write_nothing(
    client: FlaskClient, r: redis.Redis, prefix: str, body: Any, says: str
) -> None:
    _put(client, "kept", CRON)
    before = snapshot(r, prefix)
    for key in ("kept", "new"):
        res = _put(client, key, body)
        assert res.status_code == 400 and says in res.json["error"], res.json
        assert set(res.json) == {"error"}
    assert not written_since(r, prefix, before)


def test_a_bad_key_is_refused(client: FlaskClient, r: redis.Redis, prefix: str) -> None:
    before = snapshot(r, prefix)
    for key in ("a%20b", "x" * 201, "tab%09"):
        assert _put(client, key, EVERY).status_code == 400, key
        assert client.get(f"/api/schedules/{key}").status_code == 400, key
    assert not written_since(r, prefix, before)


def test_schedule_writes_are_guarded_as_the_others(
    redis_url: str, client: FlaskClient, r: redis.Redis, prefix: str
) -> None:
    _put(client, "s", EVERY)
    before = snapshot(r, prefix)
    res = client.put("/api/schedules/s", data='{"type": "p"}', content_type="text/plain")
    assert res.status_code == 415
    assert client.post("/api/schedules/s/trigger").status_code == 415  # a POST without JSON
    assert client.post("/api/schedules/s/pause", data={"a": "b"}).status_code == 415
    for method, url in (
        ("put", "/api/schedules/s"),
        ("delete", "/api/schedules/s"),
        ("post", "/api/schedules/s/trigger"),
        ("post", "/api/schedules/s/pause"),
        ("post", "/api/schedules/s/resume"),
    ):
        json = {**EVERY, "every": 5000} if method == "put" else ({} if method == "post" else None)
        res = client.open(url, method=method, json=json, headers={"Origin": "https://evil.example"})
        assert res.status_code == 403, url
    readonly = create_app(
        {"KUE_REDIS_URL": redis_url, "KUE_PREFIX": prefix, "KUE_READONLY": True}
    ).test_client()
    assert readonly.put("/api/schedules/s", json=EVERY).status_code == 405
    assert readonly.post("/api/schedules/s/trigger", json={}).status_code == 405
    assert readonly.delete("/api/schedules/s").status_code == 405
    assert readonly.get("/api/schedules/s").status_code == 200
    assert readonly.get("/api/schedules").status_code == 200
    assert not written_since(r, prefix, before)


# -- the document -------------------------------------------------------------------------
def test_answers_match_the_openapi_document(client: FlaskClient) -> None:
    check = Documented(client)
    doc, jsonschema_rs = check.doc, check.jsonschema_rs

    def body(payload: Any) -> None:
        schema = doc["components"]["schemas"]["NewSchedule"]
        validator = jsonschema_rs.validator_for({**schema, "components": doc["components"]})
        assert validator.is_valid(payload), payload

    one, each = "/schedules/{key}", "/schedules"
    for payload in (EVERY, CRON, {"cron": "@hourly", "type": "t", "options": None}):
        body(payload)
    check("put", "/api/schedules/e", one, json=EVERY)
    check("put", "/api/schedules/c", one, json={**CRON, "start": 1, "end": 2**40, "limit": 2})
    check("put", "/api/schedules/c", one, 400, json={**CRON, "tz": "Nowhere/Else"})
    check("get", "/api/schedules", each)
    check("get", "/api/schedules/e", one)
    check("get", "/api/schedules/nope", one, 404)
    job = check("post", "/api/schedules/e/trigger", one + "/trigger", json={})["job"]
    check("get", f"/api/job/{job['id']}", "/job/{id}")
    check("get", "/api/schedules/e", one)  # with its last job
    check("post", "/api/schedules/c/pause", one + "/pause", json={})
    check("get", "/api/schedules/c", one)
    check("post", "/api/schedules/c/resume", one + "/resume", json={})
    check("post", "/api/schedules/nope/pause", one + "/pause", 404, json={})
    check("delete", "/api/schedules/e", one)
    check("delete", "/api/schedules/e", one, 404)
