"""Dependencies and flows over the JSON API: the depends and onDependencyFailure options of
POST /job, POST /flows, GET /job/{id}/dependencies, DELETE /job/{id} refused (409) or with
cascade, the blocked state in Kue's counts and listings; bad input answered 400 with nothing
written; the answers match the OpenAPI document."""

from __future__ import annotations

from typing import Any

import pytest
import redis
from flask.testing import FlaskClient

from kue_core import Queue
from kue_http import create_app
from kue_http.flows import MAX_FLOW_DEPTH, MAX_FLOW_NODES
from tests.conftest import finish, snapshot, written_since
from tests.http.documented import Documented


def _post(client: FlaskClient, options: dict[str, Any], job_type: str = "email") -> Any:
    return client.post("/api/job", json={"type": job_type, "options": options})


def _node(job_type: str, *children: dict[str, Any], **data: Any) -> dict[str, Any]:
    node: dict[str, Any] = {"type": job_type, "data": data}
    if children:
        node["children"] = list(children)
    return node


def _chain(levels: int) -> dict[str, Any]:
    node = _node("link")
    for _ in range(levels - 1):
        node = _node("link", node)
    return node


# -- POST /job ----------------------------------------------------------------------------
def test_a_job_created_with_depends_is_blocked_until_they_complete(
    client: FlaskClient, queue: Queue
) -> None:
    a = queue.create_job("fetch").save()
    b = queue.create_job("fetch").save()
    res = _post(client, {"depends": [a.id, str(b.id)], "onDependencyFailure": "fail"}, "sum")
    assert res.status_code == 200 and res.json["message"] == "job created", res.json
    job = client.get(f"/api/job/{res.json['id']}").json
    assert job["state"] == "blocked" and job["depends"] == 2
    assert job["onDependencyFailure"] == "fail"
    assert client.get(f"/api/job/{a.id}").json["hasDependents"] is True
    finish(queue, "fetch", True)
    finish(queue, "fetch", True)
    assert client.get(f"/api/job/{res.json['id']}").json["state"] == "inactive"
    plain = client.get(f"/api/job/{_post(client, {}).json['id']}").json
    assert not {"depends", "onDependencyFailure", "blockedBy", "hasDependents"} & set(plain)


@pytest.mark.parametrize(
    "options",
    [
        {"depends": [999_999]},
        {"depends": ["999999"]},
        {"depends": []},
        {"depends": 0},
        {"depends": "x"},
        {"depends": 1.5},
        {"depends": {"id": 1}},
        {"depends": None},
        {"depends": [0]},
        {"depends": [-1]},
        {"depends": [1.5]},
        {"depends": [True]},
        {"depends": ["x"]},
        {"depends": [None]},
        {"depends": [2**63]},
        {"depends": [{"id": 1}]},
        {"onDependencyFailure": "retry"},
        {"onDependencyFailure": None},
        {"onDependencyFailure": ["fail"]},
        {"depends": [1], "onDependencyFailure": "FAIL"},
        {"depends": [1], "unique": {"key": "k"}},
    ],
)
def test_bad_dependency_options_write_nothing(
    client: FlaskClient, queue: Queue, r: redis.Redis, prefix: str, options: dict[str, Any]
) -> None:
    queue.create_job("fetch").save()  # id 1
    before = snapshot(r, prefix)
    res = _post(client, options)
    assert res.status_code == 400 and res.is_json and res.json["error"], res.json
    assert not written_since(r, prefix, before)


def test_depends_takes_an_id_or_a_list_of_ids(client: FlaskClient, queue: Queue) -> None:
    a = queue.create_job("fetch").save()
    b = queue.create_job("fetch").save()
    for depends, ids in [
        (a.id, [a.id]),
        (str(b.id), [b.id]),
        ([a.id], [a.id]),
        ([str(a.id), b.id], [a.id, b.id]),
    ]:
        res = _post(client, {"depends": depends}, "sum")
        assert res.status_code == 200, res.json
        found = client.get(f"/api/job/{res.json['id']}/dependencies").json["dependencies"]
        assert [d["id"] for d in found] == ids, depends
    flow = client.post("/api/flows", json={"type": "sum", "options": {"depends": str(a.id)}})
    assert flow.status_code == 200 and flow.json["state"] == "blocked", flow.json


@pytest.mark.parametrize(
    ("depends", "says"),
    [
        (1.5, "got 1.5"),
        ({"id": 1}, "got {'id': 1}"),
        ([], "got an empty list (to depend on no job, leave depends out)"),
        ([1, True], "got True (in [1, True])"),
        ("x" * 300, "got '" + "x" * 50),
    ],
)
def test_a_wrong_depends_is_answered_naming_it_and_the_forms_taken(
    client: FlaskClient, queue: Queue, r: redis.Redis, prefix: str, depends: Any, says: str
) -> None:
    queue.create_job("fetch").save()  # id 1
    before = snapshot(r, prefix)
    for res in (
        _post(client, {"depends": depends}),
        client.post("/api/flows", json={"type": "p", "options": {"depends": depends}}),
    ):
        assert res.status_code == 400 and set(res.json) == {"error"}, res.json
        error = res.json["error"]
        assert "depends takes a job id (an integer or a string of digits) or a non-empty " in error
        assert says in error and len(error) < 300, error
    assert not written_since(r, prefix, before)


def test_an_array_answers_a_missing_dependency_in_its_place(
    client: FlaskClient, queue: Queue
) -> None:
    a = queue.create_job("fetch").save()
    body = [
        {"type": "email"},
        {"type": "sum", "options": {"depends": [999_999]}},
        {"type": "sum", "options": {"depends": [a.id]}},
        {"type": "email", "options": None},
    ]
    res = client.post("/api/job", json=body)
    assert res.status_code == 400
    first, refused, dependent, last = res.json
    assert "999999" in refused["error"] and set(refused) == {"error"}
    assert first["id"] < dependent["id"] < last["id"]
    assert client.get(f"/api/job/{dependent['id']}").json["state"] == "blocked"
    assert queue.counts()["inactive"] == 3 and queue.counts()["blocked"] == 1


# -- POST /flows --------------------------------------------------------------------------
def test_a_flow_of_three_levels_across_three_types_is_answered_as_a_tree(
    client: FlaskClient, queue: Queue
) -> None:
    body = _node(
        "assemble",
        _node("render", _node("fetch", n=1), _node("fetch", n=2), n=10),
        _node("render", _node("fetch", n=3), n=11),
        title="report",
    )
    res = client.post("/api/flows", json=body)
    assert res.status_code == 200, res.json
    tree = res.json
    assert tree["state"] == "blocked" and len(tree["children"]) == 2
    mids = tree["children"]
    assert [m["state"] for m in mids] == ["blocked", "blocked"]
    leaves = [leaf for m in mids for leaf in m["children"]]
    assert [leaf["state"] for leaf in leaves] == ["inactive"] * 3
    assert all("children" not in leaf for leaf in leaves)
    ids = [leaf["id"] for leaf in leaves] + [m["id"] for m in mids] + [tree["id"]]
    assert len(set(ids)) == 6
    for node, job_type, data in (
        (tree, "assemble", {"title": "report"}),
        (mids[1], "render", {"n": 11}),
        (leaves[2], "fetch", {"n": 3}),
    ):
        job = client.get(f"/api/job/{node['id']}").json
        assert (job["type"], job["data"]) == (job_type, data)
    assert client.get(f"/api/job/{tree['id']}").json["depends"] == 2
    deps = client.get(f"/api/job/{tree['id']}/dependencies").json
    assert deps["dependencies"] == [
        {"id": m["id"], "state": "blocked", "done": False} for m in mids
    ]
    assert queue.counts("fetch")["inactive"] == 3 and queue.counts()["blocked"] == 3


def test_a_flow_takes_options_and_children_as_given(client: FlaskClient, queue: Queue) -> None:
    a = queue.create_job("fetch").save()
    body = {
        "type": "sum",
        "options": {"depends": [a.id], "onDependencyFailure": "ignore", "priority": "high"},
        "children": [
            {"type": "kid", "children": []},
            {"type": "kid", "options": {"delay": 60_000}},
        ],
    }
    tree = client.post("/api/flows", json=body).json
    assert [k["state"] for k in tree["children"]] == ["inactive", "delayed"]
    assert tree["children"][0]["children"] == [] and "children" not in tree["children"][1]
    root = client.get(f"/api/job/{tree['id']}").json
    assert root["depends"] == 3 and root["onDependencyFailure"] == "ignore"
    assert root["priority"] == -10
    alone = client.post("/api/flows", json={"type": "solo"}).json
    assert set(alone) == {"id", "state"} and alone["state"] == "inactive"
    deep = client.post("/api/flows", json=_chain(MAX_FLOW_DEPTH))
    assert deep.status_code == 200 and queue.counts("link")["blocked"] == MAX_FLOW_DEPTH - 1


@pytest.mark.parametrize(
    ("body", "says"),
    [
        (_node("p", _node("ok"), {"data": {}}), "$.children[1]: Must provide job type"),
        (_node("p", _node("q", {"type": "x", "when": 1})), "$.children[0].children[0]: unknown"),
        (_node("p", _node("ok"), "x"), "$.children[1]: a node is a JSON object"),
        ({"type": "p", "children": {"type": "x"}}, "$: children is a list of nodes"),
        ({"type": "p", "children": [_node("k", {"type": "k", "options": []})]}, "options"),
        (_node("p", {"type": "k", "options": {"depends": [999_999]}}), "999999"),
        (_node("p", {"type": "k", "options": {"unique": {"key": "u"}}}), "unique"),
        (_node("p", {"type": "k", "options": {"onDependencyFailure": "x"}}), "$.children[0]"),
        (_chain(MAX_FLOW_DEPTH + 1), f"at most {MAX_FLOW_DEPTH} levels"),
        (
            {"type": "p", "children": [{"type": "k"}] * MAX_FLOW_NODES},
            f"at most {MAX_FLOW_NODES} jobs",
        ),
        ([_node("p")], "a node is a JSON object"),
        ({}, "Must provide job type"),
        ("p", "a node is a JSON object"),
    ],
)
def test_a_bad_flow_writes_nothing(
    client: FlaskClient, queue: Queue, r: redis.Redis, prefix: str, body: Any, says: str
) -> None:
    queue.create_job("fetch").save()
    before = snapshot(r, prefix)
    res = client.post("/api/flows", json=body)
    assert res.status_code == 400 and says in res.json["error"], res.json
    assert set(res.json) == {"error"}
    assert not written_since(r, prefix, before)


def test_a_body_nested_past_the_parser_is_bad_input(
    client: FlaskClient, r: redis.Redis, prefix: str
) -> None:
    """Python's JSON parser recurses once a level: it raised RecursionError, answered 500."""
    before = snapshot(r, prefix)
    for url, body in (
        ("/api/flows", '{"type": "p", "children": [' * 20_000),
        ("/api/flows", "[" * 100_000),
        ("/api/job", "[" * 100_000),
    ):
        res = client.post(url, data=body, content_type="application/json")
        assert res.status_code == 400 and res.json["error"], url
    assert not written_since(r, prefix, before)


def test_flows_are_writes_guarded_as_the_others(
    redis_url: str, client: FlaskClient, queue: Queue, r: redis.Redis, prefix: str
) -> None:
    a = queue.create_job("fetch").save()
    queue.create_job("sum").depends_on(a).save()
    before = snapshot(r, prefix)
    body = _node("p", _node("k"))
    text = client.post("/api/flows", data='{"type": "p"}', content_type="text/plain")
    assert text.status_code == 415
    assert client.post("/api/flows", data={"type": "p"}).status_code == 415
    assert client.post("/api/flows").status_code == 415
    for method, url, json in (
        ("post", "/api/flows", body),
        ("post", "/api/job", {"type": "x", "options": {"depends": [a.id]}}),
        ("delete", f"/api/job/{a.id}?cascade=true", None),
    ):
        res = client.open(url, method=method, json=json, headers={"Origin": "https://evil.example"})
        assert res.status_code == 403, url
    readonly = create_app(
        {"KUE_REDIS_URL": redis_url, "KUE_PREFIX": prefix, "KUE_READONLY": True}
    ).test_client()
    assert readonly.post("/api/flows", json=body).status_code == 405
    assert readonly.delete(f"/api/job/{a.id}?cascade=true").status_code == 405
    assert readonly.get(f"/api/job/{a.id}/dependencies").status_code == 200
    assert not written_since(r, prefix, before)


# -- GET /job/{id}/dependencies -----------------------------------------------------------
def test_the_dependencies_route(client: FlaskClient, queue: Queue) -> None:
    a = queue.create_job("fetch").save()
    b = queue.create_job("fetch").save()
    c = queue.create_job("sum").depends_on(a, b).save()
    d = queue.create_job("report").depends_on(c).save()
    assert finish(queue, "fetch", True) == a.id
    body = client.get(f"/api/job/{c.id}/dependencies").json
    assert body == {
        "dependencies": [
            {"id": a.id, "state": "complete", "done": True},
            {"id": b.id, "state": "inactive", "done": False},
        ],
        "dependents": [{"id": d.id, "state": "blocked"}],
        "results": {str(a.id): {"ok": True}},
    }
    assert client.get(f"/api/job/{a.id}/dependencies").json == {
        "dependencies": [],
        "dependents": [{"id": c.id, "state": "blocked"}],
        "results": {},
    }
    res = client.get("/api/job/999999/dependencies")
    assert res.status_code == 404 and res.json["error"]
    assert client.get("/api/job/nope/dependencies").status_code == 400


# -- DELETE /job/{id} ---------------------------------------------------------------------
def test_removing_a_job_others_wait_for_is_refused_unless_cascade(
    client: FlaskClient, queue: Queue, r: redis.Redis, prefix: str
) -> None:
    a = queue.create_job("fetch").save()
    b = queue.create_job("sum").depends_on(a).save()
    c = queue.create_job("report").depends_on(b).save()
    other = queue.create_job("fetch").save()
    before = snapshot(r, prefix)
    for query in ("", "?cascade=false"):
        res = client.delete(f"/api/job/{a.id}{query}")
        assert res.status_code == 409, res.json
        assert res.json["dependents"] == [b.id] and str(b.id) in res.json["error"]
    for bad in ("yes", "1", "True", ""):
        res = client.delete(f"/api/job/{a.id}?cascade={bad}")
        assert res.status_code == 400 and "cascade" in res.json["error"], bad
    assert client.delete("/api/job/999999?cascade=maybe").status_code == 400  # checked first
    assert not written_since(r, prefix, before)
    res = client.delete(f"/api/job/{a.id}?cascade=true")
    assert res.status_code == 200
    assert res.json["message"] == f"job {a.id} removed"
    assert res.json["removed"][0] == a.id and sorted(res.json["removed"]) == [a.id, b.id, c.id]
    for gone in (a, b, c):
        assert client.get(f"/api/job/{gone.id}").status_code == 404
    assert client.delete(f"/api/job/{other.id}").json == {
        "message": f"job {other.id} removed",
        "removed": [other.id],
    }
    assert client.delete("/api/job/999999?cascade=true").status_code == 404


# -- the blocked state in Kue's routes ----------------------------------------------------
def test_blocked_jobs_are_counted_and_listed(client: FlaskClient, queue: Queue) -> None:
    a = queue.create_job("fetch").save()
    b = queue.create_job("sum").depends_on(a).save()
    c = queue.create_job("report").depends_on(a).save()
    assert client.get("/api/stats").json["blockedCount"] == 2
    for url, ids in (
        ("/api/jobs/blocked/0..10/asc", [b.id, c.id]),
        ("/api/jobs/blocked/0..10/desc", [c.id, b.id]),
        ("/api/jobs/blocked/0..0", [b.id]),
        ("/api/jobs/sum/blocked/0..10/asc", [b.id]),
        ("/api/jobs/report/blocked/0..10", [c.id]),
        ("/api/jobs/fetch/blocked/0..10", []),
        ("/api/jobs/0..10", [a.id, b.id, c.id]),
    ):
        res = client.get(url)
        assert res.status_code == 200 and [j["id"] for j in res.json] == ids, url
    assert client.get("/api/jobs/sum/blocked/stats").json == {"count": 1}
    res = client.put(f"/api/job/{a.id}/state/blocked")
    assert res.status_code == 409 and res.json["error"]
    assert client.get(f"/api/job/{a.id}").json["state"] == "inactive"
    assert client.put(f"/api/job/{b.id}/state/inactive").status_code == 200
    assert client.get("/api/stats").json["blockedCount"] == 1
    res = client.delete("/api/jobs/blocked?type=report")
    assert res.status_code == 200 and res.json["count"] == 1
    assert client.get("/api/stats").json["blockedCount"] == 0


# -- the document -------------------------------------------------------------------------
def test_answers_match_the_openapi_document(client: FlaskClient, queue: Queue) -> None:
    check = Documented(client)
    a = queue.create_job("fetch").save()

    created = check("post", "/api/job", "/job", json={"type": "x", "options": {"depends": [a.id]}})
    tree = check(
        "post",
        "/api/flows",
        "/flows",
        json=_node("p", _node("q", _node("k")), _node("k"), {"type": "k", "children": []}),
    )
    check("get", f"/api/job/{created['id']}", "/job/{id}")
    check("get", f"/api/job/{a.id}", "/job/{id}")
    check("get", f"/api/job/{tree['id']}/dependencies", "/job/{id}/dependencies")
    check("get", "/api/stats", "/stats")
    check("get", "/api/jobs/blocked/0..10/asc", "/jobs/{state}/{from}..{to}/{order}")
    check("put", f"/api/job/{a.id}/state/blocked", "/job/{id}/state/{state}", 409)
    check("delete", f"/api/job/{a.id}", "/job/{id}", 409)
    check("get", "/api/job/999999/dependencies", "/job/{id}/dependencies", 404)
    finish(queue, "fetch", False)  # for good: x waits, blocked by a
    check("get", f"/api/job/{created['id']}", "/job/{id}")
    check("delete", f"/api/job/{a.id}?cascade=true", "/job/{id}")
    check("get", f"/api/job/{tree['children'][1]['id']}/dependencies", "/job/{id}/dependencies")
