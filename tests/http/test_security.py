"""Authentication, read-only mode, CSRF, CORS and the security headers."""

from __future__ import annotations

import base64
import re
from collections.abc import Iterator

import pytest
import redis
from flask import Flask
from flask.testing import FlaskClient

from kue_core import Queue
from kue_http import ConfigError, create_app
from kue_http.security import WRITES
from tests.conftest import snapshot, written_since


def _app(redis_url: str, prefix: str, **settings: object) -> Flask:
    return create_app({"KUE_REDIS_URL": redis_url, "KUE_PREFIX": prefix, **settings})


@pytest.fixture
def client(redis_url: str, prefix: str) -> Iterator[FlaskClient]:
    with _app(redis_url, prefix).test_client() as c:
        yield c


def _basic(user: str, password: str) -> dict[str, str]:
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    return {"Authorization": f"Basic {token}"}


def _write_routes(app: Flask, jid: int) -> list[tuple[str, str]]:
    """(method, url) of every write route of the app, with its parameters filled in, with and
    without a trailing slash."""
    values = {
        "job_id": str(jid),
        "state": "failed",
        "priority": "5",
        "job_type": "t",
        "to_type": "t2",
        "worker_id": "host:1:0a1b2c3d",
        "tag": "vip",
        "key": "nightly",
        "run_id": "0123456789abcdef" * 2,
    }
    out = []
    for rule in app.url_map.iter_rules():
        for method in sorted((rule.methods or set()) & WRITES):
            url = re.sub(r"<(?:\w+:)?(\w+)>", lambda m: values[m.group(1)], rule.rule)
            out += [(method, url), (method, url + "/")]
    return out


def test_basic_auth(redis_url: str, prefix: str) -> None:
    client = _app(redis_url, prefix, KUE_AUTH="basic:admin:s3cret:with:colons").test_client()
    res = client.get("/api/stats")
    assert res.status_code == 401 and res.json == {"error": "authentication required"}
    assert res.headers["WWW-Authenticate"].startswith("Basic ")
    assert client.get("/api/stats", headers=_basic("admin", "wrong")).status_code == 401
    ok_pw = "s3cret:with:colons"
    ok = _basic("admin", ok_pw)
    assert client.get("/api/stats", headers=_basic("other", ok_pw)).status_code == 401
    assert client.get("/api/stats", headers={"Authorization": "Bearer s3cret"}).status_code == 401
    assert client.get("/api/stats", headers=ok).status_code == 200
    assert client.get("/metrics").status_code == 401
    assert client.get("/metrics", headers=ok).status_code == 200
    assert client.get("/api/nothing-here").status_code == 401  # no route is revealed
    assert client.get("/api/stats/").status_code == 401
    assert client.get("/api/health").status_code == 200  # open, for load balancers
    assert client.get("/api/health/").status_code == 200


def test_bearer_token(redis_url: str, prefix: str) -> None:
    client = _app(redis_url, prefix, KUE_AUTH="bearer:t0ken").test_client()
    res = client.get("/api/job/types")
    assert res.status_code == 401 and res.headers["WWW-Authenticate"].startswith("Bearer ")

    def status(headers: dict[str, str]) -> int:
        return client.get("/api/job/types", headers=headers).status_code

    assert status({"Authorization": "Bearer nope"}) == 401
    assert status(_basic("bearer", "t0ken")) == 401
    assert status({"Authorization": "Bearer t0ken"}) == 200


@pytest.mark.parametrize("bad", ["basic:Zq9", "basic::Zq9", "basic:Zq9:", "bearer:", "Zq9:x:y"])
def test_bad_auth_setting_is_refused_without_showing_it(bad: str) -> None:
    with pytest.raises(ConfigError, match="KUE_AUTH") as caught:
        create_app({"KUE_AUTH": bad})
    assert "Zq9" not in str(caught.value)


def test_read_only_refuses_every_write(
    redis_url: str, prefix: str, r: redis.Redis, queue: Queue
) -> None:
    jid = queue.create_job("t").save().id
    app = _app(redis_url, prefix, KUE_READONLY="true")
    client = app.test_client()
    routes = _write_routes(app, jid)  # type: ignore[arg-type]
    assert len(routes) >= 18  # create, state, priority, remove, bulk x3, pause, resume; x2 (/)
    before = snapshot(r, prefix)
    for method, url in routes:
        res = client.open(url, method=method, json={"type": "t"})
        assert res.status_code == 405, (method, url)
        assert "read-only" in res.json["error"]  # type: ignore[index]
    assert not written_since(r, prefix, before)
    assert client.get(f"/api/job/{jid}").status_code == 200


def test_a_cross_site_form_cannot_write(
    client: FlaskClient, r: redis.Redis, prefix: str, queue: Queue
) -> None:
    jid = queue.create_job("t").save().id
    before = snapshot(r, prefix)
    # What a form on another site can send: a POST with a form or plain-text body.
    form = client.post("/api/job", data={"type": "t"})
    assert form.status_code == 415 and "application/json" in form.json["error"]  # type: ignore[index]
    text = client.post("/api/job", data='{"type": "t"}', content_type="text/plain")
    assert text.status_code == 415
    empty = client.post("/api/jobs/failed/retry")
    assert empty.status_code == 415
    body = client.put(f"/api/job/{jid}/state/failed", data="x=1", content_type="text/plain")
    assert body.status_code == 415
    # A write from a browser on another origin (or an opaque one) is refused.
    for origin in ("https://evil.example", "null", "http://localhost:81"):
        res = client.put(f"/api/job/{jid}/state/failed", headers={"Origin": origin})
        assert res.status_code == 403, origin
        res = client.put(f"/api/job/{jid}/state/failed/", headers={"Origin": origin})
        assert res.status_code == 403, origin
    assert client.post("/api/job/", data={"type": "t"}).status_code == 415
    assert not written_since(r, prefix, before)
    # The same origin, or no Origin (curl, scripts), may write.
    same = client.put(f"/api/job/{jid}/state/failed", headers={"Origin": "http://localhost"})
    assert same.status_code == 200
    assert client.post("/api/job", json={"type": "t"}).status_code == 200


def test_no_cors_and_security_headers(client: FlaskClient) -> None:
    preflight = client.options(
        "/api/job",
        headers={"Origin": "https://evil.example", "Access-Control-Request-Method": "POST"},
    )
    res = client.get("/api/stats", headers={"Origin": "https://evil.example"})
    for answer in (preflight, res, client.get("/api/no-such-route"), client.get("/metrics")):
        assert not [h for h, _ in answer.headers if h.lower().startswith("access-control")]
        assert answer.headers["X-Content-Type-Options"] == "nosniff"
        assert answer.headers["X-Frame-Options"] == "DENY"
        assert "frame-ancestors 'none'" in answer.headers["Content-Security-Policy"]
        assert answer.headers["Referrer-Policy"] == "no-referrer"
    assert res.headers["Cache-Control"] == "no-store"
