"""The Audit page in a real browser: a change made with the dashboard's own buttons shows up,
with what it touched; the filters narrow the list; hostile text is shown as text."""

from __future__ import annotations

from playwright.sync_api import expect

from kue_core import Queue
from kue_core.store import calls
from tests.browser.conftest import ARTIFACTS, Watched

XSS = "<img src=x onerror=\"window.__xss = 'audit'\">"


def test_a_change_from_the_dashboard_shows_in_the_audit(ui: Watched, queue: Queue) -> None:
    failed = [queue.create_job("sync").save() for _ in range(2)]
    for job in failed:
        queue.scripts.call(calls.set_state(queue.keys, job.id, "failed"))  # type: ignore[arg-type]
    queue.add_audit({"action": "create", "method": "POST", "path": f"/api/job?{XSS}", "who": XSS})
    page = ui.goto("/jobs/failed")
    page.locator("button", has_text="Retry all").click()
    page.locator("#confirm-ok").click()
    expect(page.locator('nav [data-count="failed"]')).to_have_text("0")
    page.locator("#audit-link").click()
    rows = page.locator("#audit-table tbody tr")
    expect(rows).to_have_count(2)
    first = rows.first
    expect(first).to_have_attribute("data-action", "retry_all")
    expect(first.locator("td.request")).to_have_text("POST /api/jobs/failed/retry")
    expect(first.locator("td.num")).to_have_text("2")
    expect(rows.nth(1).locator("td.request")).to_contain_text(XSS)
    assert page.evaluate("window.__xss") is None
    page.fill("#audit-action", "retry_all")
    page.locator("#audit-filter").click()
    expect(rows).to_have_count(1)
    page.fill("#audit-action", "")
    page.fill("#audit-who", "10.9.9.9")
    page.locator("#audit-filter").click()
    expect(page.locator("#audit-empty")).to_have_text("No change matches.")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.goto(page.url.split("?")[0])
    page.screenshot(path=str(ARTIFACTS / "audit.png"), full_page=True)
