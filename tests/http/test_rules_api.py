"""kue rules over the JSON API: GET /rules reports what a real ``kue_rules.Rules`` run did
(each watcher's lists and their lengths, whether it runs, its counters, its rules with their
counters and recent events, its failed events with their reasons); POST /rules/retry puts a
watcher's failed events back on its input. An unknown watcher is 404, a bad body 400; writes
are guarded as the others; the answers match the OpenAPI document."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import redis
from flask.testing import FlaskClient

import kue_rules
from kue_core import Queue
from kue_http import create_app
from tests.conftest import snapshot, wait_for, written_since
from tests.http.documented import Documented

pytestmark = pytest.mark.single_node  # the watchers' own lists live outside the prefix's slot

#: A fetch that cannot succeed, tried once: its event goes to the failed list at once.
UNREACHABLE = {"url": "http://127.0.0.1:1/x", "returns": "x", "retries": 0, "timeout": 2}


def lists(prefix: str) -> dict[str, str]:
    """The list watcher's lists, and the queue and set its tasks go to."""
    base = f"{prefix}/rules"
    return {
        "input": f"{base}/in",
        "taken": f"{base}/in/taken",
        "failed": f"{base}/in/failed",
        "out": f"{base}/out",
        "seen": f"{base}/seen",
    }


def config(queue: Queue, name: str = "greet", on: str = r"^hello (?P<who>\w+)$") -> Any:
    """One list watcher: a rule making a task (deduplicated by a set), one making a job, and
    one whose fetch cannot succeed."""
    names = lists(queue.prefix)
    doc = {
        "watchers": [
            {
                "input_queue": names["input"],
                "rules": [
                    {
                        "name": name,
                        "on": on,
                        "make": {"queue": names["out"], "task": "hi ${who}", "set": names["seen"]},
                    },
                    {
                        "name": "job",
                        "on": r"^job (?P<n>\d+)$",
                        "make": {"job": {"type": "made-by-rules", "data": {"n": "${n}"}}},
                    },
                    {
                        "name": "lookup",
                        "on": r"^fetch (?P<id>\w+)$",
                        "fetch": [UNREACHABLE],
                        "make": {"queue": names["out"], "task": "${x}"},
                    },
                ],
            }
        ]
    }
    return kue_rules.build(doc, "<test>", queue.prefix)


@contextmanager
def rules_running(queue: Queue, **kw: Any) -> Iterator[kue_rules.Rules]:
    """A real ``kue rules`` run of :func:`config` in this process, stopped at the end."""
    run = kue_rules.Rules(config(queue, **kw), queue).start()
    try:
        yield run
    finally:
        run.stop(10)


def push(queue: Queue, *events: str) -> None:
    queue.client.lpush(lists(queue.prefix)["input"], *events)


def handled(queue: Queue, n: int) -> None:
    """Wait until the watcher has handled ``n`` events in all."""
    store = kue_rules.Store(queue)

    def done() -> bool:
        found = store.report(0)
        return bool(found) and found[0]["counts"]["events"] >= n

    wait_for(done, timeout=20)


def _watcher(client: FlaskClient) -> dict[str, Any]:
    res = client.get("/api/rules")
    assert res.status_code == 200, res.json
    watchers = res.json["watchers"]
    assert len(watchers) == 1
    return dict(watchers[0])


def test_no_watcher_yet(client: FlaskClient) -> None:
    assert client.get("/api/rules").json == {"watchers": []}


def test_the_report_and_a_retry(client: FlaskClient, queue: Queue) -> None:
    names = lists(queue.prefix)
    with rules_running(queue):
        push(queue, "hello ada", "hello ada", "nothing to see", "job 7", "fetch a1", "fetch b2")
        handled(queue, 6)
        w = _watcher(client)
        assert {k: w[k] for k in ("label", "input", "taken", "failed", "events")} == {
            "label": names["input"],
            "input": names["input"],
            "taken": names["taken"],
            "failed": names["failed"],
            "events": None,
        }
        assert w["lengths"] == {"input": 0, "taken": 0, "failed": 2}
        assert w["running"] is True and w["holder"] and w["seen"] > 0
        assert w["counts"] == {"events": 6, "replayed": 0, "unmatched": 1, "failed": 2}
        greet, job, lookup = w["rules"]
        assert (greet["name"], greet["on"], greet["makes"]) == (
            "greet",
            r"^hello (?P<who>\w+)$",
            "tasks",
        )
        assert (job["makes"], lookup["makes"]) == ("jobs", "tasks")
        assert greet["counts"] == {
            "matched": 2,
            "tasks": 1,
            "jobs": 0,
            "duplicates": 1,
            "fetch_errors": 0,
            "make_errors": 0,
        }
        # The newest first: the second "hello ada" was a duplicate (the set held it).
        second, first = greet["recent"]
        assert first["event"] == "hello ada" and first["tasks"] == [[names["out"], "hi ada", True]]
        assert second["tasks"] == [[names["out"], "hi ada", False]] and second["duplicates"] == 1
        assert first["jobs"] == [] and "error" not in first
        assert queue.client.lrange(names["out"], 0, -1) == ["hi ada"]
        assert job["counts"]["jobs"] == 1 and job["counts"]["matched"] == 1
        [made] = job["recent"]
        [[job_id, deduplicated]] = made["jobs"]
        assert deduplicated is False
        assert queue.get_job(job_id).type == "made-by-rules"
        assert queue.get_job(job_id).data == {"n": "7"}
        assert lookup["counts"]["fetch_errors"] == 2 and lookup["counts"]["matched"] == 0
        assert [e["event"] for e in lookup["recent"]] == ["fetch b2", "fetch a1"]
        assert all(e["error"] for e in lookup["recent"])
        failures = w["failures"]
        assert sorted(f["event"] for f in failures) == ["fetch a1", "fetch b2"]
        assert {(f["rule"], f["kind"]) for f in failures} == {("lookup", "fetch")}
        assert all(f["reason"] and f["at"] > 0 for f in failures)
        assert sorted(queue.client.lrange(names["failed"], 0, -1)) == ["fetch a1", "fetch b2"]
        assert client.get("/api/rules").json["watchers"][0]["lengths"]["failed"] == 2

        # Retry: they go back to the input, are handled again, and fail again.
        res = client.post("/api/rules/retry", json={"watcher": names["input"]})
        assert res.status_code == 200 and res.json == {"moved": 2}, res.json
        handled(queue, 8)
        w = _watcher(client)
        assert w["counts"] == {"events": 8, "replayed": 0, "unmatched": 1, "failed": 4}
        assert w["rules"][2]["counts"]["fetch_errors"] == 4
        assert w["lengths"]["failed"] == 2
    # Stopped: the watcher is still known, with what it did.
    w = _watcher(client)
    assert w["counts"]["events"] == 8
    # Nothing runs it now: a retry leaves the events on its input.
    res = client.post("/api/rules/retry", json={"watcher": names["input"]})
    assert res.json == {"moved": 2}
    w = _watcher(client)
    assert w["lengths"] == {"input": 2, "taken": 0, "failed": 0} and w["failures"] == []
    assert client.post("/api/rules/retry", json={"watcher": names["input"]}).json == {"moved": 0}


@pytest.mark.parametrize(
    ("body", "status", "says"),
    [
        ({"watcher": "no-such-list"}, 404, "no-such-list"),
        ({}, 400, "watcher"),
        ({"watcher": ""}, 400, "watcher"),
        ({"watcher": 5}, 400, "watcher"),
        ({"watcher": "x", "also": 1}, 400, "watcher"),
        (["x"], 400, "watcher"),
        ("x", 400, "watcher"),
    ],
)
def test_a_bad_retry_moves_nothing(
    client: FlaskClient, queue: Queue, r: redis.Redis, body: Any, status: int, says: str
) -> None:
    with rules_running(queue):
        push(queue, "fetch z")
        handled(queue, 1)
    before = snapshot(r, queue.prefix)
    res = client.post("/api/rules/retry", json=body)
    assert res.status_code == status and says in res.json["error"], res.json
    assert set(res.json) == {"error"}
    assert (
        client.post("/api/rules/retry", data="{", content_type="application/json").status_code
        == 400
    )
    assert not written_since(r, queue.prefix, before)
    assert queue.client.llen(lists(queue.prefix)["failed"]) == 1


def test_retry_is_guarded_as_the_other_writes(
    redis_url: str, client: FlaskClient, queue: Queue, r: redis.Redis
) -> None:
    names = lists(queue.prefix)
    with rules_running(queue):
        push(queue, "fetch z")
        handled(queue, 1)
    before = snapshot(r, queue.prefix)
    body = json.dumps({"watcher": names["input"]})
    assert client.post("/api/rules/retry", data=body, content_type="text/plain").status_code == 415
    assert client.post("/api/rules/retry").status_code == 415
    evil = {"Origin": "https://evil.example"}
    res = client.post("/api/rules/retry", json={"watcher": names["input"]}, headers=evil)
    assert res.status_code == 403
    readonly = create_app(
        {"KUE_REDIS_URL": redis_url, "KUE_PREFIX": queue.prefix, "KUE_READONLY": True}
    ).test_client()
    assert readonly.post("/api/rules/retry", json={"watcher": names["input"]}).status_code == 405
    assert readonly.get("/api/rules").json["watchers"][0]["lengths"]["failed"] == 1
    assert not written_since(r, queue.prefix, before)
    assert queue.client.llen(names["failed"]) == 1


def test_answers_match_the_openapi_document(client: FlaskClient, queue: Queue) -> None:
    check = Documented(client)

    check("get", "/api/rules", "/rules")
    names = lists(queue.prefix)
    with rules_running(queue):
        push(queue, "hello ada", "hello ada", "job 1", "job 2", "fetch q", "nothing")
        handled(queue, 6)
        found = check("get", "/api/rules", "/rules")
        assert found["watchers"][0]["failures"]
        check("post", "/api/rules/retry", "/rules/retry", json={"watcher": names["input"]})
    check("get", "/api/rules", "/rules")
    check("post", "/api/rules/retry", "/rules/retry", 404, json={"watcher": "nope"})
    check("post", "/api/rules/retry", "/rules/retry", 400, json={"watcher": 1})
