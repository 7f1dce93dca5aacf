"""A job's page in Chromium: a job its handler failed with ``NoRetry`` says it was not
retried, and its log lines show their time and attempt, on a desktop and on a phone (dark)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest

from kue_core import Job, NoRetry, Queue
from tests.browser.conftest import ARTIFACTS, Server, Watched, fits_phone, phone_dark
from tests.conftest import wait_for


@pytest.fixture
def failed_for_good(queue: Queue) -> Iterator[int]:
    """A job of 3 attempts whose first logs twice, then raises NoRetry."""
    job = queue.create_job("charge", {"cents": "lots"}).attempts(3).save()

    def charge(j: Job) -> None:
        j.log("charging %s cents", j.data["cents"])
        j.log("a very long line that wraps on a phone: " + "abcdefghij" * 12)
        raise NoRetry("cents must be a number")

    queue.process("charge", 1, charge)
    wait_for(lambda: queue.get_job(job.id).state == "failed")  # type: ignore[arg-type]
    yield job.id  # type: ignore[misc]
    queue.shutdown(10)


def _check(page: Any) -> None:
    attempts = page.locator("#attempts").inner_text()
    assert "remaining" not in attempts
    assert re.match(r"1 made of 3, not retried: its handler raised NoRetry", attempts)
    lines = page.locator("#log li")
    assert lines.count() == 2
    for i in range(2):
        li = lines.nth(i)
        assert re.fullmatch(r"\d\d:\d\d:\d\d\.\d{3}", li.locator("time.at").inner_text())
        assert li.locator("time.at").get_attribute("datetime")
        assert li.locator(".chip.attempt").inner_text() == "attempt 1"
        assert li.locator(".chip.attempt").is_visible()
    assert lines.nth(0).locator(".text").inner_text() == "charging lots cents"
    chip = page.locator("ol.timeline li.state-failed .chip.warn", has_text="NoRetry")
    assert chip.is_visible()


def test_the_job_page_tells_no_retry_and_log_times(ui: Watched, failed_for_good: int) -> None:
    page = ui.goto(f"/job/{failed_for_good}")
    _check(page)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "job-no-retry-1280.png"), full_page=True)


def test_the_job_page_on_a_phone_in_the_dark(
    browser: Any, server: Server, failed_for_good: int
) -> None:
    with phone_dark(browser, server) as w:
        page = w.goto(f"/job/{failed_for_good}")
        _check(page)
        fits_phone(page, "job-no-retry-390-dark.png")
