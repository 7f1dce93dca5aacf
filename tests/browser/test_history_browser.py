"""The History pages in a real browser: a type's charts and totals, reached from the overview's
types; the ranges; all types' table; deploy markers; hostile type names and versions shown as
text; dark mode at a phone's width."""

from __future__ import annotations

import redis
from playwright.sync_api import Browser, expect

from kue_core import Queue
from kue_core.features import history
from tests.browser.conftest import Server, Watched, fits_phone, phone_dark
from tests.conftest import finish, wait_for

TYPE = "<b>mail</b>"
VERSION = "<img/src=x/onerror=window.__xss=1>"


def _filled(queue: Queue, r: redis.Redis, redis_url: str) -> None:
    """Three jobs of TYPE, two of them done in the minute sampled, served by a worker of
    VERSION (a deploy marker)."""
    for _ in range(3):
        queue.create_job(TYPE).save()
    worker = Queue(redis_url, prefix=queue.prefix, version=VERSION)
    worker.process("other", 1, lambda job: None)
    try:
        wait_for(lambda: any(w.get("version") == VERSION for w in queue.workers()))
        queue.scripts.drive(history.sample(queue.keys))
    finally:
        worker.close()
    finish(queue, TYPE, True)
    finish(queue, TYPE, False)
    r.set(queue.keys.series_minute, int(r.get(queue.keys.series_minute) or 0) - 1)
    queue.scripts.drive(history.sample(queue.keys))


def test_a_type_s_history_from_the_overview(
    ui: Watched, queue: Queue, r: redis.Redis, redis_url: str
) -> None:
    _filled(queue, r, redis_url)
    page = ui.goto("/")
    page.locator("table.types th.type a", has_text=TYPE).click()
    expect(page.locator("#history-type")).to_have_text(TYPE)
    expect(page.locator("#total-complete")).to_have_text("1")
    expect(page.locator("#total-failed")).to_have_text("1")
    expect(page.locator("#throughput-chart rect.complete")).to_have_count(120)
    expect(page.locator("#backlog-chart polyline")).to_have_count(2)
    page.locator(".windows a", has_text="7d").click()
    expect(page.locator('.windows a[aria-current="page"]')).to_have_text("7d")
    expect(page.locator("#total-complete")).to_have_text("1")
    page.locator(".intro a", has_text="All types").click()
    row = page.locator(f'#history-types tr[data-type="{TYPE}"]')
    expect(row.locator("td").first).to_have_text("1")
    # The worker served "other" only: the queue's deploys list its version, as text.
    expect(page.locator("#deploys li")).to_have_count(1)
    expect(page.locator("#deploys li")).to_contain_text(VERSION)
    expect(page.locator("#throughput-chart g.deploy")).to_have_count(1)
    assert page.evaluate("window.__xss") is None
    page.goto(page.url.split("/history")[0] + "/?minutes=43200")
    expect(page.locator('.windows a[aria-current="page"]')).to_have_text("30d")
    expect(page.locator("figure.chart g.deploy")).to_have_count(1)


def test_the_history_page_in_dark_mode_at_a_phones_width(
    browser: Browser, server: Server, queue: Queue, r: redis.Redis, redis_url: str
) -> None:
    _filled(queue, r, redis_url)
    with phone_dark(browser, server) as w:
        page = w.goto("/history?range=1h")
        expect(page.locator("#history-types tbody tr")).to_have_count(1)
        fits_phone(page, "history-phone-dark.png")
