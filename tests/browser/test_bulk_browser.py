"""Bulk actions on a filter in a real browser: from a list, count what a filter matches, ask
with that count, act, and show the outcome; a long action is followed with its progress and
can be stopped; hostile tags and words are shown as text."""

from __future__ import annotations

from playwright.sync_api import Browser, expect

from kue_core import Queue
from kue_core.store import calls
from tests.browser.conftest import ARTIFACTS, HOST_APP, MOUNT, Server, Watched, watched

XSS = "<img/src=x/onerror=window.__xss=1>"


def _failed(queue: Queue, n: int, tagged: int) -> list[int]:
    ids = []
    for i in range(n):
        job = queue.create_job("email", {"title": f"{XSS} {i}"})
        ids.append(job.tags("tenant-7" if i < tagged else "other").save().id)
        queue.scripts.call(calls.set_state(queue.keys, ids[-1], "failed"))  # type: ignore[arg-type]
    return ids


def test_retry_every_failed_job_with_a_tag(ui: Watched, queue: Queue) -> None:
    ids = _failed(queue, 9, 4)
    page = ui.goto("/tags/tenant-7")
    page.locator("a.bulk-link", has_text="failed").click()  # the filter comes filled
    # Until the page has loaded, its script may not handle the form yet (a click would send it
    # as a plain GET, which reloads the page): wait for the load, not only for the field.
    page.wait_for_url("**/jobs/failed?*tag=tenant-7*")
    expect(page.locator("#bulk-filter input[name=tag]")).to_have_value("tenant-7")
    page.select_option("#bulk-filter select[name=action]", "retry")
    page.locator("#bulk-apply").click()
    dialog = page.locator("dialog#confirm")
    expect(dialog).to_contain_text("Retry 4 failed jobs tagged tenant-7?")
    shown = dialog.locator("#confirm-list li")  # some of them, titles as text
    expect(shown).to_have_count(4)
    assert sorted(shown.all_text_contents()) == sorted(
        f"#{jid} email · {XSS} {i}" for i, jid in enumerate(ids[:4])
    )
    dialog.get_by_role("button", name="Retry 4").click()
    expect(page.locator('nav [data-count="failed"]')).to_have_text("5")
    assert queue.count("inactive") == 4
    # Nothing matches: said so, and nothing asked.
    page.fill("#bulk-filter input[name=tag]", XSS)
    page.locator("#bulk-apply").click()
    expect(page.locator("#toast")).to_have_text("No job matches this filter.")
    assert page.evaluate("window.__xss") is None
    (entry,) = queue.audit(action="bulk_retry")
    assert entry["jobs"] == 4
    assert entry["detail"] == '{"state": "failed", "tag": "tenant-7"}, 4 confirmed'


def test_a_count_changed_before_the_action_is_asked_again(ui: Watched, queue: Queue) -> None:
    _failed(queue, 6, 4)
    late = queue.create_job("email", {"title": "late"}).tags("tenant-7").save()
    page = ui.goto("/jobs/failed?tag=tenant-7")
    expect(page.locator("#bulk-filter input[name=tag]")).to_have_value("tenant-7")
    page.select_option("#bulk-filter select[name=action]", "retry")
    page.locator("#bulk-apply").click()
    dialog = page.locator("dialog#confirm")
    expect(dialog).to_contain_text("Retry 4 failed jobs tagged tenant-7?")
    queue.scripts.call(calls.set_state(queue.keys, late.id, "failed"))  # type: ignore[arg-type]  # while it is read
    dialog.get_by_role("button", name="Retry 4").click()
    # Nothing was done: asked again, with the count now.
    expect(dialog).to_contain_text(
        "The filter matches 5 now, not 4: nothing was done. Retry 5 failed jobs tagged tenant-7?"
    )
    assert queue.count("failed") == 7 and queue.audit() == []
    expect(dialog.locator("#confirm-list li")).to_have_count(5)
    dialog.get_by_role("button", name="Retry 5").click()
    expect(page.locator('nav [data-count="failed"]')).to_have_text("2")
    assert queue.count("inactive") == 5
    (entry,) = queue.audit()
    assert entry["action"] == "bulk_retry" and entry["jobs"] == 5
    # The Audit page names the action and shows its filter.
    page.locator("#audit-link").click()
    row = page.locator("#audit-table tbody tr").first
    expect(row).to_have_attribute("data-action", "bulk_retry")
    expect(row.locator("td.request .detail")).to_have_text(
        '{"state": "failed", "tag": "tenant-7"}, 5 confirmed'
    )


def test_a_long_action_shows_its_progress_and_stops(
    browser: Browser, redis_url: str, prefix: str, queue: Queue
) -> None:
    """A server that answers at once (202, KUE_BULK_WAIT): the page follows the run to its
    end."""
    _failed(queue, 1500, 1500)
    server = Server(redis_url, prefix, HOST_APP, MOUNT, KUE_BULK_WAIT="0.001")
    server.start()
    ui = watched(browser, server)
    try:
        _follow(ui, queue)
    finally:
        ui.context.close()
        server.kill()
    ui.check()


def _follow(ui: Watched, queue: Queue) -> None:
    page = ui.goto("/jobs/failed")
    page.locator("#bulk-filter summary").click()
    page.fill("#bulk-filter input[name=words]", "email")
    page.select_option("#bulk-filter select[name=action]", "remove")
    page.locator("#bulk-apply").click()
    dialog = page.locator("dialog#confirm")
    expect(dialog).to_contain_text('Remove 1500 failed jobs found by "email"? This deletes them')
    expect(dialog.locator("#confirm-list li")).to_have_count(6)  # five, and how many more
    expect(dialog.locator("#confirm-list li").last).to_have_text("and 1495 more")
    dialog.get_by_role("button", name="Remove 1500").click()
    text = page.locator("#bulk-progress .bulk-text")
    expect(text).to_have_text("1500 of 1500 matched jobs: remove done", timeout=20_000)
    expect(page.locator("#bulk-progress progress")).to_have_attribute("value", "100")
    assert queue.count("failed") == 0
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "bulk-done.png"), full_page=True)
