"""Schedules in a real browser: the schedules page pauses and resumes a schedule, triggers
one (its last job appears without a reload, and again when a job is made elsewhere, from the
event stream), and removes one once confirmed. Markup in keys and types is shown as text."""

from __future__ import annotations

from playwright.sync_api import expect

from kue_core import Queue
from tests.browser.conftest import ARTIFACTS, Watched

XSS = "<img src=x onerror=\"window.__xss = 'schedule'\">"
KEY = "<b>beat<b>"  # no space nor '/': a valid key


def test_pause_resume_trigger_and_remove_a_schedule(ui: Watched, queue: Queue) -> None:
    queue.every(KEY, 3_600_000, XSS)
    queue.cron("office", "0 9 * * 1-5", "report", tz="Europe/Paris")
    page = ui.goto("/")
    page.locator("#schedules-link").click()
    expect(page.locator("h1")).to_contain_text("Schedules")
    row = page.locator(f'tr[data-schedule="{KEY}"]')
    expect(row.locator(".key")).to_have_text(KEY)  # as text
    expect(row.locator(".type")).to_have_text(XSS)
    expect(row.locator(".rule")).to_have_text("every hour")
    expect(row.locator(".upcoming time")).to_have_count(3)
    expect(row.locator(".last-job")).to_have_text("none yet")
    office = page.locator('tr[data-schedule="office"]')
    expect(office.locator(".rule")).to_contain_text("cron 0 9 * * 1-5")
    expect(office.locator(".rule .reading")).to_have_text("weekdays at 09:00")
    expect(office.locator(".tz")).to_have_text("Europe/Paris")
    expect(page.locator("#live-status")).to_have_text("live")
    page.evaluate("window.__kept = true")  # a reload would lose it

    row.get_by_role("button", name=f"Pause {KEY}").click()
    expect(row.locator(".sched-state")).to_have_text("paused")
    assert queue.schedule(KEY)["paused"] is True
    row.get_by_role("button", name=f"Resume {KEY}").click()
    expect(row.locator(".sched-state")).to_have_text("active")
    assert queue.schedule(KEY)["paused"] is False

    row.get_by_role("button", name=f"Trigger {KEY}").click()
    link = row.locator(".last-job a")
    expect(link).to_have_count(1)
    first = queue.schedule(KEY)["last_job"]["id"]
    expect(link).to_have_text(f"#{first}")
    expect(row.locator(".last-job .badge")).to_have_text("Queued")
    expect(row.locator(".runs-made")).to_contain_text("+1 by hand")

    job = queue.trigger("office")  # made elsewhere: its enqueue event refreshes the page
    expect(office.locator(".last-job a")).to_have_text(f"#{job.id}")
    assert page.evaluate("window.__kept") is True
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.locator("#schedule-list").screenshot(path=str(ARTIFACTS / "schedules.png"))

    row.get_by_role("button", name=f"Remove {KEY}").click()
    dialog = page.locator("#confirm")
    expect(dialog).to_contain_text(f"Remove schedule {KEY}?")
    page.get_by_role("button", name="Keep it").click()
    expect(row).to_have_count(1)
    row.get_by_role("button", name=f"Remove {KEY}").click()
    page.get_by_role("button", name="Remove schedule").click()
    expect(row).to_have_count(0)
    assert [s["key"] for s in queue.schedules()] == ["office"]
    page.get_by_role("button", name="Remove office").click()
    page.get_by_role("button", name="Remove schedule").click()
    expect(page.locator("p.empty")).to_contain_text("No schedules.")

    page.goto(ui.server.base + f"/job/{first}")  # the job it made stays
    expect(page.locator("h1")).to_contain_text(f"Job #{first}")
    assert page.evaluate("window.__xss") is None
