"""The OpenAPI document (``GET /api/openapi.json``): served, valid, complete (every route of
the API blueprint, nothing else), and true: schemathesis fuzzes the app from it, against the
suite's real Redis, and every answer must be documented and match its schema."""

from __future__ import annotations

import base64
import json
import threading
from collections import Counter, defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema_rs
import pytest
import schemathesis
from flask import Flask
from flask.testing import FlaskClient
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.core.failures import FailureGroup
from schemathesis.core.result import Ok
from schemathesis.schemas import BaseSchema
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from kue_core import Job, NoRetry, Queue
from kue_http import create_app
from kue_http.config import DEFAULTS
from kue_http.openapi import document
from tests.conftest import on_cluster, wait_for

METHODS = {"get", "put", "post", "delete", "patch"}


def _document(client: FlaskClient, **kwargs: Any) -> dict[str, Any]:
    res = client.get("/api/openapi.json", **kwargs)
    assert res.status_code == 200 and res.mimetype == "application/json"
    doc: dict[str, Any] = res.json  # type: ignore[assignment]
    return doc


def _operations(doc: dict[str, Any]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    for path, item in doc["paths"].items():
        for method, operation in item.items():
            if method in METHODS:
                yield path, method, operation


def _schemas(node: Any) -> Iterator[dict[str, Any]]:
    """Every schema object of the document (under a ``schema`` key or in components)."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "schema" and isinstance(value, dict):
                yield value
            elif key == "schemas" and isinstance(value, dict):
                yield from value.values()
            else:
                yield from _schemas(value)
    elif isinstance(node, list):
        for value in node:
            yield from _schemas(value)


def test_the_document_is_served_and_valid(client: FlaskClient) -> None:
    doc = _document(client)
    assert doc["openapi"].startswith("3.1.") and doc["servers"] == [{"url": "/api"}]
    schema = schemathesis.openapi.from_dict(doc)
    schema.validate()  # the OpenAPI 3.1 meta-schema
    for each in _schemas(doc):  # which leaves schema objects to JSON Schema's own
        jsonschema_rs.meta.validate(each)
    for path, method, operation in _operations(doc):
        responses = operation["responses"]
        assert "200" in responses, f"{method} {path}"
        if path != "/health":  # the only route open without credentials
            assert "401" in responses, f"{method} {path}"
        if method != "get":
            assert {"403", "405", "415"} <= set(responses), f"{method} {path}"
    assert client.get("/api/openapi.json").headers["Cache-Control"] == "no-store"


def test_every_route_of_the_api_and_nothing_else_is_documented(
    app: Flask, client: FlaskClient
) -> None:
    """Each documented operation, with its parameters' examples, must reach a rule of the
    API blueprint with that method; and each rule and method must be reached by one."""
    doc = _document(client)
    urls = app.url_map.bind("localhost")
    reached = set()
    for path, method, operation in _operations(doc):
        params = [*doc["paths"][path].get("parameters", []), *operation.get("parameters", [])]
        url = path
        for param in params:
            if param["in"] == "path":
                value = param.get("example", param["schema"].get("enum", [None])[0])
                assert value is not None, f"{method} {path}: give {param['name']} an example"
                url = url.replace("{" + param["name"] + "}", str(value))
        assert "{" not in url, f"{method} {path}: a path parameter is not declared"
        rule, _ = urls.match("/api" + url, method=method.upper(), return_rule=True)
        assert rule.endpoint.startswith("kue_api."), f"{method} {path} reaches {rule}"
        reached.add((rule.rule, method.upper()))
    routes = {
        (rule.rule, method)
        for rule in app.url_map.iter_rules()
        if rule.endpoint.startswith("kue_api.")
        for method in rule.methods or ()
        if method not in ("HEAD", "OPTIONS")
    }
    assert reached == routes
    assert "/metrics" not in doc["paths"] and "/events" in doc["paths"]


def test_servers_and_security_follow_the_settings(redis_url: str, prefix: str) -> None:
    app = create_app(
        {
            "KUE_REDIS_URL": redis_url,
            "KUE_PREFIX": prefix,
            "KUE_API_PREFIX": "/kue",
            "KUE_AUTH": "basic:admin:s3cret-value",
        }
    )
    client = app.test_client()
    assert client.get("/kue/openapi.json").status_code == 401
    auth = {"Authorization": "Basic YWRtaW46czNjcmV0LXZhbHVl"}  # admin:s3cret-value
    res = client.get("/kue/openapi.json", headers=auth, environ_overrides={"SCRIPT_NAME": "/app"})
    assert res.status_code == 200 and b"s3cret" not in res.data
    doc: dict[str, Any] = res.json  # type: ignore[assignment]
    assert doc["servers"] == [{"url": "/app/kue"}]
    assert doc["security"] == [{"basicAuth": []}]
    assert doc["paths"]["/health"]["get"]["security"] == []
    bearer = create_app(
        {"KUE_REDIS_URL": redis_url, "KUE_PREFIX": prefix, "KUE_AUTH": "bearer:tok"}
    ).test_client()
    doc = _document(bearer, headers={"Authorization": "Bearer tok"})
    assert doc["security"] == [{"bearerAuth": []}]
    assert set(doc["components"]["securitySchemes"]) == {"basicAuth", "bearerAuth"}


# -- what the fuzz found --------------------------------------------------------------------
def test_delay_and_ttl_are_bounded_as_documented(client: FlaskClient) -> None:
    """A delay past ~9.2e18 ms overflowed the scripts' integers: a job with a negative delay."""
    options = client.get("/api/openapi.json").json["components"]["schemas"]["NewJob"]  # type: ignore[index]
    most = options["properties"]["options"]["properties"]["delay"]["maximum"]
    for name in ("delay", "ttl"):
        res = client.post("/api/job", json={"type": "t", "options": {name: most + 1}})
        assert res.status_code == 400 and name in res.json["error"]  # type: ignore[index]
    res = client.post("/api/job", json={"type": "t", "options": {"delay": most, "ttl": most}})
    job = client.get(f"/api/job/{res.json['id']}").json  # type: ignore[index]
    assert job["delay"] == most and job["ttl"] == most and job["promote_at"] > most  # type: ignore[index]


@pytest.mark.parametrize("rest", ["a%0Ab/inactive/stats", "inactive/0..9%0A", "0..9%0A/asc"])
def test_a_line_break_in_a_listing_is_bad_input(client: FlaskClient, rest: str) -> None:
    """Werkzeug's path converter stopped at a line break: these were 404 (or a 200 for a
    range followed by one), not 400."""
    res = client.get(f"/api/jobs/{rest}")
    assert res.status_code == 400 and res.json["error"]  # type: ignore[index]


# -- the fuzz ------------------------------------------------------------------------------
#: What the fuzz starts from: a job of each state, so that reading routes meet real jobs
#: (the document's examples use id 1), and a live worker holding one of them.
def _seed(queue: Queue, release: threading.Event) -> None:
    def handler(job: Job) -> Any:
        job.log("handling %s", job.id)
        job.progress(1, 2, {"step": "half"})
        if job.fan_out() is None:  # (a fan-out job's runs do not stream)
            job.stream({"step": "half"})
        if job.data.get("hold"):
            release.wait(60)
        if job.data.get("fail"):
            raise NoRetry("asked to fail")
        return {"done": job.id}

    def state(job: Job) -> str | None:
        return queue.get_job(job.id).state  # type: ignore[arg-type]

    done = queue.create_job("fuzz", {"title": "complete me"}).save()  # id 1
    failed = queue.create_job("fuzz", {"fail": True}).attempts(2).save()
    queue.create_job("email", {"title": "hello"}).priority("high").ttl(5000).save()
    queue.create_job("email", {"to": "x"}).delay(3_600_000).backoff(True).save()
    held = queue.create_job("fuzz", {"hold": True}).save()
    fanned = queue.create_job("fuzz", {"title": "fan"}).fan_out(1).save()
    queue.process("fuzz", 2, handler)
    wait_for(lambda: state(done) == "complete", timeout=10)
    wait_for(lambda: state(failed) == "failed", timeout=10)
    wait_for(lambda: state(held) == "active", timeout=10)
    wait_for(lambda: state(fanned) == "complete", timeout=10)
    wait_for(lambda: queue.workers(), timeout=10)
    queue.pause("paused-type")


@pytest.fixture
def fuzz_schema(app: Flask, queue: Queue) -> Iterator[BaseSchema]:
    release = threading.Event()
    _seed(queue, release)
    yield schemathesis.openapi.from_wsgi("/api/openapi.json", app)
    release.set()


#: Examples per operation and generation mode (valid input, then invalid input): about 20 s
#: in all on a slow 2-core machine. On a cluster, and as a role, fewer: the app answers the
#: same whatever the Redis and the role (what a cluster adds is where the keys go, which a
#: route's first cases reach; what a role adds is its refusals and masks, likewise).
EXAMPLES = 50
FEWER = 20
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
]


#: The fuzz in parts, by the first segment of an operation's path, so that parallel test
#: workers share it (the whole took 80-100 s alone); "other" takes every path not named.
SHARDS = {
    "job": {"job"},
    "jobs": {"jobs"},
    "schedules": {"schedules"},
    "limits": {"limits", "paused", "groups", "workers"},
}


def _shard(path: str) -> str:
    segment = path.split("/")[1]
    return next((name for name, segments in SHARDS.items() if segment in segments), "other")


@pytest.mark.slow
@pytest.mark.timeout(180)
@pytest.mark.parametrize("shard", [*SHARDS, "other"])
def test_fuzz_the_api_from_its_document(
    fuzz_schema: BaseSchema, redis_url: str, shard: str
) -> None:
    """Every operation of ``shard`` but ``/events`` (an endless stream), with valid then
    invalid input; the failures of all its operations are reported together."""
    answers = _fuzz(fuzz_schema, shard, {}, FEWER if on_cluster(redis_url) else EXAMPLES)
    # The seeded jobs were met: the shapes of real jobs, logs and histories were checked.
    for label in ("GET /job/{id}", "GET /job/{id}/log", "GET /job/{id}/history"):
        assert shard != "job" or answers[label][200] > 0, label


#: A user who reads the document.
VIEWER = ("vic", "v-pass")


def basic(name: str, password: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{name}:{password}".encode()).decode()}


#: Users of the fuzz by role (kue_http/users.py), fields masked for every role, and payload
#: limits (docs/payloads.md): data above 200 bytes goes to a file store, above 5,000 is 413.
ROLE_SETTINGS = {
    "KUE_USERS": "ada:a-pass:admin,olga:o-pass:operator,vic:v-pass:viewer",
    "KUE_SENSITIVE_FIELDS": "*:title,fuzz:step,*:done",
    "KUE_MAX_DATA_BYTES": "200",
    "KUE_MAX_PAYLOAD_BYTES": "5000",
}


@pytest.fixture
def role_schema(redis_url: str, prefix: str, queue: Queue, tmp_path: Path) -> Iterator[BaseSchema]:
    settings = {**ROLE_SETTINGS, "KUE_PAYLOAD_STORE": tmp_path.as_uri()}
    app = create_app({"KUE_REDIS_URL": redis_url, "KUE_PREFIX": prefix, **settings})
    release = threading.Event()
    _seed(queue, release)
    yield schemathesis.openapi.from_wsgi("/api/openapi.json", app, headers=basic(*VIEWER))
    release.set()


@pytest.mark.slow
@pytest.mark.single_node  # roles and payload limits are the app's, whatever the Redis
@pytest.mark.timeout(180)
@pytest.mark.parametrize(("user", "role"), [("olga:o-pass", "operator"), ("ada:a-pass", "admin")])
def test_fuzz_the_job_routes_as_a_role(role_schema: BaseSchema, user: str, role: str) -> None:
    """The job routes as an operator (payloads hidden, an admin's writes refused) and as an
    admin (sensitive fields hidden, a reveal recorded), with payload limits (large data in the
    store, too large 413), answer as the document says."""
    answers = _fuzz(role_schema, "job", basic(*user.split(":")), FEWER)
    assert answers["GET /job/{id}"][200] > 0
    refused = answers["PUT /job/{id}/data"][403] + answers["POST /job/{id}/reveal"][403]
    assert (refused > 0) is (role == "operator")


def _fuzz(
    schema: BaseSchema, shard: str, headers: dict[str, str], examples: int
) -> dict[str, Counter[int]]:
    """Fuzz the operations of ``shard`` with ``headers`` on every request, ``examples`` cases
    an operation and mode; how each answered."""
    results = list(schema.get_all_operations())
    operations = [result.ok() for result in results if isinstance(result, Ok)]
    assert len(operations) == len(results), "some operations could not be read"
    operations = [op for op in operations if _shard(op.path) == shard and op.path != "/events"]
    assert operations, f"no operation in {shard}"
    # Reads first, while the seeded jobs are there; deletes last.
    operations.sort(key=lambda op: ["GET", "POST", "PUT", "DELETE"].index(op.method.upper()))
    answers: dict[str, Counter[int]] = defaultdict(Counter)
    failures = []
    for operation in operations:
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            strategy = operation.as_strategy(generation_mode=mode)
            positive = mode is GenerationMode.POSITIVE

            @given(case=strategy.map(lambda c, positive=positive: _ending(c, positive)))
            @settings(
                max_examples=examples,
                deadline=None,
                derandomize=True,  # the same cases on every run
                database=None,
                suppress_health_check=[
                    HealthCheck.too_slow,
                    HealthCheck.filter_too_much,
                    HealthCheck.data_too_large,
                ],
            )
            def fuzz(case: schemathesis.Case[Any]) -> None:
                response = case.call_and_validate(checks=CHECKS, headers=headers)
                answers[case.operation.label][response.status_code] += 1

            try:
                fuzz()
            except Unsatisfiable:
                # Nothing to make invalid: the operation has no parameters and no body.
                assert mode is GenerationMode.NEGATIVE, operation.label
            except (Exception, FailureGroup) as e:
                failures.append(f"{operation.label} ({mode.value}): {e}")
    assert not failures, "\n\n".join(failures)
    return answers


def _ending(case: schemathesis.Case[Any], positive: bool) -> schemathesis.Case[Any]:
    """A job's stream follows a running job to its end: the fuzz reads it ``once`` (a case
    whose ``once`` is made invalid keeps it, and is refused before any part is sent)."""
    if case.operation.path == "/job/{id}/stream":
        query = dict(case.query or {})
        if positive:
            query["once"] = "true"
        else:
            query.setdefault("once", "true")
        case.query = query
    return case


REGENERATE = (
    "python -c 'import json; from kue_http import config, openapi; "
    'print(json.dumps(openapi.document("/api", config.DEFAULTS), indent=2))\' > docs/openapi.json'
)


def test_the_document_in_docs_is_current() -> None:
    committed = json.loads((Path(__file__).parents[2] / "docs" / "openapi.json").read_text())
    assert committed == document("/api", DEFAULTS), (
        f"docs/openapi.json is out of date; run {REGENERATE}"
    )
