"""The dashboard in a real browser: counts, live updates, actions, escaping, restarts."""

from __future__ import annotations

import threading
from typing import Any

from playwright.sync_api import Page, expect

from kue_core import Job, Queue
from kue_core.store import calls
from tests.browser.conftest import ARTIFACTS, HOST_APP, MOUNT, Watched, watched
from tests.conftest import Server, finish, server_ms, wait_for

XSS_SCRIPT = "<script>window.__xss = 'script'</script>"
XSS_IMG = "<img src=x onerror=\"window.__xss = 'img'\">"


def _card(page: Page, state: str) -> Any:
    return page.locator(f'.cards [data-count="{state}"]')


def _fill(queue: Queue) -> dict[str, int]:
    """Jobs in every state but active: 3 queued, 2 delayed, 1 failed, 2 complete."""
    for n in range(3):
        queue.create_job("mail", {"title": f"mail {n}"}).save()
    for _ in range(2):
        queue.create_job("report", {}).delay(3_600_000).save()
    queue.create_job("video", {"title": "clip"}).save()
    queue.create_job("video", {"title": "film"}).save()
    finish(queue, "video", ok=False)
    finish(queue, "video", ok=True)
    finish(queue, "mail", ok=True)
    return queue.counts()


def test_overview_shows_the_counts_of_redis(ui: Watched, queue: Queue) -> None:
    counts = _fill(queue)
    assert counts == {
        "inactive": 2,
        "active": 0,
        "complete": 2,
        "failed": 1,
        "delayed": 2,
        "blocked": 0,
        "pinned": 0,
        "suspended": 0,
    }
    page = ui.goto("/")
    for state, n in counts.items():
        if state == "suspended":  # shown only while it holds jobs (signals)
            expect(_card(page, state)).to_have_count(0)
            expect(page.locator(f'nav [data-count="{state}"]')).to_have_count(0)
            continue
        expect(_card(page, state)).to_have_text(str(n))
        expect(page.locator(f'nav [data-count="{state}"]')).to_have_text(str(n))
    row = page.locator('tr[data-type="video"] td.num')
    expect(row).to_have_text(["0", "0", "1", "1", "0", "0", "0"])
    expect(page.locator("#live-status")).to_have_text("live")
    # First load: the page, one stylesheet, one script, the icon and the event stream.
    paths = {u.removeprefix(ui.server.base).split("?")[0] for u in ui.requests}
    assert paths == {"/", "/static/kue.css", "/static/kue.js", "/static/favicon.svg", "/api/events"}


def test_a_completed_job_appears_without_a_reload(ui: Watched, queue: Queue) -> None:
    job = queue.create_job("live", {"title": "watch me"}).save()
    page = ui.goto("/")
    expect(_card(page, "inactive")).to_have_text("1")
    page.evaluate("window.__sameDocument = true")
    release = threading.Event()

    def handler(j: Job) -> str:
        j.progress(40, 100)
        release.wait(10)
        return "done"

    queue.process("live", handler)
    try:
        expect(_card(page, "active")).to_have_text("1")
        # The job's page shows its progress as the worker reports it.
        detail = ui.context.new_page()
        detail.goto(f"{ui.server.base}/job/{job.id}")
        expect(detail.locator(".facts progress")).to_have_attribute("value", "40")
        wait_for(lambda: queue.get_job(job.id).progress() == 40)
        release.set()
        expect(_card(page, "complete")).to_have_text("1")
        expect(_card(page, "active")).to_have_text("0")
        expect(detail.locator("h1 .badge")).to_have_text("Complete")
        expect(detail.locator("pre.result")).to_have_text('"done"')
    finally:
        release.set()
        queue.shutdown(5)
    assert page.evaluate("window.__sameDocument") is True  # no reload happened


def test_a_handler_left_running_past_its_ttl_is_shown(ui: Watched, queue: Queue) -> None:
    release = threading.Event()
    queue.process("stuck", lambda job: release.wait(30))
    try:
        job = queue.create_job("stuck").ttl(100).save()
        wait_for(lambda: queue.get_job(job.id).state == "failed")  # type: ignore[arg-type]
        wait_for(lambda: [w["abandoned_threads"] for w in queue.workers()] == [1])
        page = ui.goto("/")
        chip = page.locator("table.workers .chip.warn")
        expect(chip).to_have_text("1 left running")
        assert "isolation" in (chip.get_attribute("title") or "")
    finally:
        release.set()
        queue.shutdown(5)


def test_retry_priority_and_remove_from_the_job_page(ui: Watched, queue: Queue) -> None:
    job = queue.create_job("flaky", {"title": "try again"}).save()
    finish(queue, "flaky", ok=False)
    page = ui.goto(f"/job/{job.id}")
    expect(page.locator("h1 .badge")).to_have_text("Failed")

    page.get_by_role("button", name="Retry").click()
    expect(page.locator("#toast")).to_have_text(f"retried job {job.id}")
    expect(page.locator("h1 .badge")).to_have_text("Queued")
    assert queue.get_job(job.id).state == "inactive"

    page.get_by_label("Priority").select_option("critical")
    page.get_by_role("button", name="Set").click()
    expect(page.locator("#toast")).to_have_text("updated priority")
    assert queue.get_job(job.id).priority() == -15
    expect(page.locator(".facts dd").first).to_contain_text("critical")

    # Removing asks first; cancelling keeps the job.
    page.get_by_role("button", name="Remove").click()
    dialog = page.locator("dialog#confirm")
    expect(dialog).to_be_visible()
    expect(dialog).to_contain_text(f"Remove job #{job.id}")
    dialog.get_by_role("button", name="Cancel").click()
    expect(dialog).to_be_hidden()
    assert queue.get_job(job.id).state == "inactive"
    page.get_by_role("button", name="Remove").click()
    dialog.get_by_role("button", name="Confirm").click()
    page.wait_for_url("**/kue/jobs/inactive")
    assert queue.count("inactive") == 0
    assert not queue.client.exists(queue.keys.job(job.id))


def test_promote_a_delayed_job_from_its_list(ui: Watched, queue: Queue) -> None:
    later = queue.create_job("remind", {"title": "tomorrow"}).delay(86_400_000).save()
    page = ui.goto("/jobs/delayed")
    row = page.locator(f'table.jobs tbody tr[data-job="{later.id}"]')
    expect(row.get_by_role("button", name="Promote")).to_have_attribute(
        "title", "Run it now, not at its due time"
    )
    row.get_by_role("button", name="Promote").click()
    expect(page.locator("#toast")).to_have_text(f"promoted job {later.id}")
    expect(page.locator("p.empty")).to_have_text("No delayed jobs.")
    assert queue.get_job(later.id).state == "inactive"  # type: ignore[arg-type]


def test_finished_jobs_are_listed_newest_first(ui: Watched, queue: Queue) -> None:
    first = queue.create_job("report", {"title": "first"}).save()
    second = queue.create_job("report", {"title": "second"}).save()
    assert finish(queue, "report", ok=True) == first.id
    ended = queue.client.zscore(queue.keys.finished("complete"), f"01|{first.id}")
    wait_for(lambda: server_ms(queue.client) > ended)  # a later finish time, not a tie
    assert finish(queue, "report", ok=True) == second.id
    page = ui.goto("/jobs/complete")
    rows = page.locator("table.jobs tbody tr")
    expect(rows).to_have_count(2)
    assert [rows.nth(i).get_attribute("data-job") for i in (0, 1)] == [
        str(second.id),
        str(first.id),
    ]
    expect(page.get_by_label("Order")).to_have_value("newest")
    page.get_by_label("Order").select_option("oldest")
    page.wait_for_url("**/jobs/complete?*order=oldest*")
    expect(rows.first).to_have_attribute("data-job", str(first.id))


def test_a_field_being_edited_is_not_replaced(ui: Watched, queue: Queue) -> None:
    """A live refresh leaves the part holding a focused field alone until it loses focus."""
    job = queue.create_job("edit", {}).save()
    page = ui.goto(f"/job/{job.id}")
    expect(page.locator("#live-status")).to_have_text("live")
    select = page.get_by_label("Priority")
    select.focus()
    select.select_option("high")
    expect(select).to_be_focused()
    with page.expect_response(lambda r: r.url.endswith(f"/job/{job.id}")) as refreshed:
        queue.get_job(job.id).progress(30, 100)
    refreshed.value.finished()
    page.wait_for_timeout(300)  # nothing must happen: give the swap time to run, then look
    expect(select).to_have_value("high")
    expect(page.locator(".facts progress")).to_have_attribute("value", "0")
    page.locator("h1").click()  # the field loses focus: the refresh goes ahead
    expect(page.locator(".facts progress")).to_have_attribute("value", "30")
    assert queue.get_job(job.id).priority() == 0  # choosing is not setting


def test_text_typed_and_not_sent_survives_a_refresh(ui: Watched, queue: Queue) -> None:
    """A field left with text not sent yet (the move's type, while a question is asked) keeps
    it through a live refresh of its part, which shows what changed."""
    job = queue.create_job("mail", {}).save()
    page = ui.goto(f"/job/{job.id}")
    expect(page.locator("#live-status")).to_have_text("live")
    page.get_by_label("Move to type").fill("sms-later")
    page.locator("h1").click()  # the field loses focus: nothing holds the refresh back
    with page.expect_response(lambda r: r.url.endswith(f"/job/{job.id}")) as refreshed:
        queue.get_job(job.id).progress(40, 100)
    refreshed.value.finished()
    expect(page.locator(".facts progress")).to_have_attribute("value", "40")
    expect(page.get_by_label("Move to type")).to_have_value("sms-later")
    page.get_by_role("button", name="Move", exact=True).click()
    expect(page.locator("h1 .type")).to_have_text("sms-later")
    expect(page.get_by_label("Move to type")).to_have_value("")  # sent: not kept


def test_row_and_bulk_actions_from_the_lists(ui: Watched, queue: Queue) -> None:
    for n in range(3):
        queue.create_job("batch", {"title": f"b{n}"}).save()
    for _ in range(3):
        finish(queue, "batch", ok=False)
    page = ui.goto("/jobs/failed")
    expect(page.locator("table.jobs tbody tr")).to_have_count(3)
    first = page.locator("table.jobs tbody tr").first
    first_id = int(first.get_attribute("data-job") or 0)
    first.get_by_role("button", name="Retry").click()
    expect(page.locator("table.jobs tbody tr")).to_have_count(2)
    assert queue.get_job(first_id).state == "inactive"

    page.get_by_role("button", name="Retry all").click()
    page.locator("dialog#confirm").get_by_role("button", name="Confirm").click()
    expect(page.locator("p.empty")).to_have_text("No failed jobs.")
    assert queue.counts()["inactive"] == 3

    page.goto(f"{ui.server.base}/jobs/inactive?type=batch")
    page.get_by_role("button", name="Remove all batch").click()
    page.locator("dialog#confirm").get_by_role("button", name="Confirm").click()
    expect(page.locator("p.empty")).to_have_text("No queued jobs of type batch.")
    assert queue.counts()["inactive"] == 0


def test_pause_and_resume_a_type(ui: Watched, queue: Queue) -> None:
    queue.create_job("pausable", {}).save()
    page = ui.goto("/")
    row = page.locator('tr[data-type="pausable"]')
    row.get_by_role("button", name="Pause").click()
    expect(row.locator(".badge.paused")).to_have_text("paused")
    assert queue.paused() == ["pausable"]
    page.locator('tr[data-type="pausable"]').get_by_role("button", name="Resume").click()
    expect(page.locator('tr[data-type="pausable"] .badge.paused')).to_have_count(0)
    assert queue.paused() == []


def test_payloads_in_job_fields_are_shown_as_text(ui: Watched, queue: Queue) -> None:
    evil = f"{XSS_SCRIPT}{XSS_IMG}"
    job = queue.create_job(f"t{evil}", {"title": f"title {evil}", "body": evil}).save()
    claimed = queue.scripts.call(calls.claim(queue.keys, job.type, "kue:test:1", 10_000))
    assert claimed and claimed != "paused"
    job_id, fields = claimed
    queue.get_job(job_id).log("log %s", evil)
    queue.scripts.call(
        calls.fail(
            queue.keys, job_id, fields["lease"], f"error {evil}", f"error {evil}\ntrace", 0, None
        )
    )

    for path in ("/", "/jobs/failed", f"/job/{job_id}", "/search?q=title"):
        page = ui.goto(path)
        expect(page.locator("main")).to_contain_text(XSS_SCRIPT)
        assert page.evaluate("window.__xss") is None, path
        assert page.locator("main img").count() == 0, path
    page = ui.goto(f"/job/{job_id}")
    expect(page.locator("h1 .type")).to_have_text(f"t{evil}")
    expect(page.locator("ol.log li .text")).to_have_text(f"log {evil}")
    expect(page.locator("pre.error-text").first).to_contain_text(f"error {evil}")
    expect(page.locator("pre.json").first).to_contain_text(XSS_IMG.replace('"', '\\"'))
    # The live refresh swaps in parsed server HTML: still inert.
    queue.create_job(f"t{evil}", {"title": evil}).save()
    page.goto(f"{ui.server.base}/jobs/inactive")
    expect(page.locator("table.jobs tbody tr")).to_have_count(1)
    queue.create_job(f"t{evil}", {"title": evil}).save()
    expect(page.locator("table.jobs tbody tr")).to_have_count(2)
    assert page.evaluate("window.__xss") is None
    assert not any(u.endswith("/x") for u in ui.requests)


def test_keyboard_search_box_opens_a_job(ui: Watched, queue: Queue) -> None:
    job = queue.create_job("keys", {"title": "find me"}).save()
    page = ui.goto("/")
    page.keyboard.press("/")
    expect(page.locator("#find")).to_be_focused()
    page.keyboard.type(str(job.id))
    page.keyboard.press("Enter")
    page.wait_for_url(f"**/kue/job/{job.id}")
    expect(page.locator(".subtitle")).to_have_text("find me")
    page.goto(f"{ui.server.base}/jobs/inactive")
    # Every control can be reached with the keyboard: tab until the row's Remove button.
    for _ in range(30):
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement.id") == f"remove-{job.id}":
            break
    else:
        raise AssertionError("the Remove button is not reachable with Tab")
    page.keyboard.press("Enter")
    expect(page.locator("dialog#confirm")).to_be_visible()
    page.keyboard.press("Escape")
    expect(page.locator("dialog#confirm")).to_be_hidden()
    assert queue.get_job(job.id).state == "inactive"


def test_read_only_mode_hides_and_refuses_actions(
    browser: Any, redis_url: str, prefix: str, queue: Queue
) -> None:
    job = queue.create_job("ro", {}).save()
    finish(queue, "ro", ok=False)
    server = Server(redis_url, prefix, HOST_APP, MOUNT, KUE_READONLY="true")
    server.start()
    ui = watched(browser, server)
    try:
        page = ui.goto(f"/job/{job.id}")
        expect(page.locator(".badge.readonly")).to_be_visible()
        assert page.locator("button[data-url], form.priority").count() == 0
        status = page.evaluate(
            "url => fetch(url, {method: 'PUT'}).then(r => r.status)",
            f"{server.base}/api/job/{job.id}/state/inactive",
        )
        assert status == 405
        assert queue.get_job(job.id).state == "failed"
        ui.check()
    finally:
        ui.context.close()
        server.kill()


def test_live_updates_survive_a_server_restart(ui: Watched, queue: Queue) -> None:
    page = ui.goto("/")
    expect(page.locator("#live-status")).to_have_text("live")
    ui.server.kill()
    expect(page.locator("#live-status")).to_have_text("reconnecting…")
    queue.create_job("after", {}).save()  # while no server listens: caught up on reconnect
    ui.server.start()
    expect(page.locator("#live-status")).to_have_text("live", timeout=15_000)
    expect(_card(page, "inactive")).to_have_text("1")
    queue.create_job("after", {}).save()  # and events flow again
    expect(_card(page, "inactive")).to_have_text("2")


def test_screenshots_light_and_dark(browser: Any, server: Server, queue: Queue) -> None:
    """Saved as artifacts to look at, in both colour schemes and on a phone."""
    _fill(queue)
    failed = queue.create_job("email", {"title": "welcome", "to": "a@example.com"}).attempts(2)
    failed.save()
    finish(queue, "email", ok=False)
    finish(queue, "email", ok=False)
    queue.get_job(failed.id).log("connecting to smtp")
    queue.create_job("transcode", {"title": "holiday.mov"}).save()
    busy, release = threading.Event(), threading.Event()

    def transcode(job: Job) -> None:
        job.progress(65, 100)
        job.log("encoding 1080p")
        busy.set()
        release.wait(30)

    queue.process("transcode", transcode)
    busy.wait(10)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    pages = {"overview": "/", "failed": "/jobs/failed", "job": f"/job/{failed.id}"}
    try:
        _shoot(browser, server, pages)
    finally:
        release.set()
        queue.shutdown(5)


def _shoot(browser: Any, server: Server, pages: dict[str, str]) -> None:
    for scheme in ("light", "dark"):
        for device, viewport in (("laptop", (1280, 860)), ("phone", (390, 844))):
            ui = watched(
                browser,
                server,
                color_scheme=scheme,
                viewport={"width": viewport[0], "height": viewport[1]},
            )
            for name, path in pages.items():
                page = ui.goto(path)
                expect(page.locator("#live-status")).to_have_text("live")
                shot = ARTIFACTS / f"{name}-{device}-{scheme}.png"
                page.screenshot(path=str(shot), full_page=True)
                width = page.evaluate("document.documentElement.scrollWidth")
                assert width <= viewport[0], f"{path} is {width}px wide on a {device}"
                assert shot.stat().st_size > 10_000
            ui.context.close()
            ui.check()
