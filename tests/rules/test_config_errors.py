"""Configurations ``kue rules`` refuses at load, each with the file, the rule and the reason
(through ``kue_rules.build``/``load`` and once through the CLI, where nothing starts), JSON or
Hjson chosen by content, and Resc's defaults."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import redis

from kue_core import KueError
from kue_rules import ConfigError, build, load, parse
from tests.cli.running import Kue
from tests.conftest import keys_under

pytestmark = pytest.mark.timeout(60)

FILE = "conf/resc.hjson"
BASE: dict[str, Any] = {
    "redis": {"url": "redis://127.0.0.1/"},
    "watchers": [
        {
            "input_queue": "in",
            "rules": [
                {"name": "first", "on": "^x/(?P<a>\\w+)$", "make": {"queue": "q"}},
                {
                    "name": "the rule",
                    "on": "^acq/(?P<process_id>\\w+)/(?P<product_id>\\w+)$",
                    "fetch": [{"url": "http://ws/${product_id}", "returns": "child"}],
                    "make": {
                        "task": "trt/${child.processId}/${product_id}",
                        "queue": "trt/${process_id}/todo-queue",
                        "set": "trt/${process_id}/todo-set",
                    },
                },
            ],
        }
    ],
}

Doc = dict[str, Any]


def rule(d: Doc) -> Doc:
    the: Doc = d["watchers"][0]["rules"][1]
    return the


def set_rule(d: Doc, **changes: Any) -> None:
    d["watchers"][0]["rules"][1].update(changes)


def set_make(d: Doc, **changes: Any) -> None:
    d["watchers"][0]["rules"][1]["make"].update(changes)


def drop_make(d: Doc, key: str) -> None:
    del d["watchers"][0]["rules"][1]["make"][key]


def events_watcher(d: Doc, event: str) -> None:
    w = d["watchers"][0]
    del w["input_queue"]
    w["input_events"] = {"type": "acq", "event": event}


IN_RULE = "watcher 1 (in), rule 2 ('the rule')"
#: (id, change to BASE, what the message must hold besides the file).
CASES: list[tuple[str, Callable[[Doc], None], list[str]]] = [
    ("bad regex", lambda d: set_rule(d, on="^acq/(?P<p>\\w+"), [IN_RULE, "regular expression"]),
    ("bad regex group", lambda d: set_rule(d, on="(?P<1x>a)"), [IN_RULE, "regular expression"]),
    ("unknown variable", lambda d: set_make(d, task="t/${nope}"), [IN_RULE, "${nope}", "'nope'"]),
    (
        "unknown variable in url",
        lambda d: rule(d)["fetch"][0].update(url="http://ws/${child}"),
        [IN_RULE, "http://ws/${child}", "'child'"],
    ),
    (
        "field of a text group",
        lambda d: set_make(d, queue="q/${process_id.x}"),
        [IN_RULE, "${process_id.x}", "process_id is text"],
    ),
    ("unclosed placeholder", lambda d: set_make(d, task="t/${a"), [IN_RULE, "does not close"]),
    ("missing make.queue", lambda d: drop_make(d, "queue"), [IN_RULE, "no queue"]),
    ("missing make", lambda d: rule(d).pop("make"), [IN_RULE, "make is missing"]),
    ("missing on", lambda d: rule(d).pop("on"), [IN_RULE, "on (a regular expression) is missing"]),
    ("unknown top key", lambda d: d.update(watcherz=[]), ["the configuration", "'watcherz'"]),
    ("unknown redis key", lambda d: d["redis"].update(host="h"), ["redis", "'host'"]),
    ("unknown watcher key", lambda d: d["watchers"][0].update(input="x"), ["watcher 1", "'input'"]),
    ("unknown rule key", lambda d: set_rule(d, when="x"), [IN_RULE, "'when'"]),
    (
        "unknown fetch key",
        lambda d: rule(d)["fetch"][0].update(method="POST"),
        [IN_RULE, "fetch 1", "'method'"],
    ),
    ("unknown make key", lambda d: set_make(d, queues="x"), [IN_RULE, "make", "'queues'"]),
    (
        "unknown job key",
        lambda d: set_rule(d, make={"job": {"type": "t", "prio": 1}}),
        [IN_RULE, "make.job", "'prio'"],
    ),
    ("job with queue", lambda d: set_make(d, job={"type": "t"}), [IN_RULE, "job", "not both"]),
    (
        "duplicate watchers",
        lambda d: d["watchers"].append(copy.deepcopy(d["watchers"][0])),
        ["two watchers take from in"],
    ),
    ("no watchers", lambda d: d.update(watchers=[]), ["watchers is a non-empty list"]),
    (
        "unknown job event",
        lambda d: events_watcher(d, "done"),
        ["watcher 1", "input_events.event", "'done'"],
    ),
    (
        "input_queue and input_events",
        lambda d: d["watchers"][0].update(input_events={"type": "acq"}),
        ["watcher 1", "one of them"],
    ),
    (
        "priority urgentest",
        lambda d: set_rule(d, make={"job": {"type": "trt", "priority": "urgentest"}}),
        [IN_RULE, "priority", "'urgentest'"],
    ),
    (
        "attempts 0",
        lambda d: set_rule(d, make={"job": {"type": "trt", "attempts": 0}}),
        [IN_RULE, "attempts", "0"],
    ),
    (
        "bad job type",
        lambda d: set_rule(d, make={"job": {"type": "a\tb"}}),
        [IN_RULE, "make.job.type"],
    ),
    ("fetch retries", lambda d: rule(d)["fetch"][0].update(retries=-1), [IN_RULE, "retries"]),
    (
        "fetch returns a known name",
        lambda d: rule(d)["fetch"][0].update(returns="product_id"),
        [IN_RULE, "'product_id'"],
    ),
    (
        "same input, taken",
        lambda d: d["watchers"][0].update(taken_queue="in"),
        ["watcher 1", "must differ"],
    ),
]


@pytest.mark.parametrize(("change", "says"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_a_bad_configuration_is_refused_with_the_file_the_rule_and_the_reason(
    change: Callable[[Doc], None], says: list[str]
) -> None:
    doc = copy.deepcopy(BASE)
    build(copy.deepcopy(doc), FILE)  # the base is good: the change is what is refused
    change(doc)
    with pytest.raises(ConfigError) as refused:
        build(doc, FILE)
    assert isinstance(refused.value, KueError)
    message = str(refused.value)
    assert message.startswith(f"{FILE}: "), message
    for part in says:
        assert part in message, f"{part!r} not in {message!r}"


def test_neither_json_nor_hjson_is_refused_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "broken.json"
    path.write_text('{ "watchers": [ { input_queue: in\n rules: [\n}', "utf-8")
    with pytest.raises(ConfigError, match=r"broken\.json: neither JSON \(.*\) nor Hjson \(.*\)"):
        load(path)
    with pytest.raises(ConfigError, match=r"missing\.json: cannot read it"):
        load(tmp_path / "missing.json")


def test_the_cli_refuses_a_bad_configuration_with_exit_2_and_writes_nothing(
    tmp_path: Path, redis_url: str, prefix: str, r: redis.Redis
) -> None:
    doc = copy.deepcopy(BASE)
    set_make(doc, task="t/${nope}")
    path = tmp_path / "bad.hjson"
    path.write_text(json.dumps(doc), "utf-8")
    kue = Kue("rules", str(path), "--redis", redis_url, "--prefix", prefix)
    assert kue.wait() == 2, kue.output
    stderr = "\n".join(kue.err)
    assert str(path) in stderr and "'the rule'" in stderr and "${nope}" in stderr, stderr
    assert "Traceback" not in kue.output
    assert keys_under(r, prefix) == set()
    assert not r.exists("in", "in/taken")
    # --check on a good one: it prints the watchers and exits, writing nothing either.
    good = tmp_path / "good.hjson"
    good.write_text(json.dumps(BASE), "utf-8")
    check = Kue("rules", str(good), "--check", "--redis", redis_url, "--prefix", prefix)
    assert check.wait() == 0, check.output
    assert "in: taken in/taken, failed in/failed" in check.out
    assert keys_under(r, prefix) == set()
    # A Redis Cluster URL: refused before connecting (Resc's lists are outside the slot).
    cluster = Kue("rules", str(good), "--redis", "redis+cluster://127.0.0.1:1", "--prefix", "{q}")
    assert cluster.wait() == 2, cluster.output
    assert "needs one Redis server (or Sentinel)" in "\n".join(cluster.err)


HJSON = """{
  # a comment, quoteless strings, no commas
  watchers: [
    {
      input_queue: global/events
      rules: [
        {
          name: pass on
          on: "^acq/(?P<p>\\\\d+)$"
          make: {
            queue: out/${p}
          }
        }
      ]
    }
  ]
}
"""


def test_json_or_hjson_is_chosen_by_content_not_by_extension(tmp_path: Path) -> None:
    hjson_in_json = tmp_path / "conf.json"
    hjson_in_json.write_text(HJSON, "utf-8")
    json_in_hjson = tmp_path / "conf.hjson"
    json_in_hjson.write_text(json.dumps(BASE), "utf-8")
    a = load(hjson_in_json)
    [w] = a.watchers
    assert w.input == "global/events" and w.rules[0].name == "pass on"
    assert w.rules[0].on.pattern == "^acq/(?P<p>\\d+)$"
    assert w.rules[0].make.queue is not None
    assert w.rules[0].make.queue.render({"p": "3", "input_task": "acq/3"}) == "out/3"
    b = load(json_in_hjson)
    assert [r.name for r in b.watchers[0].rules] == ["first", "the rule"]
    assert parse('{"a": 1}') == {"a": 1} and parse("{a: 1\nb: x y\n}") == {"a": 1, "b": "x y"}


def test_resc_defaults_taken_failed_task_and_no_set(tmp_path: Path) -> None:
    c = build(copy.deepcopy(BASE), FILE)
    [w] = c.watchers
    assert (w.input, w.taken, w.failed) == ("in", "in/taken", "in/failed")
    first = w.rules[0]
    assert first.make.task.text == "${input_task}"
    assert first.make.task.render({"input_task": "x/1", "a": "1"}) == "x/1"
    assert first.make.set is None and first.make.job is None
    assert c.redis_url == "redis://127.0.0.1/" and c.prefix == "q"
    assert build(copy.deepcopy(BASE), FILE, prefix="mine").prefix == "mine"
    # A rule without a name is named by its place.
    doc = copy.deepcopy(BASE)
    del doc["watchers"][0]["rules"][0]["name"]
    assert build(doc, FILE).watchers[0].rules[0].name == "rule 1"
    # Fetch defaults: a timeout, retries and a backoff.
    fetch = w.rules[1].fetch[0]
    assert (fetch.returns, fetch.timeout, fetch.retries, fetch.backoff_ms) == (
        "child",
        10.0,
        3,
        200,
    )
    # A watcher on job events keeps its lists under the prefix.
    doc = copy.deepcopy(BASE)
    events_watcher(doc, "complete")
    doc["watchers"][0]["rules"] = [{"name": "all", "make": {"task": "${type}/${id}", "queue": "q"}}]
    [ev] = build(doc, FILE, prefix="p").watchers
    assert ev.events == ("acq", "complete")
    assert ev.input.startswith("p:") and ev.taken.startswith("p:") and ev.failed.startswith("p:")
    assert len({ev.input, ev.taken, ev.failed}) == 3
