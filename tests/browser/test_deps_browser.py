"""Dependencies in a real browser: a blocked job's page follows its dependencies as they
complete and shows it unblocked, without a reload; a job blocked by a failed one is released
by retrying that job from the notice; markup in the jobs listed is shown as text."""

from __future__ import annotations

from playwright.sync_api import Locator, Page, expect

from kue_core import Queue
from kue_core.store import calls
from kue_http.dashboard.flows import SHOWN
from tests.browser.conftest import ARTIFACTS, Watched

XSS = "<img src=x onerror=\"window.__xss = 'dep'\">"


def _complete(queue: Queue, job_id: int) -> None:
    """Complete job ``job_id`` as a worker would (the next job of its type must be it)."""
    claimed = queue.scripts.call(
        calls.claim(queue.keys, queue.get_job(job_id).type, "kue:test:1", 10_000)
    )
    assert claimed and claimed != "paused" and claimed[0] == job_id, claimed
    ended = queue.scripts.call(
        calls.complete(queue.keys, job_id, claimed[1]["lease"], '{"ok":true}', None)
    )
    assert ended.outcome == "complete"


def _fail_for_good(queue: Queue, job_id: int) -> None:
    claimed = queue.scripts.call(
        calls.claim(queue.keys, queue.get_job(job_id).type, "kue:test:1", 10_000)
    )
    assert claimed and claimed != "paused" and claimed[0] == job_id, claimed
    queue.scripts.call(
        calls.fail(queue.keys, job_id, claimed[1]["lease"], "boom", "boom", -1, None)
    )


def _item(page: Page, side: str, job_id: int | None) -> Locator:
    return page.locator(f'#{side} li[data-id="{job_id}"]')


def _mark(page: Page) -> None:
    """Mark the document: a reload would lose the mark (checked by ``_not_reloaded``)."""
    page.evaluate("window.__kept = true")


def _not_reloaded(page: Page) -> None:
    assert page.evaluate("window.__kept") is True


def test_a_blocked_job_unblocks_live_as_its_dependencies_complete(
    ui: Watched, queue: Queue
) -> None:
    a = queue.create_job("fetch", {"title": "first"}).save()
    b = queue.create_job("fetch").save()
    job = queue.create_job("merge").depends_on(a, b).save()
    after = queue.create_job("send").depends_on(job).save()
    page = ui.goto(f"/job/{job.id}")
    head = page.locator("h1 .badge")
    expect(head).to_have_text("Blocked")
    expect(page.locator("#dependencies li")).to_have_count(2)
    expect(_item(page, "dependencies", a.id).locator(".badge")).to_have_text("Queued")
    expect(_item(page, "dependents", after.id).locator(".badge")).to_have_text("Blocked")
    expect(page.locator("#deps-done")).to_have_text("0 of 2 done")
    expect(page.locator("#live-status")).to_have_text("live")
    _mark(page)

    _complete(queue, a.id)  # type: ignore[arg-type]  # an event of a dependency only
    expect(_item(page, "dependencies", a.id)).to_have_attribute("data-state", "complete")
    expect(_item(page, "dependencies", a.id).locator(".chip.done")).to_have_text("done")
    expect(page.locator("#deps-done")).to_have_text("1 of 2 done")
    expect(head).to_have_text("Blocked")

    _complete(queue, b.id)  # type: ignore[arg-type]  # the last: the job is unblocked
    expect(head).to_have_text("Queued")
    expect(_item(page, "dependencies", b.id)).to_have_attribute("data-state", "complete")
    expect(page.locator("#deps-done")).to_have_text("2 of 2 done")
    expect(page.locator(".timeline li.unblocked")).to_contain_text("Unblocked")
    expect(page.locator('nav [data-count="blocked"]')).to_have_text("1")  # only `after`
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.locator("#flow").screenshot(path=str(ARTIFACTS / "deps-flow.png"))

    _complete(queue, job.id)  # type: ignore[arg-type]  # and its dependent in turn
    expect(head).to_have_text("Complete")
    expect(_item(page, "dependents", after.id)).to_have_attribute("data-state", "inactive")
    _not_reloaded(page)
    page.locator(f'#dependencies a[href$="/job/{a.id}"]').click()
    expect(page.locator("h1")).to_contain_text(f"Job #{a.id}")


def test_retrying_the_failed_job_from_the_notice_releases_the_blocked_one(
    ui: Watched, queue: Queue
) -> None:
    a = queue.create_job("fetch").save()
    job = queue.create_job("merge").depends_on(a).save()
    _fail_for_good(queue, a.id)  # type: ignore[arg-type]
    page = ui.goto(f"/job/{job.id}")
    notice = page.locator("#blocked-by")
    expect(notice).to_contain_text(f"Blocked by failed job #{a.id}")
    expect(page.locator("#live-status")).to_have_text("live")
    _mark(page)
    page.locator("#retry-blocker").click()
    expect(_item(page, "dependencies", a.id)).to_have_attribute("data-state", "inactive")
    expect(page.locator("#retry-blocker")).to_have_count(0)
    _complete(queue, a.id)  # type: ignore[arg-type]
    expect(notice).to_have_count(0)
    expect(page.locator("h1 .badge")).to_have_text("Queued")
    _not_reloaded(page)


def test_markup_in_dependencies_is_shown_as_text(ui: Watched, queue: Queue) -> None:
    a = queue.create_job(f"t{XSS}", {"title": XSS}).save()
    job = queue.create_job("merge").depends_on(a).save()
    page = ui.goto(f"/job/{job.id}")
    expect(_item(page, "dependencies", a.id).locator(".type")).to_have_text(f"t{XSS}")
    _mark(page)
    _complete(queue, a.id)  # type: ignore[arg-type]
    expect(page.locator("h1 .badge")).to_have_text("Queued")
    page.locator("#children-results summary").click()
    expect(page.locator("#children-results pre")).to_contain_text('"ok": true')
    assert page.evaluate("window.__xss") is None
    _not_reloaded(page)


def test_a_parent_of_many_lists_the_first_and_follows_the_rest(ui: Watched, queue: Queue) -> None:
    children = [queue.create_job("part", {"title": f"part {i}"}) for i in range(SHOWN * 2)]
    children[-1].priority("high")  # claimed first
    parent = queue.flow(queue.create_job("whole"), children)
    page = ui.goto(f"/job/{parent.id}")
    expect(page.locator("#dependencies li")).to_have_count(SHOWN)
    expect(page.locator("#dependencies-more")).to_contain_text(f"{SHOWN} more not listed")
    expect(page.locator("#live-status")).to_have_text("live")
    last = children[-1].id  # not listed: its event still updates the counts
    _complete(queue, last)  # type: ignore[arg-type]
    complete = page.locator('#dependencies-counts [data-count="complete"]')
    expect(complete).to_have_text("1 complete")
    expect(page.locator("#deps-done")).to_have_text(f"1 of {SHOWN * 2} done")
    _complete(queue, children[0].id)  # type: ignore[arg-type]
    expect(_item(page, "dependencies", children[0].id)).to_have_attribute("data-state", "complete")
    expect(complete).to_have_text("2 complete")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "deps-many.png"), full_page=True)


def test_removing_a_job_others_wait_for_offers_to_remove_them_too(
    ui: Watched, queue: Queue
) -> None:
    a = queue.create_job("fetch").save()
    b = queue.create_job("merge").depends_on(a).save()
    c = queue.create_job("send").depends_on(b).save()
    kept = queue.create_job("other").depends_on(a).save()
    page = ui.goto(f"/job/{a.id}")
    dialog = page.locator("dialog#confirm")
    page.locator(f"#remove-{a.id}").click()
    dialog.get_by_role("button", name="Confirm").click()
    expect(dialog).to_contain_text(f"Jobs #{b.id}, #{kept.id} are blocked waiting for this job")
    dialog.get_by_role("button", name="Keep them").click()  # declined: nothing goes
    expect(dialog).to_be_hidden()
    assert queue.get_job(a.id).state == "inactive"  # type: ignore[arg-type]
    page.locator(f"#remove-{a.id}").click()
    dialog.get_by_role("button", name="Confirm").click()
    dialog.get_by_role("button", name="Remove all of them").click()
    expect(page).to_have_url(ui.server.base + "/jobs/inactive")  # where a Remove goes after
    assert queue.ids("blocked") == [] and queue.ids("inactive") == []
    assert queue.count("complete") == 0 and c.id not in queue.ids("blocked")


def test_a_blocked_job_can_be_cancelled_and_its_dependents_follow(
    ui: Watched, queue: Queue
) -> None:
    a = queue.create_job("fetch").save()
    b = queue.create_job("merge").depends_on(a).save()
    c = queue.create_job("send").depends_on(b).on_dependency_failure("fail").save()
    page = ui.goto(f"/job/{b.id}")
    page.locator(f"#cancel-{b.id}").click()
    dialog = page.locator("dialog#confirm")
    dialog.get_by_label("Reason").fill("not needed")
    dialog.get_by_role("button", name="Cancel job").click()
    expect(page.locator("h1 .badge")).to_have_text("Failed")
    expect(_item(page, "dependents", c.id)).to_have_attribute("data-state", "failed")
