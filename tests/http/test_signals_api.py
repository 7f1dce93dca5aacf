"""``POST /api/job/<id>/signal`` (kue_http/control.py): a job's signal over HTTP, resuming a
suspended job once; bad input is a 4xx that changes nothing; a signal's payload is hidden
from roles below admin like every payload."""

from __future__ import annotations

from typing import Any

from flask import Flask

from kue_core import Job, Queue, WaitForSignal
from tests.conftest import wait_for

from .test_redaction import ADA, OLGA, VIC, app_with


def waiting(q: Queue) -> int:
    """A job suspended waiting for signal ``approval``; its id."""

    def handler(job: Job) -> Any:
        if "approval" not in job.signals:
            raise WaitForSignal("approval")
        return job.signals["approval"]

    job = q.create_job("approve", {}).save()
    q.process("approve", 1, handler)
    wait_for(lambda: q.get_job(job.id).state == "suspended")  # type: ignore[arg-type]
    return job.id  # type: ignore[return-value]


def test_a_signal_resumes_a_suspended_job_once(app: Flask, redis_url: str, prefix: str) -> None:
    client = app.test_client()
    with Queue(redis_url, prefix=prefix) as q:
        job_id = waiting(q)
        res = client.post(f"/api/job/{job_id}/signal", json={"name": "approval", "payload": [1]})
        assert res.status_code == 200
        assert (
            res.json["outcome"] == "resumed" and "resumed by signal approval" in res.json["message"]
        )
        again = client.post(f"/api/job/{job_id}/signal", json={"name": "approval", "payload": 2})
        assert again.status_code == 200 and again.json["outcome"] == "already"
        wait_for(lambda: q.get_job(job_id).state == "complete")
        assert q.get_job(job_id).result == [1]
        shown = client.get(f"/api/job/{job_id}").json
        assert shown["signals"] == {"approval": [1]}
        assert shown["resumed"]["by"] == "signal"
        # Once it has ended, a new signal is refused; the same one is still "already".
        ended = client.post(f"/api/job/{job_id}/signal", json={"name": "other"})
        assert ended.status_code == 409 and "waits for no signal" in ended.json["error"]
        kept = q.create_job("approve", {}).delay(60_000).save()
        res = client.post(f"/api/job/{kept.id}/signal", json={"name": "approval"})
        assert res.json["outcome"] == "kept" and res.json["job"]["signals"] == {"approval": None}


def test_bad_signals_are_refused(app: Flask, redis_url: str, prefix: str) -> None:
    client = app.test_client()
    with Queue(redis_url, prefix=prefix) as q:
        job = q.create_job("approve", {}).save()
    url = f"/api/job/{job.id}/signal"
    for body, code, words in (
        ({}, 400, "names the signal"),
        ({"name": "with space"}, 400, "signal's name"),
        ({"name": "a", "extra": 1}, 400, "unknown field"),
        ({"name": "a", "payload": "x" * 70_000}, 400, "at most"),
        ([1], 400, "JSON object"),
    ):
        res = client.post(url, json=body)
        assert res.status_code == code and words in res.json["error"], body
    assert client.post("/api/job/99999/signal", json={"name": "a"}).status_code == 404
    assert client.get(f"/api/job/{job.id}").json.get("signals") is None  # nothing changed


def test_roles_and_redaction_of_signals(redis_url: str, prefix: str) -> None:
    app = app_with(redis_url, prefix)
    client = app.test_client()
    with Queue(redis_url, prefix=prefix) as q:
        job_id = waiting(q)
        url = f"/api/job/{job_id}/signal"
        assert client.post(url, json={"name": "approval"}, headers=VIC).status_code == 403
        res = client.post(url, json={"name": "approval", "payload": {"pin": "1234"}}, headers=OLGA)
        assert res.status_code == 200 and res.json["job"]["signals"] == "[hidden]"
        assert "signals" in res.json["job"]["hidden"]
        wait_for(lambda: q.get_job(job_id).state == "complete")
        assert client.get(f"/api/job/{job_id}", headers=ADA).json["signals"] == {
            "approval": {"pin": "1234"}
        }
        assert b"1234" not in client.get(f"/api/job/{job_id}", headers=VIC).data


def test_a_signal_that_resumed_a_job_removed_at_once_is_still_told(
    app: Flask, redis_url: str, prefix: str
) -> None:
    """A job resumed by the signal may run and be removed on completion before the answer is
    made: the answer is still the signal's outcome (200, ``"job": null``), never a 404 for a
    signal that was delivered."""
    client = app.test_client()

    def handler(job: Job) -> Any:
        if "approval" not in job.signals:
            raise WaitForSignal("approval")
        return None

    with Queue(redis_url, prefix=prefix) as q:
        ids = [q.create_job("quick", {}).remove_on_complete(True).save().id for _ in range(30)]
        q.process("quick", 4, handler)
        wait_for(lambda: q.count("suspended", "quick") == 30)
        for job_id in ids:
            res = client.post(f"/api/job/{job_id}/signal", json={"name": "approval"})
            assert res.status_code == 200, res.json
            assert res.json["outcome"] == "resumed" and f"job {job_id} " in res.json["message"]
            assert res.json["job"] is None or res.json["job"]["id"] == job_id
        wait_for(lambda: q.count("complete", "quick") + len(q.ids("inactive", "quick")) == 0)
