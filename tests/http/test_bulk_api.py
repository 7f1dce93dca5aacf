"""Bulk actions on a filter over the API: ``GET /api/jobs/match`` counts, ``POST
/api/jobs/bulk`` acts (200 when done within its wait, else 202 with where to follow it),
``GET``/``DELETE /api/jobs/bulk/<id>`` follow and stop it; bad input is a 400 that changes
nothing; the audit log records the action."""

from __future__ import annotations

import pytest
import redis
from flask.testing import FlaskClient

from kue_core import Queue
from kue_core.store import calls
from tests.conftest import wait_for


def _failed(queue: Queue, n: int, tag: str = "tenant-7") -> None:
    for i in range(n):
        job = queue.create_job("email" if i % 2 else "sms").tags(tag if i % 3 == 0 else "other")
        queue.scripts.call(calls.set_state(queue.keys, job.save().id, "failed"))  # type: ignore[arg-type]


def test_count_then_retry_what_matches(client: FlaskClient, queue: Queue) -> None:
    _failed(queue, 30)
    res = client.get("/api/jobs/match?state=failed&tag=tenant-7")
    assert res.status_code == 200 and res.json["matched"] == 10  # type: ignore[index]
    res = client.post(
        "/api/jobs/bulk", json={"action": "retry", "filter": {"state": "failed", "tag": "tenant-7"}}
    )
    assert res.status_code == 200, res.json
    body = res.json
    assert (body["matched"], body["done"], body["state"]) == (10, 10, "done")  # type: ignore[index]
    assert client.get(f"/api/jobs/bulk/{body['id']}").json == {  # type: ignore[index]
        **body,  # type: ignore[dict-item]
        "stopping": False,
    }
    assert queue.count("inactive") == 10 and queue.count("failed") == 20
    (entry,) = queue.audit(action="bulk_retry")  # the action, and what it was done to
    assert entry["jobs"] == 10 and entry["path"] == "/api/jobs/bulk"
    assert entry["detail"] == '{"state": "failed", "tag": "tenant-7"}'


def test_the_count_confirmed_or_a_409_that_does_nothing(client: FlaskClient, queue: Queue) -> None:
    _failed(queue, 30)
    given = {"state": "failed", "tag": "tenant-7"}
    assert client.get("/api/jobs/match?state=failed&tag=tenant-7").json["matched"] == 10  # type: ignore[index]
    res = client.post("/api/jobs/bulk", json={"action": "retry", "filter": given, "expect": 9})
    assert res.status_code == 409, res.json
    assert res.json == {
        "error": "the filter matches 10 jobs now, not the 9 confirmed: nothing was done",
        "matched": 10,
        "expected": 9,
    }
    assert queue.count("failed") == 30 and queue.audit() == []  # refused: not recorded
    body = {"action": "remove", "filter": given, "expect": 10, "reason": "tenant <gone>"}
    res = client.post("/api/jobs/bulk", json=body)
    assert res.status_code == 200 and res.json["done"] == res.json["expect"] == 10  # type: ignore[index]
    (entry,) = queue.audit()
    assert entry["action"] == "bulk_remove" and entry["jobs"] == 10
    assert entry["detail"] == (
        '{"state": "failed", "tag": "tenant-7"}, 10 confirmed, reason "tenant <gone>"'
    )
    assert queue.count("failed") == 20


def test_the_count_comes_with_some_of_the_jobs(client: FlaskClient, queue: Queue) -> None:
    hostile = "<script>alert(1)</script>" + "x" * 300
    jobs = [queue.create_job("email", {"title": hostile}).tags("t").save() for _ in range(3)]
    queue.create_job("email", ["not", "an", "object"]).tags("t").save()
    res = client.get("/api/jobs/match?state=inactive&tag=t&examples=10")
    assert res.status_code == 200, res.json
    body = res.json
    assert body["matched"] == 4 and len(body["examples"]) == 4  # type: ignore[index]
    titled = [e for e in body["examples"] if e["title"]]  # type: ignore[index]
    assert {e["id"] for e in titled} == {j.id for j in jobs}
    assert all(e["type"] == "email" and e["title"] == hostile[:200] for e in titled)
    res = client.get("/api/jobs/match?state=inactive")  # five unless asked: here all four
    assert res.json["matched"] == 4 and len(res.json["examples"]) == 4  # type: ignore[index]
    none = client.get("/api/jobs/match?state=inactive&examples=0").json
    assert none["matched"] == 4 and none["examples"] == []  # type: ignore[index]


def test_a_long_action_answers_202_and_is_followed(
    client: FlaskClient, queue: Queue, monkeypatch: pytest.MonkeyPatch
) -> None:
    _failed(queue, 1200)
    monkeypatch.setitem(client.application.config, "KUE_BULK_WAIT", 0.0)
    res = client.post("/api/jobs/bulk", json={"action": "remove", "filter": {"state": "failed"}})
    assert res.status_code == 202, res.json
    follow = res.json["follow"]  # type: ignore[index]
    assert res.headers["Location"] == follow
    # Running as it answers, or done already when the request's thread was held up as long.
    assert res.json["state"] in ("running", "done")  # type: ignore[index]
    done = wait_for(lambda: (s := client.get(follow).json)["state"] == "done" and s)  # type: ignore[index]
    assert done["matched"] == done["done"] == 1200
    assert queue.count("failed") == 0
    assert client.delete(follow).json["state"] == "done"  # type: ignore[index]  # too late


@pytest.mark.parametrize(
    "body",
    [
        {"action": "retry", "filter": {"state": "complete"}},
        {"action": "retry"},
        {"action": "nuke", "filter": {"state": "failed"}},
        {"action": {"retry": 1}, "filter": {"state": "failed"}},  # not a name (found by fuzzing)
        {"action": ["retry"], "filter": {"state": "failed"}},
        {"action": "retry", "filter": {"state": "failed"}, "extra": 1},
        {"action": "retry", "filter": {"state": "failed", "min_age_ms": "old"}},
        {"action": "retry", "filter": {"state": "failed"}, "expect": -1},
        {"action": "retry", "filter": {"state": "failed"}, "expect": "3"},
        ["retry"],
    ],
)
def test_bad_input_is_a_400_that_changes_nothing(
    client: FlaskClient, queue: Queue, r: redis.Redis, body: object
) -> None:
    _failed(queue, 3)
    res = client.post("/api/jobs/bulk", json=body)
    assert res.status_code == 400, res.json
    assert "error" in res.json  # type: ignore[operator]
    assert queue.count("failed") == 3
    assert not list(r.scan_iter(f"{queue.prefix}:bulk:*"))


def test_bad_queries_and_unknown_runs(client: FlaskClient) -> None:
    bad = ("", "?state=nope", "?state=failed&min_age_ms=-1", "?state=failed&tag=")
    bad += ("?state=failed&examples=-1", "?state=failed&examples=101", "?state=failed&examples=x")
    for query in bad:
        assert client.get(f"/api/jobs/match{query}").status_code == 400, query
    assert client.get(f"/api/jobs/bulk/{'a' * 32}").status_code == 404
    assert client.get("/api/jobs/bulk/nope").status_code == 404
    assert client.delete(f"/api/jobs/bulk/{'a' * 32}").status_code == 404
