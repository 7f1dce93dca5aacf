"""Kue's Express router takes ``/job/types/`` for ``/job/types``, and Kue clients send the slash:
every route of the API answers one trailing slash as it answers none, directly, never by a
redirect. The routes are read from the app, so that a new one is checked too."""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient

import kue_rules
from kue_core import Queue
from kue_http import close, create_app
from kue_http.api import api
from tests.conftest import wait_for

#: A bulk action each app recorded (``_seed``): one that matched nothing.
RUN = "0123456789abcdef" * 2
#: Stands for the id of the worker process each app runs (``seeded``), in paths and answers.
WORKER = "{worker}"
#: A value for each path argument of the routes; a listing (``rest``) in each of its forms.
ARGUMENTS: dict[str, list[str]] = {
    "job_id": ["1"],
    "state": ["failed"],
    "priority": ["high"],
    "job_type": ["email"],
    "to_type": ["sms"],
    "worker_id": [WORKER],
    "tag": ["vip"],
    "key": ["nightly"],
    "run_id": [RUN],
    "rest": [
        "0..9",
        "0..9/desc",
        "inactive/0..9",
        "inactive/0..9/asc",
        "email/inactive/0..9",
        "email/inactive/0..9/desc",
        "email/inactive/stats",
    ],
}
#: The job a route needs to answer 200, by the end of its path, where job 1 (inactive) would
#: be refused (see ``_seed``).
JOB_FOR = {"/job/1/retry": "2", "/job/1/promote": "3"}
#: Query strings a route needs to answer 200.
QUERIES = {
    "/api/job/search": "q=email",
    "/api/search": "q=email",
    "/api/jobs/match": "state=failed",
}
#: What a POST sends (the bulk actions ignore it, but a POST must carry JSON).
BODY = {"type": "email"}
#: What the routes that read a body send, by the end of their path.
BODIES = {
    "/cancel": {"reason": "by hand"},
    "/jobs/bulk": {"action": "retry", "filter": {"state": "failed", "type": "nobody"}},
    "/job/2/retry": {},
    "/job/3/promote": {},
    "/reveal": {},
    "/signal": {"name": "approval", "payload": {"by": "ann"}},
    "/data": {"title": "edited"},
    "/only": {"workers": ["gpu-1"]},
    "/stop": {"timeout": 0},
    "/retention": {"complete": {"count": 10}},
    "/schedules/nightly": {"every": 3_600_000, "type": "email"},
    "/limits/email": {"concurrency": 2},
    "/rules/retry": {"watcher": "rules-in"},
}


def _routes() -> list[tuple[str, str, str]]:
    """(method, path, query) of every route of the API blueprint, its arguments filled in."""
    app = Flask(__name__)
    app.register_blueprint(api, url_prefix="/api")
    routes = []
    for rule in app.url_map.iter_rules():
        if not rule.endpoint.startswith(f"{api.name}."):
            continue
        missing = rule.arguments - set(ARGUMENTS)
        assert not missing, f"{rule.rule}: give {missing} a value in ARGUMENTS"
        names = sorted(rule.arguments)
        for values in itertools.product(*(ARGUMENTS[name] for name in names)):
            path = rule.rule
            for name, value in zip(names, values, strict=True):
                path = re.sub(rf"<(?:\w+:)?{name}>", value, path)
            for end, job_id in JOB_FOR.items():
                if path.endswith(end):
                    path = path.replace("/job/1/", f"/job/{job_id}/")
            for method in sorted((rule.methods or set()) - {"HEAD", "OPTIONS"}):
                routes.append((method, path, QUERIES.get(rule.rule, "")))
    return routes


def _seed(queue: Queue) -> None:
    """Job 1 inactive, 2 failed, 3 delayed, all of type email: every route answers 200."""
    queue.create_job("email", {"title": "hello"}).save()
    queue.create_job("email").save()
    queue.get_job(2).set_state("failed")
    queue.create_job("email").delay(60_000).save()
    queue.every("nightly", 3_600_000, "email", offset=3_600_000)  # due in an hour
    queue.bulk("retry", {"state": "failed", "type": "nobody"}, run_id=RUN)
    # A kue rules watcher known as "rules-in", its lists in the prefix's slot (a cluster's).
    lists = {name: f"{queue.prefix}:rules/{name}" for name in ("input", "taken", "failed")}
    record = {"label": "rules-in", **lists, "events": None, "rules": [], "holder": "", "seen": 1}
    queue.client.hset(kue_rules.Store(queue).watchers, "rules-in", json.dumps(record))


@pytest.fixture
def seeded(redis_url: str, prefix: str) -> Iterator[Callable[..., FlaskClient]]:
    """Clients of apps seeded alike, each under its own prefix (``prefix`` + the suffix);
    ``worker=True``: the app's queue runs a worker too (of a type without jobs), whose id
    takes the place of ``WORKER`` in the client's requests and answers."""
    apps: list[Flask] = []

    def make(suffix: str, worker: bool = False) -> FlaskClient:
        app = create_app({"KUE_REDIS_URL": redis_url, "KUE_PREFIX": prefix + suffix})
        queue = app.extensions["kue"]
        _seed(queue)
        apps.append(app)
        client = app.test_client()
        if worker:
            queue.process("idle", lambda job: None)
            [info] = wait_for(queue.workers)
            client.environ_base["kue.test.worker"] = info["id"]
        return client

    yield make
    for app in apps:
        app.extensions["kue"].shutdown(0)
        close(app)


def _answer(client: FlaskClient, method: str, url: str) -> tuple[int, str, bytes]:
    body = next(
        (b for end, b in BODIES.items() if url.split("?")[0].rstrip("/").endswith(end)), None
    )
    if body is None and method == "POST":
        body = BODY
    worker = client.environ_base.get("kue.test.worker", WORKER)
    res = client.open(url.replace(WORKER, worker), method=method, json=body, buffered=False)
    try:
        if res.mimetype == "text/event-stream":
            return res.status_code, res.mimetype, next(iter(res.response))  # endless: its start
        return res.status_code, res.mimetype, _comparable(res.get_data(), worker)
    finally:
        res.close()


def _comparable(data: bytes, worker: str) -> bytes:
    """An answer without what differs between two apps seeded alike: the id of their worker,
    and the times of the job that job control answers."""
    data = data.replace(worker.encode(), WORKER.encode())
    if data.startswith(b'{"complete"'):  # the retention, and Redis memory, which moves
        return json.dumps({**json.loads(data), "memory": None}).encode()
    if data.startswith(b'{"id"') and b'"matched"' in data:  # a bulk action: its id, times
        times = ("id", "started_at", "updated_at")
        return json.dumps({k: v for k, v in json.loads(data).items() if k not in times}).encode()
    if data.startswith(b'{"key"'):  # a schedule
        return json.dumps(_timeless(json.loads(data))).encode()
    if not data.startswith((b'{"message"', b'{"revealed"')):
        return data
    body = json.loads(data)
    if "job" in body:
        body["job"] = {k: v for k, v in body["job"].items() if not k.endswith("_at")}
        body["job"].pop("tick", None)  # a job a schedule made: when
    if "schedule" in body:
        body["schedule"] = _timeless(body["schedule"])
    return json.dumps(body).encode()


def _timeless(schedule: dict[str, Any]) -> dict[str, Any]:
    """A schedule without its times, which differ between two apps seeded alike."""
    times = ("anchor", "next", "upcoming", "created_at", "updated_at", "last_job")
    return {k: v for k, v in schedule.items() if k not in times}


def _jobs_and_pauses(client: FlaskClient) -> tuple[Any, ...]:
    """What a write may have changed."""
    jobs = client.get("/api/jobs/0..-1").json
    return (
        [(j["id"], j["type"], j["state"], j["priority"]) for j in jobs],  # type: ignore[union-attr]
        client.get("/api/paused").json,
    )


@pytest.mark.parametrize(("method", "path", "query"), _routes())
def test_a_trailing_slash_is_answered_as_none(
    seeded: Callable[..., FlaskClient], method: str, path: str, query: str
) -> None:
    """Reads go twice to one app; a write goes to each of two apps seeded alike, which must
    answer and change the same."""
    worker = WORKER in path
    plain = seeded("", worker)
    slashed = plain if method == "GET" else seeded("b", worker)
    question = f"?{query}" if query else ""
    without = _answer(plain, method, path + question)
    assert without[0] == 200, without
    answer = _answer(slashed, method, f"{path}/{question}")
    if method == "GET" and answer != without:
        # A read of the clock's minutes (throughput) may cross into the next minute between
        # the two: then it answers as a read made after it does.
        without = _answer(plain, method, path + question)
    assert answer == without
    assert _jobs_and_pauses(slashed) == _jobs_and_pauses(plain)
    if worker:  # each app's worker was stopped
        for client in (plain, slashed):
            assert wait_for(client.application.extensions["kue"].stopped_remotely.is_set)


def test_the_table_holds_every_kind_of_route() -> None:
    """It is read from the app: the test above cannot pass by checking nothing."""
    routes = {(method, path) for method, path, _ in _routes()}
    assert {
        ("GET", "/api/job/types"),
        ("GET", "/api/jobs/email/inactive/0..9/desc"),
        ("POST", "/api/job"),
        ("PUT", "/api/job/1/state/failed"),
        ("DELETE", "/api/job/1"),
        ("PUT", "/api/paused/email"),
        ("POST", "/api/job/1/cancel"),
        ("PUT", "/api/job/1/type/sms"),
        ("PUT", "/api/job/1/data"),
        ("POST", f"/api/workers/{WORKER}/stop"),
        ("GET", "/api/events"),
    } <= routes


def test_the_dashboard_keeps_its_routes(seeded: Callable[..., FlaskClient]) -> None:
    client = seeded("")
    assert client.get("/jobs/inactive").status_code == 200
    assert client.get("/jobs/inactive/").status_code == 404  # unchanged: strict, as before
    assert client.get("/api/stats/").status_code == 200
