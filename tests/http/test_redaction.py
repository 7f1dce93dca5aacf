"""Who sees payloads (kue_http/redaction.py, docs/security.md): a viewer and an operator get a
job's data, result and progress data as ``[hidden]`` on every route and page that shows jobs
(each GET route of the app is read and searched for the payload), in the event stream too; an
admin sees them, but for the fields declared sensitive; ``POST /job/<id>/reveal`` shows a job
whole to the role allowed to, once the audit log records it, and never when it cannot."""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from flask import Flask

from kue_core import Queue
from kue_core.store import calls
from kue_http import ConfigError, create_app
from tests.conftest import wait_for
from tests.http.streams import listening

USERS = "ada:a-pass:admin,olga:o-pass:operator,vic:v-pass:viewer"
SENSITIVE = "signup:card.number,*:token,report:title"
#: A word that is in every payload below and nowhere else (not in titles a test searches).
SECRET = "zq7payload"


def who(name: str) -> dict[str, str]:
    token = base64.b64encode(f"{name}:{name[0]}-pass".encode()).decode()
    return {"Authorization": f"Basic {token}"}


ADA, OLGA, VIC = who("ada"), who("olga"), who("vic")


def app_with(redis_url: str, prefix: str, **settings: Any) -> Flask:
    return create_app(
        {
            "KUE_REDIS_URL": redis_url,
            "KUE_PREFIX": prefix,
            "KUE_USERS": USERS,
            "KUE_SENSITIVE_FIELDS": SENSITIVE,
            "KUE_SSE_KEEPALIVE": 0.2,
            **settings,
        }
    )


def complete(q: Queue, job_type: str, result: Any) -> int:
    """Run the next job of ``job_type`` as worker ``kue:test:1`` to ``result``, with progress
    data on the way; its id."""
    claimed = q.scripts.call(calls.claim(q.keys, job_type, "kue:test:1", 10_000))
    assert claimed and claimed != "paused"
    job_id, fields = claimed
    q.get_job(job_id).progress(1, 2, {"step": f"{SECRET}-progress"})
    part = json.dumps({"token": f"{SECRET}-streamed"})
    q.scripts.call(calls.stream(q.keys, int(job_id), fields["lease"], [part], 100, 10**6))
    q.scripts.call(calls.complete(q.keys, job_id, fields["lease"], json.dumps(result), None))
    return int(job_id)


@pytest.fixture
def seeded(redis_url: str, prefix: str) -> dict[str, int]:
    """A complete signup job with payload everywhere, tagged, tracked and searchable; a job
    that depends on it (its dependency's result); a schedule with data."""
    with Queue(redis_url, prefix=prefix) as q:
        data = {
            "title": "welcome mail",
            "email": f"{SECRET}-email",
            "card": {"number": f"{SECRET}-card", "brand": "visa"},
        }
        q.create_job("signup", data).tags("vip").track().save()
        signup = complete(q, "signup", {"token": f"{SECRET}-token", "sent": True})
        later = q.create_job("thanks", {"note": f"{SECRET}-later"}).depends_on(signup).save()
        q.every("nightly", 3_600_000, "signup", {"email": f"{SECRET}-schedule"})
        fan = q.create_job("fan", {"n": 1}).fan_out(1).save()  # a run's result
        q.process("fan", 1, lambda job: {"token": f"{SECRET}-run"})
        wait_for(lambda: q.get_job(fan.id).state == "complete")  # type: ignore[arg-type]
    return {"signup": signup, "later": later.id, "fan": fan.id}  # type: ignore[dict-item]


def _filled(rule: str, ids: dict[str, int]) -> str:
    """A GET rule of the app with its arguments filled in for the seeded jobs."""
    values = {
        "job_id": str(ids["signup"]),
        "state": "complete",
        "job_type": "signup",
        "tag": "vip",
        "key": "nightly",
        "rest": "0..-1",
        "worker_id": "kue:test:1",
        "group": "g",
        "run_id": "r",
        "filename": "kue.css",
    }
    return re.sub(r"<(?:\w+:)?(\w+)>", lambda m: values.get(m.group(1), "x"), rule)


def _reads(app: Flask, ids: dict[str, int]) -> Iterator[str]:
    """Every GET route of the app, filled in, and the extra readings that show jobs."""
    for rule in app.url_map.iter_rules():
        if "GET" in (rule.methods or ()) and not rule.rule.endswith("/events"):
            yield _filled(rule.rule, ids)
    later, fan = ids["later"], ids["fan"]
    yield from (
        f"/api/job/{fan}/runs",
        f"/api/job/{fan}",
        f"/job/{fan}",
        f"/api/job/{later}/dependencies",
        f"/job/{later}",
        f"/api/flow/{later}",
        f"/flow/{later}",
        "/api/jobs/complete/0..9?by=finished",
        "/api/jobs/signup/complete/0..-1",
        "/api/search?q=welcome",
        "/search?q=welcome",
        "/api/jobs/match?state=complete&examples=5",
        "/jobs/complete?type=signup",
    )


@pytest.mark.parametrize("user", ["viewer", "operator"])
def test_no_payload_is_shown_to_a_role_below_admin(
    redis_url: str, prefix: str, seeded: dict[str, int], user: str
) -> None:
    app = app_with(redis_url, prefix)
    client = app.test_client()
    headers = VIC if user == "viewer" else OLGA
    read = 0
    for url in _reads(app, seeded):
        res = client.get(url, headers=headers)
        assert res.status_code < 500, url
        read += res.status_code == 200
        assert SECRET.encode() not in res.data, url
        assert b"welcome mail" not in res.data or "search" in url, url  # the title is data
    assert read >= 40
    job = client.get(f"/api/job/{seeded['signup']}", headers=headers).json
    assert job["data"] == job["result"] == job["progress_data"] == "[hidden]"
    assert job["hidden"] == ["data", "result", "progress_data"]
    assert job["tags"] == ["vip"] and job["state"] == "complete"  # the rest is shown
    # The admin sees the same routes with the payloads, but for the sensitive fields.
    page = client.get(f"/job/{seeded['signup']}", headers=ADA)
    assert f"{SECRET}-email".encode() in page.data and f"{SECRET}-card".encode() not in page.data


def test_an_admin_sees_payloads_but_the_sensitive_fields(
    redis_url: str, prefix: str, seeded: dict[str, int]
) -> None:
    client = app_with(redis_url, prefix).test_client()
    job = client.get(f"/api/job/{seeded['signup']}", headers=ADA).json
    assert job["data"]["email"] == f"{SECRET}-email" and job["data"]["title"] == "welcome mail"
    assert job["data"]["card"] == {"number": "[hidden]", "brand": "visa"}
    assert job["result"] == {"token": "[hidden]", "sent": True}  # *:token: every type
    assert job["hidden"] == ["data.card.number", "result.token"]
    deps = client.get(f"/api/job/{seeded['later']}/dependencies", headers=ADA).json
    assert deps["results"] == {str(seeded["signup"]): {"token": "[hidden]", "sent": True}}
    listed = client.get("/api/jobs/signup/complete/0..-1", headers=ADA).json
    assert listed[0]["data"]["card"]["number"] == "[hidden]"
    with Queue(redis_url, prefix=prefix) as q:  # a sensitive title is hidden in lists too
        q.create_job("report", {"title": f"{SECRET}-title"}).save()
    for url in ("/api/jobs/report/inactive/0..-1", "/jobs/inactive", "/"):
        res = client.get(url, headers=ADA)
        assert res.status_code == 200 and SECRET.encode() not in res.data, url


def test_a_sensitive_path_leads_into_each_signal_and_step(redis_url: str, prefix: str) -> None:
    """``signals`` and ``steps`` map names to payloads: a sensitive path is masked inside each
    payload (not read as the map's own keys), and ``hidden`` names where."""
    with Queue(redis_url, prefix=prefix) as q:
        q.create_job("signup", {}).save()
        claimed = q.scripts.call(calls.claim(q.keys, "signup", "kue:test:1", 10_000))
        assert claimed and claimed != "paused"
        job_id, fields = int(claimed[0]), claimed[1]
        card = json.dumps({"card": {"number": f"{SECRET}-signal", "brand": "visa"}})
        assert q.scripts.call(calls.signal(q.keys, job_id, "approval", card)) == "kept"
        charge = json.dumps({"token": f"{SECRET}-step", "amount": 40})
        q.scripts.call(calls.step(q.keys, job_id, fields["lease"], "charge", charge, 1))
        q.scripts.call(calls.step(q.keys, job_id, fields["lease"], "card", '"plain"', 1))
    client = app_with(redis_url, prefix).test_client()
    job = client.get(f"/api/job/{job_id}", headers=ADA).json
    assert job["signals"] == {"approval": {"card": {"number": "[hidden]", "brand": "visa"}}}
    assert job["steps"] == {"charge": {"token": "[hidden]", "amount": 40}, "card": "plain"}
    assert sorted(job["hidden"]) == ["signals.approval.card.number", "steps.charge.token"]
    page = client.get(f"/job/{job_id}", headers=ADA)
    assert page.status_code == 200 and SECRET.encode() not in page.data
    shown = client.get(f"/api/job/{job_id}", headers=VIC).json
    assert shown["signals"] == shown["steps"] == "[hidden]"
    revealed = client.post(f"/api/job/{job_id}/reveal", json={}, headers=ADA).json
    assert revealed["job"]["steps"]["charge"]["token"] == f"{SECRET}-step"


def test_a_fan_out_job_s_result_is_masked_per_worker_and_revealed_whole(
    redis_url: str, prefix: str, seeded: dict[str, int]
) -> None:
    """A fan-out job's result maps each worker to its run's result: a sensitive path leads
    into each; a reveal shows the runs' results whole too (they were masked in place)."""
    client = app_with(redis_url, prefix).test_client()
    job = client.get(f"/api/job/{seeded['fan']}", headers=ADA).json
    (worker,) = job["result"]
    assert job["result"] == {worker: {"token": "[hidden]"}}
    assert job["runs"][0]["result"] == {"token": "[hidden]"}
    assert sorted(job["hidden"]) == [f"result.{worker}.token", f"runs.{worker}.token"]
    revealed = client.post(f"/api/job/{seeded['fan']}/reveal", json={}, headers=ADA).json
    assert revealed["job"]["result"][worker]["token"] == f"{SECRET}-run"
    assert revealed["job"]["runs"][0]["result"]["token"] == f"{SECRET}-run"


def test_without_users_everyone_sees_everything_as_before(
    redis_url: str, prefix: str, seeded: dict[str, int]
) -> None:
    client = create_app({"KUE_REDIS_URL": redis_url, "KUE_PREFIX": prefix}).test_client()
    job = client.get(f"/api/job/{seeded['signup']}").json
    assert job["data"]["card"]["number"] == f"{SECRET}-card" and "hidden" not in job


def test_reveal_is_for_the_allowed_role_and_recorded_first(
    redis_url: str, prefix: str, seeded: dict[str, int], r: redis.Redis
) -> None:
    client = app_with(redis_url, prefix).test_client()
    url = f"/api/job/{seeded['signup']}/reveal"
    for headers in (VIC, OLGA):
        refused = client.post(url, json={}, headers=headers)
        assert refused.status_code == 403 and SECRET.encode() not in refused.data
    assert r.xlen(f"{prefix}:audit") == 0  # nothing revealed, nothing recorded
    shown = client.post(url, json={}, headers=ADA)
    assert shown.status_code == 200
    assert shown.json["revealed"] == ["data.card.number", "result.token"]
    assert shown.json["job"]["data"]["card"]["number"] == f"{SECRET}-card"
    assert shown.json["job"]["result"]["token"] == f"{SECRET}-token"
    (entry,) = client.get("/api/audit", headers=ADA).json["entries"]
    assert entry["action"] == "reveal" and entry["who"] == "ada"
    assert entry["path"] == url and entry["detail"] == "revealed data.card.number, result.token"
    assert SECRET not in json.dumps(entry)
    assert client.post(url, json={"x": 1}, headers=ADA).status_code == 400
    assert client.post("/api/job/999999/reveal", json={}, headers=ADA).status_code == 404
    assert client.get(url, headers=ADA).status_code == 405  # never on a GET


def test_the_reveal_role_is_a_setting(redis_url: str, prefix: str, seeded: dict[str, int]) -> None:
    client = app_with(redis_url, prefix, KUE_REVEAL_ROLE="viewer").test_client()
    url = f"/api/job/{seeded['signup']}/reveal"
    shown = client.post(url, json={}, headers=VIC)
    assert shown.status_code == 200
    assert shown.json["revealed"] == ["data", "result", "progress_data"]
    assert shown.json["job"]["data"]["email"] == f"{SECRET}-email"
    # A viewer may reveal, and still may not write.
    retry = client.post(f"/api/job/{seeded['signup']}/retry", json={}, headers=VIC)
    assert retry.status_code == 403


def test_no_reveal_when_the_audit_log_cannot_record_it(
    redis_url: str, prefix: str, seeded: dict[str, int], r: redis.Redis
) -> None:
    r.set(f"{prefix}:audit", "not a stream")  # every XADD to it fails
    client = app_with(redis_url, prefix).test_client()
    res = client.post(f"/api/job/{seeded['signup']}/reveal", json={}, headers=ADA)
    assert res.status_code == 503 and SECRET.encode() not in res.data


def test_no_reveal_in_read_only_mode(redis_url: str, prefix: str, seeded: dict[str, int]) -> None:
    client = app_with(redis_url, prefix, KUE_READONLY=True).test_client()
    res = client.post(f"/api/job/{seeded['signup']}/reveal", json={}, headers=ADA)
    assert res.status_code == 405 and SECRET.encode() not in res.data


def test_an_operator_acts_on_jobs_an_admin_on_settings_and_data(
    redis_url: str, prefix: str, seeded: dict[str, int]
) -> None:
    client = app_with(redis_url, prefix).test_client()
    job = seeded["signup"]
    retried = client.post(f"/api/job/{job}/retry", json={}, headers=OLGA)
    assert retried.status_code == 200 and retried.json["job"]["data"] == "[hidden]"
    for method, url, body in (
        ("PUT", f"/api/job/{job}/data", {"email": "x"}),
        ("PUT", "/api/limits/signup", {"concurrency": 2}),
        ("PUT", "/api/retention", {"complete": {"count": 10}}),
        ("POST", "/api/schedules/nightly/pause", {}),
        ("DELETE", "/api/schedules/nightly", None),
    ):
        refused = client.open(url, method=method, json=body, headers=OLGA)
        assert refused.status_code == 403, url
        assert refused.json == {"error": "this needs the admin role; yours is operator"}
    with Queue(redis_url, prefix=prefix) as q:
        assert q.get_job(job).data["email"] == f"{SECRET}-email"
        assert q.schedule("nightly")["paused"] is False
    assert client.put(f"/api/job/{job}/data", json={"e": 1}, headers=ADA).status_code == 200
    assert client.post("/api/schedules/nightly/pause", json={}, headers=ADA).status_code == 200


def test_an_admin_only_button_is_not_shown_to_an_operator(
    redis_url: str, prefix: str, seeded: dict[str, int]
) -> None:
    client = app_with(redis_url, prefix).test_client()
    with Queue(redis_url, prefix=prefix) as q:
        waiting = q.create_job("signup", {"card": {"number": "4111"}}).save()
    for headers, shown in ((OLGA, False), (ADA, True)):
        page = client.get(f"/job/{waiting.id}", headers=headers).data
        assert (b'id="edit-data"' in page) is shown
        assert (b'id="reveal"' in page) is shown
        schedules = client.get("/schedules", headers=headers).data
        assert (b"Pause" in schedules) is shown
        assert b"Trigger" in schedules  # an operator's action


def test_the_event_stream_hides_payloads(redis_url: str, prefix: str) -> None:
    app = app_with(redis_url, prefix)
    url = "/api/events?type=signup"
    with Queue(redis_url, prefix=prefix) as q:
        q.create_job("signup", {"email": "e"}).save()
        with listening({"vic": (app, url, VIC), "ada": (app, url, ADA)}) as seen:
            complete(q, "signup", {"token": f"{SECRET}-token", "n": 1})
    by_event = {name: {e["event"]: e["args"] for e in events} for name, events in seen.items()}
    assert by_event["vic"]["complete"] == ["complete", "[hidden]"]
    assert by_event["vic"]["progress"][2] == "[hidden]"
    assert by_event["ada"]["complete"] == ["complete", {"token": "[hidden]", "n": 1}]
    assert by_event["ada"]["progress"][2] == {"step": f"{SECRET}-progress"}


@pytest.mark.parametrize(
    ("settings", "says"),
    [
        ({"KUE_SENSITIVE_FIELDS": "card.number"}, "entry 1"),
        ({"KUE_SENSITIVE_FIELDS": "signup:card..number"}, "a path of keys"),
        ({"KUE_SENSITIVE_FIELDS": ":token"}, "written <type>:<path>"),
        ({"KUE_REVEAL_ROLE": "root"}, "KUE_REVEAL_ROLE must be one of"),
    ],
)
def test_settings_that_cannot_be_read_stop_the_app(
    redis_url: str, prefix: str, settings: dict[str, str], says: str
) -> None:
    with pytest.raises(ConfigError, match=re.escape(says)):
        app_with(redis_url, prefix, **settings)


def test_only_an_admin_saves_a_unique_job_whose_duplicate_replaces_data(
    redis_url: str, prefix: str
) -> None:
    """A duplicate of a ``reuse`` or ``debounce`` key replaces the holder's data: an edit of a
    job's data, which is an admin's write; an operator saves the other modes."""
    client = app_with(redis_url, prefix).test_client()
    for mode in ("reuse", "debounce"):
        body = {"type": "t", "data": {"v": 1}, "options": {"unique": {"key": "k", "mode": mode}}}
        refused = client.post("/api/job", json=body, headers=OLGA)
        assert refused.status_code == 403 and "admin role" in refused.json["error"]
        assert client.post("/api/job", json=body, headers=ADA).status_code == 200
    plain = {"type": "t", "data": {}, "options": {"unique": {"key": "other"}}}
    assert client.post("/api/job", json=plain, headers=OLGA).status_code == 200
    with Queue(redis_url, prefix=prefix) as q:
        assert q.count("inactive", "t") + q.count("delayed", "t") == 3  # none from olga's
