"""``kue stats`` and kue rules: a ``rules:`` block, one line per watcher (label, running or
not, events, failed, the lengths of its lists), in the text and under ``rules`` in the JSON;
nothing of it while no watcher is known."""

from __future__ import annotations

import json
from typing import Any

import pytest

from kue_cli.rules_text import rule_line, stats_lines
from kue_core import Queue
from tests.cli.test_cli import invoke, on
from tests.http.test_rules_api import handled, lists, push, rules_running

pytestmark = pytest.mark.single_node  # the watchers' own lists live outside the prefix's slot


def _watcher(label: str, running: bool, lengths: dict[str, Any]) -> dict[str, Any]:
    return {
        "label": label,
        "running": running,
        "counts": {"events": 12, "replayed": 0, "unmatched": 3, "failed": 2},
        "lengths": lengths,
    }


def test_the_lines() -> None:
    assert stats_lines([]) == []
    orders = _watcher("orders", False, {"input": 5, "taken": 0, "failed": None})
    orders["rules"] = [
        {
            "name": "paid",
            "counts": {
                "matched": 9,
                "tasks": 4,
                "jobs": 3,
                "duplicates": 2,
                "fetch_errors": 1,
                "make_errors": 1,
            },
        },
        {"name": "refunded", "counts": {}},
    ]
    assert stats_lines(
        [_watcher("complete of email", True, {"input": 0, "taken": 1, "failed": 2}), orders]
    ) == [
        "rules:",
        "  complete of email: running, 12 events, 2 failed; lists: input 0, taken 1, failed 2",
        "  orders: stopped, 12 events, 2 failed; lists: input 5, taken 0, failed ?",
        "    rule paid: 9 matched, 7 made, 2 duplicates, 2 failed",
        "    rule refunded: 0 matched, 0 made, 0 duplicates, 0 failed",
    ]


def test_stats_without_watchers_says_nothing_of_rules(redis_url: str, prefix: str) -> None:
    result = invoke("stats", *on(redis_url, prefix))
    assert result.exit_code == 0, result.output
    assert "rules:" not in result.stdout
    report = json.loads(invoke("stats", "--json", *on(redis_url, prefix)).stdout)
    assert "rules" not in report


def test_stats_shows_each_watcher(redis_url: str, queue: Queue) -> None:
    names = lists(queue.prefix)
    with rules_running(queue):
        push(queue, "hello ada", "fetch x", "nothing")
        handled(queue, 3)
        result = invoke("stats", *on(redis_url, queue.prefix))
        assert result.exit_code == 0, result.output
        line = f"  {names['input']}: running, 3 events, 1 failed; lists: input 0, taken 0, failed 1"
        assert f"\nrules:\n{line}\n" in result.stdout
        report = json.loads(invoke("stats", "--json", *on(redis_url, queue.prefix)).stdout)
    [w] = report["rules"]
    assert w["input"] == names["input"] and w["running"] is True
    # Each rule under its watcher, with the counts the Rules page shows.
    assert "    rule greet: 1 matched, 1 made, 0 duplicates, 0 failed" in result.stdout
    for rule in w["rules"]:
        assert rule_line(rule) in result.stdout.splitlines()
    assert w["counts"] == {"events": 3, "replayed": 0, "unmatched": 1, "failed": 1}
    assert w["lengths"] == {"input": 0, "taken": 0, "failed": 1}
