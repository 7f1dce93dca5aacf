"""kue rules in ``/metrics``, from the same report as the API: ``kue_rules_events_total
{watcher, counter}``, ``kue_rules_rule_total{watcher, rule, counter}``,
``kue_rules_list_length{watcher, list}`` and ``kue_rules_watcher_running{watcher}``; nothing
of them before a watcher is known."""

from __future__ import annotations

import json

import pytest
from flask.testing import FlaskClient
from prometheus_client.parser import text_string_to_metric_families

from kue_core import Queue
from kue_rules import Store
from tests.http.test_rules_api import handled, lists, push, rules_running

pytestmark = pytest.mark.single_node  # the watchers' own lists live outside the prefix's slot

NAMES = ("kue_rules_events", "kue_rules_rule", "kue_rules_list_length", "kue_rules_watcher_running")


def _families(client: FlaskClient) -> dict[str, dict[tuple[str, ...], float]]:
    """Each kue rules family: its samples' label values (sorted by label name) -> value."""
    res = client.get("/metrics")
    assert res.status_code == 200
    return {
        f.name: {tuple(v for _, v in sorted(s.labels.items())): s.value for s in f.samples}
        for f in text_string_to_metric_families(res.get_data(as_text=True))
        if f.name in NAMES
    }


def test_no_watcher_no_series(client: FlaskClient) -> None:
    assert _families(client) == {name: {} for name in NAMES}


def test_the_counters_lengths_and_running(client: FlaskClient, queue: Queue) -> None:
    names = lists(queue.prefix)
    w = names["input"]
    with rules_running(queue):
        push(queue, "hello ada", "hello ada", "hello bob", "job 3", "fetch x", "other")
        handled(queue, 6)
        found = _families(client)
    events = found["kue_rules_events"]
    assert events == {
        ("events", w): 6,
        ("replayed", w): 0,
        ("unmatched", w): 1,
        ("failed", w): 1,
    }
    rules = found["kue_rules_rule"]
    greet = {k[0]: v for k, v in rules.items() if k[1:] == ("greet", w)}
    assert greet == {
        "matched": 3,
        "tasks": 2,
        "jobs": 0,
        "duplicates": 1,
        "fetch_errors": 0,
        "make_errors": 0,
    }
    assert rules[("jobs", "job", w)] == 1 and rules[("matched", "job", w)] == 1
    assert rules[("fetch_errors", "lookup", w)] == 1 and rules[("tasks", "lookup", w)] == 0
    assert len(rules) == 3 * 6
    assert found["kue_rules_list_length"] == {("failed", w): 1, ("input", w): 0, ("taken", w): 0}
    assert found["kue_rules_watcher_running"] == {(w,): 1}

    # Events waiting while no process runs it; one last heard of long ago is not running.
    push(queue, "hello cy", "hello di")
    store = Store(queue)
    record = json.loads(str(queue.client.hget(store.watchers, w)))
    queue.client.hset(store.watchers, w, json.dumps({**record, "seen": 1}))
    found = _families(client)
    assert found["kue_rules_list_length"][("input", w)] == 2
    assert found["kue_rules_watcher_running"] == {(w,): 0}
