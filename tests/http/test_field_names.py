"""Every route answers with the field names it takes: no name is sent in one spelling and
answered in another (``catchUp`` sent, ``catch_up`` answered). Checked on the OpenAPI document
for every route that takes a JSON body (the document is itself checked true by fuzzing, in
tests/http/test_openapi.py), and on real answers for the routes whose answers echo what they
were sent. A former name still taken (marked deprecated in the document) is the one exception."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from flask.testing import FlaskClient

from kue_core import Queue
from kue_http import config
from kue_http.openapi import document


def _spelling(name: str) -> str:
    """One name in any spelling: ``catch_up``, ``catchUp`` and ``CatchUp`` are one."""
    return name.replace("_", "").lower()


def _schema_names(schema: Any, components: dict[str, Any], depth: int = 0) -> Iterator[str]:
    """The property names a schema holds, at any depth (deprecated ones left out)."""
    if not isinstance(schema, dict) or depth > 8:
        return
    if "$ref" in schema:
        yield from _schema_names(components[schema["$ref"].rsplit("/", 1)[1]], components, depth)
        return
    for part in ("oneOf", "anyOf", "allOf"):
        for sub in schema.get(part, []):
            yield from _schema_names(sub, components, depth + 1)
    for part in ("items", "additionalProperties"):
        yield from _schema_names(schema.get(part), components, depth + 1)
    for name, sub in (schema.get("properties") or {}).items():
        if not (isinstance(sub, dict) and sub.get("deprecated")):
            yield name
        yield from _schema_names(sub, components, depth + 1)


def _mixed(sent: set[str], answered: set[str]) -> list[tuple[str, str]]:
    """The names sent in one spelling and answered in another."""
    spelled = {_spelling(n): n for n in answered}
    return sorted(
        (name, spelled[_spelling(name)])
        for name in sent
        if _spelling(name) in spelled and spelled[_spelling(name)] != name
    )


def _keys(value: Any) -> set[str]:
    """Every key of a JSON value, at any depth."""
    if isinstance(value, dict):
        return set(value).union(*(_keys(v) for v in value.values()))
    if isinstance(value, list):
        return set().union(*(_keys(v) for v in value))
    return set()


def test_the_document_answers_each_body_with_its_names() -> None:
    doc = document("/api", config.DEFAULTS)
    components = doc["components"]["schemas"]
    checked = []
    for path, operations in doc["paths"].items():
        for method, op in operations.items():
            if not isinstance(op, dict) or "requestBody" not in op:
                continue
            body = op["requestBody"]["content"].get("application/json", {}).get("schema")
            sent = set(_schema_names(body, components))
            answered: set[str] = set()
            for status, answer in op["responses"].items():
                if status.startswith("2") and "content" in answer:
                    schema = answer["content"]["application/json"]["schema"]
                    answered |= set(_schema_names(schema, components))
            assert _mixed(sent, answered) == [], f"{method.upper()} {path}"
            checked.append(f"{method.upper()} {path}")
    # The routes that take an object and answer one are among them.
    assert {"PUT /schedules/{key}", "PUT /limits/{type}", "PUT /retention"} <= set(checked)
    assert {"POST /jobs/bulk", "POST /job", "POST /flows"} <= set(checked)
    # A former name is the exception, and only because the document marks it deprecated.
    every = doc["paths"]["/schedules/{key}"]["put"]["requestBody"]["content"]["application/json"]
    assert "catchUp" not in set(_schema_names(every["schema"], components))


OPTIONS = {
    "priority": "high",
    "attempts": 3,
    "backoff": {"type": "exponential", "delay": 100, "maxDelay": 5000},
    "delay": 1000,
    "ttl": 60_000,
    "removeOnComplete": {"count": 5, "age": 3_600_000},
    "removeOnFail": True,
    "tags": ["a"],
    "searchKeys": ["title"],
    "track": True,
    "unique": {"key": "k", "mode": "until_done", "ttl": 60_000},
}

FLOW_OPTIONS = {k: v for k, v in OPTIONS.items() if k != "unique"}  # no unique key in a flow


@pytest.mark.parametrize(
    ("method", "url", "body"),
    [
        (
            "put",
            "/api/schedules/s",
            {"every": 60_000, "offset": 0, "type": "t", "data": {"title": "x"}, "start": 0,
             "end": None, "limit": 5, "catch_up": "all", "options": OPTIONS},
        ),
        (
            "put",
            "/api/schedules/c",
            {"cron": "0 9 * * *", "tz": "Europe/Paris", "type": "t", "catch_up": "none"},
        ),
        (
            "put",
            "/api/limits/t",
            {"rate": {"max": 10, "perMs": 1000}, "concurrency": 2,
             "groupRate": {"max": 1, "perMs": 1000}, "groupConcurrency": 1},
        ),
        ("put", "/api/retention", {"complete": {"count": 10, "age": 60_000}, "failed": None}),
        (
            "post",
            "/api/jobs/bulk",
            {"action": "remove", "filter": {"state": "failed", "type": "t", "tag": "a",
             "words": "x", "min_age_ms": 0}, "reason": "", "expect": 0},
        ),
        (
            "post",
            "/api/flows",
            {"type": "t", "data": {}, "options": FLOW_OPTIONS,
             "children": [{"type": "u", "data": {}, "options": {"removeOnFail": True}}]},
        ),
    ],
)  # fmt: skip
def test_an_answer_uses_the_names_sent(
    client: FlaskClient, queue: Queue, method: str, url: str, body: dict[str, Any]
) -> None:
    res = getattr(client, method)(url, json=body)
    assert res.status_code == 200, res.json
    assert _mixed(_keys(body), _keys(res.json)) == []
    again = client.get(url) if method == "put" else None  # what is read answers the same
    if again is not None and again.status_code == 200:
        assert _mixed(_keys(body), _keys(again.json)) == []


def test_the_former_names_are_answered_under_the_current_ones(client: FlaskClient) -> None:
    """``catchUp`` and ``backoff.max_delay`` are still taken; the answer teaches the names
    the document gives."""
    former = {"every": 60_000, "type": "t", "catchUp": "all"}
    former["options"] = {"backoff": {"type": "fixed", "delay": 10, "max_delay": 20}}
    res = client.put("/api/schedules/old", json=former)
    assert res.status_code == 200, res.json
    assert res.json["catch_up"] == "all" and "catchUp" not in res.json  # type: ignore[index,operator]
    assert res.json["options"]["backoff"]["maxDelay"] == 20  # type: ignore[index]
