"""The Workers page in a real browser: each live process with its version, the types it serves
with their slots and the limits in force, what it runs with its progress, reached from the
overview; stopping one from it; hostile versions and type names shown as text; dark mode at a
phone's width."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, expect

from kue_core import Job, Queue
from tests.browser.conftest import Server, Watched, fits_phone, phone_dark
from tests.conftest import wait_for

VERSION = "<img/src=x/onerror=window.__xss=1>"
TYPE = "<b>mail</b>"


@pytest.fixture
def worker(redis_url: str, prefix: str, queue: Queue) -> Iterator[tuple[Queue, threading.Event]]:
    """A worker of VERSION on TYPE (2 slots, limited), running one job at a third."""
    release = threading.Event()

    def handler(job: Job) -> None:
        job.progress(1, 3)
        release.wait(30)

    queue.limit(TYPE, rate=(20, 1000), concurrency=3)
    w = Queue(redis_url, prefix=prefix, version=VERSION)
    queue.create_job(TYPE).save()
    w.process(TYPE, 2, handler)
    wait_for(lambda: queue.count("active") == 1 and queue.workers())
    wait_for(lambda: queue.get_job(1).progress() == 33)
    yield w, release
    release.set()
    w.close()


def test_the_workers_page(ui: Watched, queue: Queue, worker: tuple[Queue, threading.Event]) -> None:
    w, release = worker
    page = ui.goto("/")
    page.locator("#workers-page").click()
    row = page.locator("table.workers tbody tr")
    expect(row).to_have_count(1)
    expect(row.locator("td.version")).to_have_text(VERSION)
    expect(row.locator(".chip").first).to_have_text(f"{TYPE} \u00d7 2")
    expect(row.locator(".chip.limit")).to_have_text(["≤ 3 at once", "20 per 1 s"])
    expect(row.locator(".running progress")).to_have_attribute("value", "33")
    assert page.evaluate("window.__xss") is None
    row.get_by_role("button", name="Stop").click()
    page.locator("dialog#confirm").get_by_role("button", name="Stop it").click()
    expect(row.get_by_role("button", name="Stopping…")).to_be_disabled()
    release.set()
    expect(page.get_by_text("No worker is running.")).to_be_visible(timeout=15_000)
    assert w.stopped_remotely.wait(5)


def test_the_workers_page_in_dark_mode_at_a_phones_width(
    browser: Browser, server: Server, worker: tuple[Queue, threading.Event]
) -> None:
    with phone_dark(browser, server) as ui:
        page = ui.goto("/workers")
        expect(page.locator("table.workers tbody tr")).to_have_count(1)
        fits_phone(page, "workers-phone-dark.png")
