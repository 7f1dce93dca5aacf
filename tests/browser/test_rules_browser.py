"""kue rules in a real browser: the rules page (from the nav) shows a watcher run by a real
``kue_rules.Rules``, its lists, counters and rules; an event pushed to its input shows up
without a reload; and the retry button, once confirmed, puts its failed events back on its
input (its failed list empties). Markup in a rule's name is shown as text."""

from __future__ import annotations

import json

import pytest
from playwright.sync_api import Request, expect

from kue_core import Queue
from tests.browser.conftest import ARTIFACTS, Watched
from tests.http.test_rules_api import handled, lists, push, rules_running

pytestmark = pytest.mark.single_node  # the watchers' own lists live outside the prefix's slot

XSS = "<img src=x onerror=\"window.__xss = 'rule'\">"


def test_a_watcher_live_and_its_failed_events_retried(ui: Watched, queue: Queue) -> None:
    names = lists(queue.prefix)
    page = ui.goto("/")
    page.locator("#rules-link").click()
    expect(page.locator("h1")).to_contain_text("Rules")
    expect(page.locator(".empty")).to_contain_text("No kue rules process has run")
    with rules_running(queue, name=XSS):
        push(queue, "hello ada", "fetch q")
        handled(queue, 2)
        section = page.locator(f'section[data-watcher="{names["input"]}"]')
        expect(section.locator("h2 .label")).to_have_text(names["input"])  # live, no reload
        page.evaluate("window.__kept = true")  # a reload would lose it
        expect(page.locator("#live-status")).to_have_text("live")
        expect(section.locator(".badge.running")).to_have_text("running")
        expect(section.locator('dd[data-counter="events"]')).to_have_text("2")
        expect(section.locator('dd[data-counter="failed"]')).to_have_text("1")
        expect(section.locator('.length[data-list="failed"]')).to_have_text("1")
        greet = section.locator("tr[data-rule]").first
        expect(greet.locator("th.rule-name")).to_have_text(XSS)  # as text
        expect(greet.locator('[data-counter="matched"]')).to_have_text("1")
        expect(section.locator("tr.failure td.event")).to_have_text("fetch q")

        # A new event, pushed to the list (no job event): the page shows it without a reload.
        push(queue, "hello bob")
        expect(section.locator('dd[data-counter="events"]')).to_have_text("3")
        expect(greet.locator('[data-counter="tasks"]')).to_have_text("2")
        section.get_by_text(f"Recent events of {XSS} (2)").click()
        expect(section.locator("li.recent-event").first).to_contain_text("hello bob")
        assert page.evaluate("window.__kept") is True
    section.screenshot(path=str(ARTIFACTS / "rules.png"))

    # Stopped: the retry puts the failed event back on the input, where it waits.
    posts: list[Request] = []
    page.on("request", lambda r: posts.append(r) if r.method == "POST" else None)
    section.get_by_role("button", name=f"Retry failed events of {names['input']}").click()
    page.locator("#confirm-ok").click()
    expect(section.locator('.length[data-list="failed"]')).to_have_text("0")
    expect(section.locator('.length[data-list="input"]')).to_have_text("1")
    expect(section.locator("button.retry-failed")).to_have_count(0)
    assert [json.loads(r.post_data or "") for r in posts] == [{"watcher": names["input"]}]
    assert posts[0].url == ui.server.base + "/api/rules/retry"
    assert queue.client.lrange(names["input"], 0, -1) == ["fetch q"]
    assert queue.client.llen(names["failed"]) == 0
    assert page.evaluate("window.__kept") is True
    assert page.evaluate("window.__xss") is None
