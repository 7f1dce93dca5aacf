"""Job records in a real browser: tags added and removed on the job page, a tag's page,
tracking a job and seeing its events on the overview as they happen, the unique key, the
retention and memory panel, the search page's filters, and the link to a job's trace. Markup
in tags and titles is shown as text."""

from __future__ import annotations

import json
from typing import Any

import redis
from playwright.sync_api import expect

from kue_core import Queue
from tests.browser.conftest import HOST_APP, MOUNT, Watched, watched
from tests.conftest import Server, finish

XSS = "<img src=x onerror=\"window.__xss = 'tag'\">"


def test_tag_a_job_and_follow_the_tag(ui: Watched, queue: Queue) -> None:
    job = queue.create_job("email", {"title": f"Hello {XSS}"}).tags("vip").save()
    page = ui.goto(f"/job/{job.id}")
    expect(page.locator("#tags .chip")).to_have_count(1)
    page.get_by_label("New tag").fill(f"odd {XSS}")
    page.get_by_role("button", name="Tag", exact=True).click()
    expect(page.locator("#tags .chip")).to_have_count(2)
    expect(page.locator("#tags")).to_contain_text(f"odd {XSS}")  # as text
    assert queue.get_job(job.id).tags() == ["vip", f"odd {XSS}"]  # type: ignore[arg-type]
    page.get_by_role("button", name="Remove tag vip").click()
    expect(page.locator("#tags .chip")).to_have_count(1)
    assert queue.tagged("vip") == []
    page.locator("#tags .chip a").click()  # the tag's page lists the job
    expect(page.locator("#tag-name")).to_have_text(f"odd {XSS}")
    expect(page.locator(f'tr[data-job="{job.id}"]')).to_have_count(1)
    assert page.evaluate("window.__xss") is None


def test_a_tracked_job_leads_the_overview_with_its_events(ui: Watched, queue: Queue) -> None:
    job = queue.create_job("report", {"title": "Quarterly"}).save()
    other = queue.create_job("report").save()
    page = ui.goto(f"/job/{job.id}")
    expect(page.locator("#tracking")).to_contain_text("no")
    page.get_by_role("button", name="Track", exact=True).click()
    expect(page.locator("#tracking")).to_contain_text("yes")
    overview = ui.goto("/")
    expect(overview.locator(f'#tracked tr[data-job="{job.id}"]')).to_have_count(1)
    expect(overview.locator(f'#tracked tr[data-job="{other.id}"]')).to_have_count(0)
    expect(overview.locator("#live-status")).to_have_text("live")
    queue.cancel(other.id, "not shown")  # type: ignore[arg-type]  # another job's events
    queue.cancel(job.id, "shown")  # type: ignore[arg-type]  # the tracked job's: cancelled, failed
    expect(overview.locator("#tracked-events li")).to_have_count(2)
    expect(overview.locator("#tracked-events li").first).to_contain_text(f"#{job.id} report failed")
    expect(overview.locator("#tracked-events")).to_contain_text('cancelled "shown"')
    expect(overview.locator("#tracked-events")).not_to_contain_text(f"#{other.id} ")
    expect(overview.locator("#tracked-events-empty")).to_be_hidden()


def test_the_job_page_shows_its_unique_key_and_retention(ui: Watched, queue: Queue) -> None:
    job = (
        queue.create_job("email")
        .unique(f"order-{XSS}", "until_done")
        .remove_on_complete({"count": 5, "age": 86_400_000})
        .remove_on_fail(True)
        .save()
    )
    page = ui.goto(f"/job/{job.id}")
    expect(page.locator("#unique")).to_contain_text(f"order-{XSS}")
    expect(page.locator("#unique .chip")).to_have_text("until done")
    expect(page.locator("#keep-complete")).to_have_text("newest 5, at most 1d old")
    expect(page.locator("#keep-failed")).to_have_text("removed at once")
    assert page.evaluate("window.__xss") is None


def test_the_overview_shows_retention_and_memory(ui: Watched, queue: Queue) -> None:
    queue.set_retention(complete={"count": 2, "age": 3_600_000}, failed=None)
    page = ui.goto("/")
    expect(page.locator("#kept-complete")).to_contain_text("newest 2, at most 1h old")
    expect(page.locator("#kept-complete")).to_contain_text("queue")
    expect(page.locator("#kept-failed")).to_contain_text("every job")
    expect(page.locator("#memory")).to_contain_text(" used, peak ")


def test_search_with_filters_and_pages(ui: Watched, queue: Queue) -> None:
    for i in range(30):
        queue.create_job("email" if i % 2 else "video", {"title": f"invoice {i}"}).save()
    finish(queue, "video", True)
    page = ui.goto("/")
    page.locator("#find").fill("inv")
    page.locator("#find").press("Enter")
    expect(page.locator("#search-total")).to_have_text("30 jobs found.")
    expect(page.locator("table.jobs tbody tr")).to_have_count(25)
    page.locator("a[rel=next]").click()
    expect(page.locator("table.jobs tbody tr")).to_have_count(5)
    page.get_by_label("Type", exact=True).select_option("video")
    expect(page.locator("#search-total")).to_have_text("15 jobs found.")
    page.get_by_label("State", exact=True).select_option("complete")
    expect(page.locator("#search-total")).to_have_text("1 job found.")


def test_a_filter_chosen_before_the_script_ran_is_applied_when_it_runs(
    ui: Watched, queue: Queue
) -> None:
    """On a slow page a filter can be chosen before kue.js runs, when nothing listens for the
    change yet: the script applies it once it runs."""
    for i in range(3):
        queue.create_job("email" if i else "video", {"title": f"invoice {i}"}).save()
    page = ui.page
    page.route("**/kue.js", lambda route: route.fulfill(body="", content_type="text/javascript"))
    ui.goto("/search?q=inv")
    src = page.locator("script[src$='kue.js']").get_attribute("src")
    page.get_by_label("Type", exact=True).select_option("video")
    expect(page.locator("#search-total")).to_have_text("3 jobs found.")  # nothing listened
    with page.expect_navigation():
        page.add_script_tag(url=f"{src}?late")  # the script, arriving late
    expect(page.locator("#search-total")).to_have_text("1 job found.")
    expect(page.get_by_label("Type", exact=True)).to_have_value("video")


def test_the_job_page_links_its_trace(
    browser: Any, redis_url: str, prefix: str, queue: Queue, r: redis.Redis
) -> None:
    """A job saved with tracing on (kue_core.tracing) shows its trace id, linked where
    ``KUE_TRACE_URL`` says; a job without one shows no trace; a malformed stored context
    shows nothing either."""
    traced = queue.create_job("email").save()
    plain = queue.create_job("email").save()
    odd = queue.create_job("email").save()
    tid = "4bf92f3577b34da6a3ce929d0e0e4736"
    r.hset(
        queue.keys.job(traced.id),  # type: ignore[arg-type]
        "trace",
        json.dumps({"traceparent": f"00-{tid}-00f067aa0ba902b7-01"}),
    )
    r.hset(queue.keys.job(odd.id), "trace", json.dumps({"traceparent": XSS}))  # type: ignore[arg-type]
    server = Server(
        redis_url, prefix, HOST_APP, MOUNT, KUE_TRACE_URL="https://traces.example/t/{trace_id}"
    )
    server.start()
    ui = watched(browser, server)
    try:
        page = ui.goto(f"/job/{traced.id}")
        link = page.locator("#trace a")
        expect(link).to_have_text(tid)
        expect(link).to_have_attribute("href", f"https://traces.example/t/{tid}")
        for other in (plain, odd):
            page = ui.goto(f"/job/{other.id}")
            expect(page.locator("#tags")).to_be_visible()
            expect(page.locator("#trace")).to_have_count(0)
        assert page.evaluate("window.__xss") is None
        ui.check()
    finally:
        ui.context.close()
        server.kill()
