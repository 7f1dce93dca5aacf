"""The dashboard's kue rules page, as served HTML: a section per watcher with its lists and
their lengths, whether it runs, its counters, its rules with their counters and recent events
(tasks, duplicates, job ids linking to the job page, errors), its failed events and the retry
button (not in read-only mode); the empty state; markup in rule names and events shown as
text; the nav links to it."""

from __future__ import annotations

import html
import json
import re

import pytest
from flask.testing import FlaskClient
from markupsafe import escape

from kue_core import Queue
from kue_http import create_app
from kue_rules import Store
from tests.http.test_dashboard import page
from tests.http.test_rules_api import handled, lists, push, rules_running

pytestmark = pytest.mark.single_node  # the watchers' own lists live outside the prefix's slot

XSS_RULE = "<script>alert('rule')</script>"
XSS_EVENT = "hello <script>alert('event')</script>"


def test_empty_state_and_nav(client: FlaskClient) -> None:
    text = page(client, "/rules")
    assert "No kue rules process has run under this prefix" in text
    assert 'href="/rules" id="rules-link"' in page(client, "/")
    assert "Retry failed events" not in text


def test_a_watcher_its_rules_and_failures(client: FlaskClient, queue: Queue) -> None:
    names = lists(queue.prefix)
    with rules_running(queue):
        push(queue, "hello ada", "hello ada", "job 5", "fetch q")
        handled(queue, 4)
        text = page(client, "/rules")
    assert "No kue rules process" not in text
    assert f'data-watcher="{names["input"]}"' in text
    assert '<span class="badge running">running</span>' in text
    for name in ("input", "taken", "failed"):
        assert f"<code>{names[name]}</code>" in text
    assert '<span class="length" data-list="failed">1</span>' in text
    assert '<dd data-counter="events">4</dd>' in text
    assert '<dd data-counter="failed">1</dd>' in text
    assert '<tr data-rule="greet">' in text and "<code>^hello (?P&lt;who&gt;\\w+)$</code>" in text
    assert re.search(r'<td [^>]*class="num" data-counter="duplicates">1</td>', text)
    assert "already in the set of" in text and "hi ada" in text
    [[job_id, _]] = Store(queue).report(0)[0]["rules"][1]["recent"][0]["jobs"]
    assert queue.get_job(job_id).type == "made-by-rules"
    assert f'href="/job/{job_id}">#{job_id}</a>' in text
    assert '<td class="event"><code>fetch q</code></td>' in text
    assert '<td class="rule">lookup</td>' in text
    assert "Retry failed events" in text and 'data-url="/api/rules/retry"' in text
    [body] = re.findall(r'data-body="([^"]*)"', text)
    assert json.loads(html.unescape(body)) == {"watcher": names["input"]}


def test_markup_is_text_and_read_only_has_no_retry(
    redis_url: str, client: FlaskClient, queue: Queue
) -> None:
    with rules_running(queue, name=XSS_RULE, on=r"^hello (?P<who>.+)$"):
        push(queue, XSS_EVENT, "fetch q")
        handled(queue, 2)
    text = page(client, "/rules")
    assert "<script>alert" not in text
    assert escape(XSS_RULE) in text and escape(XSS_EVENT) in text
    assert "Retry failed events" in text
    readonly = create_app(
        {"KUE_REDIS_URL": redis_url, "KUE_PREFIX": queue.prefix, "KUE_READONLY": True}
    ).test_client()
    text = page(readonly, "/rules")
    assert escape(XSS_RULE) in text
    assert "Retry failed events" not in text and "/api/rules/retry" not in text
    assert '<td class="event"><code>fetch q</code></td>' in text
