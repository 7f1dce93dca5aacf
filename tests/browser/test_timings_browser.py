"""The overview's wait and run panel (issue 18 §5) in a real browser: a row per type that ran
today, its counts and mean ± stddev, a histogram of each, and a type named with markup shown
as text."""

from __future__ import annotations

from typing import Any

from playwright.sync_api import expect

from kue_core import Job, NoRetry, Queue, defaults
from tests.browser.conftest import ARTIFACTS, Watched
from tests.conftest import wait_for

MARKUP = "<img src=x onerror=\"window.__xss = 'timings'\">"


def test_the_overview_shows_wait_and_run_per_type(
    ui: Watched, queue: Queue, redis_url: str
) -> None:
    # A lease no load outlasts: the waits are counted exactly, and a process held up past a
    # short lease (two cores, under coverage) rightly has its jobs claimed, and waited, again.
    worker = Queue(redis_url, prefix=queue.prefix, lease_ms=30_000)

    def handler(job: Job) -> Any:
        if job.type == MARKUP:
            raise NoRetry("asked to fail")
        return None

    ids = [queue.create_job("mail").save().id for _ in range(4)]
    ids.append(queue.create_job(MARKUP).save().id)
    worker.process("mail", 2, handler)
    worker.process(MARKUP, handler)
    try:
        wait_for(lambda: all(j.state in ("complete", "failed") for j in queue.get_jobs(ids)))
    finally:
        worker.shutdown()  # adds its figures to Redis
        worker.close()
    today = queue.timings()
    assert today["types"]["mail"]["run"]["count"] == 4

    page = ui.goto("/")
    panel = page.locator('section[data-live="timings"]')
    expect(panel.locator("h2")).to_contain_text(today["day"])
    mail = panel.locator('tr[data-timing="mail"]')
    expect(mail.locator('[data-kind="wait-count"]')).to_have_text("4")
    expect(mail.locator('[data-kind="run-count"]')).to_have_text("4")
    expect(mail.locator('[data-kind="run-mean"]')).to_contain_text(" ± ")
    bars = len(defaults.DURATION_BUCKETS_MS) + 1
    expect(mail.locator("svg")).to_have_count(2)
    expect(mail.locator("svg rect.complete")).to_have_count(bars)
    expect(mail.locator("svg rect.waited")).to_have_count(bars)
    page.wait_for_function(  # drawn at a readable height (read again if a refresh swaps it)
        """() => document.querySelector('section[data-live="timings"] tr[data-timing="mail"] svg')
        ?.getBoundingClientRect().height > 10""",
        timeout=5_000,
    )
    odd = panel.locator("tr[data-timing]").filter(has_text=MARKUP)
    expect(odd.locator("th")).to_have_text(MARKUP)  # shown as text, not run
    expect(odd.locator('[data-kind="run-count"]')).to_have_text("1")
    assert page.evaluate("window.__xss") is None
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    panel.screenshot(path=str(ARTIFACTS / "timings-panel.png"))
