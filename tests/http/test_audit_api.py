"""The audit log: every change made through the API (the dashboard's buttons call it) is
recorded with who made it, from where, and how many jobs it touched; refused writes, reads and
read-only mode record nothing; ``GET /api/audit`` pages and filters it; it stays bounded."""

from __future__ import annotations

import base64

import pytest
from flask.testing import FlaskClient

from kue_core import InvalidJob, Queue
from kue_core.store import calls
from kue_http import create_app

XSS = "<script>alert('audit')</script>"


def _entries(client: FlaskClient, query: str = "") -> list[dict]:  # type: ignore[type-arg]
    res = client.get(f"/api/audit{query}")
    assert res.status_code == 200, res.json
    return res.json["entries"]  # type: ignore[index,no-any-return]


def test_changes_are_recorded_newest_first(client: FlaskClient, queue: Queue) -> None:
    made = client.post("/api/job", json={"type": XSS, "data": {}})
    job_id = made.json["id"]  # type: ignore[index]
    failed = [queue.create_job("f").save() for _ in range(3)]
    for job in failed:
        queue.scripts.call(calls.set_state(queue.keys, job.id, "failed"))  # type: ignore[arg-type]
    assert client.post("/api/jobs/failed/retry", json={}).status_code == 200
    assert client.delete(f"/api/job/{job_id}").status_code == 200
    client.get("/api/stats")  # a read: not recorded
    client.post("/api/job", json={"type": ""})  # refused (400): nothing changed
    client.delete("/api/job/999999999")  # 404: nothing changed
    got = _entries(client)
    assert [e["action"] for e in got] == ["remove", "retry_all", "create"]
    remove, retry, create = got
    assert (remove["method"], remove["path"], remove["status"], remove["jobs"]) == (
        "DELETE",
        f"/api/job/{job_id}",
        200,
        1,
    )
    assert retry["jobs"] == 3 and create["jobs"] == 1
    assert all(e["who"] == "" and e["from"] == "127.0.0.1" for e in got)
    assert remove["at"] >= retry["at"] >= create["at"] > 0
    # Pages and filters.
    assert [e["action"] for e in _entries(client, "?count=1")] == ["remove"]
    after = _entries(client, f"?before={remove['id']}")
    assert [e["action"] for e in after] == ["retry_all", "create"]
    assert [e["action"] for e in _entries(client, "?action=create")] == ["create"]
    assert _entries(client, "?who=10.0.0.9") == []
    assert len(_entries(client, "?who=127.0.0.1")) == 3
    assert _entries(client, f"?since={remove['at'] + 60_000}") == []
    for bad in ("?count=0", "?count=x", "?before=yesterday", "?since=-5"):
        res = client.get(f"/api/audit{bad}")
        assert res.status_code == 400, bad


def test_who_is_the_authenticated_user(redis_url: str, prefix: str) -> None:
    app = create_app(
        {"KUE_REDIS_URL": redis_url, "KUE_PREFIX": prefix, "KUE_AUTH": "basic:ada:s3cret"}
    )
    auth = {"Authorization": "Basic " + base64.b64encode(b"ada:s3cret").decode()}
    with app.test_client() as c:
        assert c.post("/api/job", json={"type": "t"}, headers=auth).status_code == 200
        assert c.post("/api/job", json={"type": "t"}).status_code == 401  # not recorded
        entries = c.get("/api/audit", headers=auth).json["entries"]  # type: ignore[index]
    assert [(e["action"], e["who"]) for e in entries] == [("create", "ada")]
    bearer = create_app(
        {"KUE_REDIS_URL": redis_url, "KUE_PREFIX": prefix, "KUE_AUTH": "bearer:t0k"}
    )
    with bearer.test_client() as c:
        headers = {"Authorization": "Bearer t0k"}
        assert c.post("/api/job", json={"type": "t"}, headers=headers).status_code == 200
        entries = c.get("/api/audit", headers=headers).json["entries"]  # type: ignore[index]
    assert entries[0]["who"] == "token"


def test_read_only_mode_records_nothing(redis_url: str, prefix: str, queue: Queue) -> None:
    app = create_app({"KUE_REDIS_URL": redis_url, "KUE_PREFIX": prefix, "KUE_READONLY": True})
    with app.test_client() as c:
        assert c.post("/api/job", json={"type": "t"}).status_code == 405
        assert c.get("/api/audit").json == {"entries": []}
    assert queue.audit() == []


def test_the_log_is_bounded(queue: Queue) -> None:
    from kue_core.features import audit

    for i in range(300):
        queue.scripts.drive(audit.add(queue.keys, {"action": f"a{i}"}, max_entries=100))
    assert 100 <= queue.client.xlen(queue.keys.audit) < 300  # trimmed by whole nodes
    newest = queue.audit(count=1)[0]
    assert newest["action"] == "a299"
    # By age: entries older than the bound go as the next one is added.
    queue.client.delete(queue.keys.audit)
    queue.client.xadd(queue.keys.audit, {"action": "ancient"}, id="1000-0")
    queue.client.xadd(queue.keys.audit, {"action": "old"}, id="2000-0")
    queue.add_audit({"action": "now"})
    assert [e["action"] for e in queue.audit()] == ["now"]
    with pytest.raises(InvalidJob, match="no field 'password'"):
        queue.add_audit({"action": "x", "password": "hunter2"})
