"""Fan-out jobs over the JSON API: options.fanOut on POST /job (k, "all", or an object) saves a
job that runs on k workers, its JSON carries its options and runs, GET /job/{id}/runs lists
them, and bad options are answered 400 with nothing written; the answers match the OpenAPI
document."""

from __future__ import annotations

from typing import Any

import pytest
import redis
from flask.testing import FlaskClient

from kue_core import Queue
from kue_core.store import calls
from tests.conftest import keys_under
from tests.http.documented import Documented

LEASE = 30_000


def _run(queue: Queue, worker: str, result: str) -> None:
    """``worker`` claims the type's next run and completes it with ``result`` (JSON)."""
    job = queue.scripts.call(calls.claim(queue.keys, "render", worker, LEASE))
    assert isinstance(job, tuple), f"{worker} found no run to take: {job}"
    job_id, fields = job
    ended = queue.scripts.call(calls.complete(queue.keys, job_id, fields["lease"], result, None))
    assert ended.outcome == "complete"


def test_post_job_with_fan_out_runs_on_k_workers(client: FlaskClient, queue: Queue) -> None:
    body = {"type": "render", "options": {"fanOut": {"k": 2, "atOnce": 1, "maxFailedRuns": 1}}}
    res = client.post("/api/job", json=body)
    assert res.status_code == 200, res.json
    jid = res.json["id"]
    job = client.get(f"/api/job/{jid}").json
    assert job["fanOut"] == {"k": 2, "atOnce": 1, "maxFailedRuns": 1, "lateJoiners": False}
    assert job["runs"] == [] and job["state"] == "inactive"
    _run(queue, "w1", '"one"')
    runs = client.get(f"/api/job/{jid}/runs").json
    assert [(r["worker"], r["state"], r["result"]) for r in runs] == [("w1", "complete", "one")]
    assert client.get(f"/api/job/{jid}").json["state"] == "active"
    _run(queue, "w2", '"two"')
    done = client.get(f"/api/job/{jid}").json
    assert done["state"] == "complete" and done["result"] == {"w1": "one", "w2": "two"}
    assert [r["worker"] for r in done["runs"]] == ["w1", "w2"]
    assert all(r["tries"] == 1 and r["ended_at"] >= r["started_at"] for r in done["runs"])


def test_fan_out_with_only_waits_pinned_and_all_without_workers_completes(
    client: FlaskClient,
) -> None:
    body = {"type": "render", "options": {"only": ["a", "b", "c"], "fanOut": 3}}
    pinned = client.get(f"/api/job/{client.post('/api/job', json=body).json['id']}").json
    assert pinned["state"] == "pinned" and pinned["fanOut"]["k"] == 3
    # No worker serves the type: "all" has no one to reach and is done at once.
    every = client.post("/api/job", json={"type": "render", "options": {"fanOut": "all"}})
    done = client.get(f"/api/job/{every.json['id']}").json
    assert done["state"] == "complete" and done["result"] == {} and done["fanOut"]["k"] == 0


def test_a_plain_job_shows_no_fan_out(client: FlaskClient) -> None:
    jid = client.post("/api/job", json={"type": "render"}).json["id"]
    job = client.get(f"/api/job/{jid}").json
    assert "fanOut" not in job and "runs" not in job
    assert client.get(f"/api/job/{jid}/runs").json == []
    assert client.get("/api/job/999/runs").status_code == 404


@pytest.mark.parametrize(
    ("options", "says"),
    [
        ({"fanOut": 0}, "fan_out must be"),
        ({"fanOut": "some"}, "fan_out must be"),
        ({"fanOut": True}, "fan_out must be"),
        ({"fanOut": 65}, "fan_out must be"),
        ({"fanOut": {"atOnce": 1}}, "k required"),
        ({"fanOut": {"k": 2, "every": 1}}, "k required"),
        ({"fanOut": {"k": 2, "atOnce": 3}}, "at_once must be"),
        ({"fanOut": {"k": 2, "maxFailedRuns": -1}}, "max_failed_runs must be"),
        ({"fanOut": {"k": 2, "lateJoiners": True}}, "late_joiners"),
        ({"fanOut": {"k": "all", "lateJoiners": "yes"}}, "late_joiners"),
        ({"fanOut": 3, "only": ["a", "b"]}, "needs 3 workers"),
        ({"fanOut": 2, "group": "g"}, "group"),
        ({"group": "g", "fanOut": 2}, "group"),
    ],
)
def test_bad_fan_out_options_write_nothing(
    client: FlaskClient, r: redis.Redis, prefix: str, options: dict[str, Any], says: str
) -> None:
    res = client.post("/api/job", json={"type": "render", "options": options})
    assert res.status_code == 400 and says in res.json["error"], res.json
    assert keys_under(r, prefix) == set()


def test_the_answers_match_the_openapi_document(client: FlaskClient, queue: Queue) -> None:
    check = Documented(client)
    body = {"type": "render", "options": {"fanOut": {"k": 2, "atOnce": 1}}}
    created = check("post", "/api/job", "/job", json=body)
    check("post", "/api/job", "/job", 400, json={"type": "t", "options": {"fanOut": 0}})
    _run(queue, "w1", '{"n": 1}')
    check("get", f"/api/job/{created['id']}", "/job/{id}")
    check("get", f"/api/job/{created['id']}/runs", "/job/{id}/runs")
    check("get", "/api/job/999/runs", "/job/{id}/runs", 404)


def test_a_schedule_makes_pinned_fan_out_jobs(client: FlaskClient, queue: Queue) -> None:
    """A schedule's jobs fan out and are pinned as its options say (a flush on the cache
    workers every hour), and a bad fanOut is refused before the schedule is stored."""
    options = {"only": ["c1", "c2"], "fanOut": {"k": 2, "atOnce": 1}}
    body = {"every": 3_600_000, "type": "render", "options": options}
    res = client.put("/api/schedules/flush", json=body)
    assert res.status_code == 200, res.json
    assert res.json["options"] == options
    made = client.post("/api/schedules/flush/trigger", json={}).json["job"]
    job = client.get(f"/api/job/{made['id']}").json
    assert job["state"] == "pinned" and job["only"] == ["c1", "c2"]
    assert job["fanOut"] == {"k": 2, "atOnce": 1, "maxFailedRuns": 0, "lateJoiners": False}
    bad = {**body, "options": {"fanOut": {"k": 3}, "only": ["c1"]}}
    res = client.put("/api/schedules/other", json=bad)
    assert res.status_code == 400 and "needs 3 workers" in res.json["error"], res.json
    assert client.get("/api/schedules/other").status_code == 404
