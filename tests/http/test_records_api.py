"""Job records over the JSON API (issue 18 §2-§4): the POST /job options, search through the
index, tags, tracking and retention; bad input answered 400 (404 for an unknown job) with
nothing changed; the answers match the OpenAPI document."""

from __future__ import annotations

from typing import Any

import pytest
import redis
from flask.testing import FlaskClient

from kue_core import Queue, defaults
from tests.conftest import finish, keys_under


def _post(client: FlaskClient, options: dict[str, Any], data: Any = None) -> Any:
    return client.post("/api/job", json={"type": "email", "data": data or {}, "options": options})


def test_new_jobs_take_the_records_options(client: FlaskClient, queue: Queue) -> None:
    res = _post(
        client,
        {
            "tags": ["customer:42", "vip"],
            "searchKeys": ["to"],
            "track": True,
            "removeOnComplete": {"count": 5},
            "removeOnFail": True,
        },
        {"to": "ada@example.com", "title": "Welcome"},
    )
    assert res.status_code == 200, res.json
    job = client.get(f"/api/job/{res.json['id']}").json
    assert job["tags"] == ["customer:42", "vip"] and job["tracked"] is True
    assert job["removeOnComplete"] == {"count": 5, "age": None}
    assert job["removeOnFail"] is True
    assert queue.search("ada@example.com") == [job["id"]]
    plain = client.get(f"/api/job/{_post(client, {'track': False}).json['id']}").json
    assert not {"tags", "tracked", "remove_on_complete", "remove_on_fail"} & set(plain)


@pytest.mark.parametrize(
    "options",
    [
        {"tags": "vip"},
        {"tags": []},
        {"tags": ["ok", ""]},
        {"tags": ["a\nb"]},
        {"tags": [f"t{i}" for i in range(defaults.MAX_TAGS + 1)]},
        {"searchKeys": "to"},
        {"searchKeys": [3]},
        {"track": "yes"},
        {"removeOnComplete": -1},
        {"removeOnFail": {"count": 1, "when": 2}},
        {"removeOnFail": None},
    ],
)
def test_bad_records_options_save_nothing(
    client: FlaskClient, queue: Queue, r: redis.Redis, options: dict[str, Any]
) -> None:
    before = keys_under(r, queue.prefix)
    res = _post(client, options)
    assert res.status_code == 400 and res.is_json and res.json["error"]
    assert keys_under(r, queue.prefix) == before


def test_search_routes(client: FlaskClient, queue: Queue) -> None:
    a = queue.create_job("email", {"title": "Invoice <b>March</b>"}).tags("vip").save()
    b = queue.create_job("video", {"title": "Invoice video"}).save()
    body = client.get("/api/search?q=invoice").json
    assert body["ids"] == [b.id, a.id] and body["total"] == 2 and body["exact"] is True
    assert [j["id"] for j in body["jobs"]] == [b.id, a.id]
    assert client.get("/api/search?q=inv&type=email").json["ids"] == [a.id]
    assert client.get("/api/search?q=invoice vip").json["ids"] == [a.id]
    page = client.get("/api/search?q=invoice&offset=1&count=1").json
    assert page["ids"] == [a.id] and page["total"] == 2
    assert client.get("/api/job/search?q=invoice&count=1").json == [str(b.id)]
    for bad in ("", "q=", "q=!!", "q=x&state=gone", "q=x&count=1001", "q=x&offset=-1"):
        res = client.get(f"/api/search?{bad}")
        assert res.status_code == 400 and res.is_json, bad


def test_tag_routes(client: FlaskClient, queue: Queue) -> None:
    job = queue.create_job("email").tags("a").save()
    res = client.put(f"/api/job/{job.id}/tags/b")
    assert res.status_code == 200 and res.json["job"]["tags"] == ["a", "b"]
    assert res.json["message"] == f"tagged job {job.id} b"
    assert client.get("/api/tags").json == {"total": 2, "tags": {"a": 1, "b": 1}}
    assert client.get("/api/tags?count=1").json["total"] == 2
    tagged = client.get("/api/tags/b").json
    assert tagged["total"] == 1 and [j["id"] for j in tagged["jobs"]] == [job.id]
    res = client.delete(f"/api/job/{job.id}/tags/a")
    assert res.status_code == 200 and res.json["job"]["tags"] == ["b"]
    assert client.get("/api/tags").json == {"total": 1, "tags": {"b": 1}}
    assert client.get("/api/tags/nobody").json == {"tag": "nobody", "total": 0, "jobs": []}


def test_bad_tag_requests_change_nothing(client: FlaskClient, queue: Queue, r: redis.Redis) -> None:
    job = queue.create_job("email").tags(*[f"t{i}" for i in range(defaults.MAX_TAGS)]).save()
    before = keys_under(r, queue.prefix)
    for method, url, status in (
        ("put", f"/api/job/{job.id}/tags/one-more", 400),  # past MAX_TAGS
        ("put", f"/api/job/{job.id}/tags/%20", 400),
        ("put", f"/api/job/{job.id}/tags/a%0Ab", 400),
        ("put", f"/api/job/{job.id}/tags/{'x' * (defaults.MAX_TAG + 1)}", 400),
        ("put", "/api/job/999999/tags/x", 404),
        ("delete", "/api/job/999999/tags/x", 404),
        ("put", "/api/job/nope/tags/x", 400),
        ("put", "/api/job/999999/track", 404),
        ("delete", "/api/job/0/track", 400),
    ):
        res = getattr(client, method)(url)
        assert res.status_code == status and res.is_json, (method, url, res.status_code)
    assert client.get("/api/tags?count=-1").status_code == 400
    assert keys_under(r, queue.prefix) == before


def test_track_routes(client: FlaskClient, queue: Queue) -> None:
    a, b = queue.create_job("email").save(), queue.create_job("email").save()
    assert client.put(f"/api/job/{a.id}/track").json["job"]["tracked"] is True
    client.put(f"/api/job/{b.id}/track")
    assert [j["id"] for j in client.get("/api/tracked").json] == [b.id, a.id]
    res = client.delete(f"/api/job/{a.id}/track")
    assert res.status_code == 200 and "tracked" not in res.json["job"]
    assert [j["id"] for j in client.get("/api/tracked").json] == [b.id]


def test_retention_routes(client: FlaskClient, queue: Queue, r: redis.Redis) -> None:
    body = client.get("/api/retention").json
    count, age = defaults.RETAIN_COMPLETE
    assert body["complete"] == {"count": count, "age": age, "source": "default"}
    assert body["memory"]["used"] > 0
    res = client.put("/api/retention", json={"complete": {"count": 1}, "failed": None})
    assert res.status_code == 200
    assert res.json["complete"] == {"count": 1, "age": None, "source": "queue"}
    assert res.json["failed"] == {"count": None, "age": None, "source": "queue"}
    for _ in range(3):
        queue.create_job("t").save()
        finish(queue, "t", True)
    assert queue.count("complete") == 1
    before = r.hgetall(queue.keys.retention)
    for bad in (
        {},
        {"complete": -1},
        {"complete": {"count": 1}, "failed": "all"},
        {"done": 5},
        [1],
        "x",
    ):
        res = client.put("/api/retention", json=bad)
        assert res.status_code == 400 and res.is_json, bad
    assert (
        client.put("/api/retention", data="{", content_type="application/json").status_code == 400
    )
    assert r.hgetall(queue.keys.retention) == before
    assert (
        client.put("/api/retention", json={"complete": "default"}).json["complete"]["source"]
        == "default"
    )


def test_answers_match_the_openapi_document(client: FlaskClient, queue: Queue) -> None:
    jsonschema_rs = pytest.importorskip("jsonschema_rs")
    doc = client.get("/api/openapi.json").json
    job = queue.create_job("email", {"title": "hello"}).tags("vip").track()
    job.remove_on_complete({"count": 2}).remove_on_fail(True).save()

    def check(method: str, url: str, path: str, **kw: Any) -> None:
        res = getattr(client, method)(url, **kw)
        assert res.status_code == 200, (url, res.json)
        schema = doc["paths"][path][method]["responses"]["200"]["content"]["application/json"]
        full = {**schema["schema"], "components": doc["components"]}
        jsonschema_rs.validator_for(full).validate(res.json)

    check("get", "/api/search?q=hel", "/search")
    check("get", "/api/job/search?q=hel", "/job/search")
    check("get", "/api/tags", "/tags")
    check("get", "/api/tags/vip", "/tags/{tag}")
    check("get", "/api/tracked", "/tracked")
    check("get", "/api/retention", "/retention")
    check("put", "/api/retention", "/retention", json={"failed": {"age": 1000}})
    check("put", f"/api/job/{job.id}/tags/gold", "/job/{id}/tags/{tag}")
    check("delete", f"/api/job/{job.id}/tags/gold", "/job/{id}/tags/{tag}")
    check("put", f"/api/job/{job.id}/track", "/job/{id}/track")
    check("delete", f"/api/job/{job.id}/track", "/job/{id}/track")
