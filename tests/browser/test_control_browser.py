"""Job control in a real browser: cancel (a running job too), move, edit a job's data, stop a
worker process; each confirmed where it cannot be undone, each seen live by other pages."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator

import pytest
from playwright.sync_api import expect

from kue_core import Job, Queue
from tests.browser.conftest import Watched
from tests.conftest import finish, wait_for

XSS = "<img src=x onerror=\"window.__xss = 'reason'\">"


class Slow:
    """A thread handler that runs until its attempt is over (``job.stopping``) or it is
    released; ``started`` once it runs, ``stopped`` once it saw its attempt end."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.stopped = threading.Event()
        self.release = threading.Event()

    def __call__(self, job: Job) -> str:
        self.started.set()
        while not self.release.wait(0.01):  # a handler's own loop, checking as it works
            if job.stopping:
                self.stopped.set()
                return "too late"
        return "done"


@pytest.fixture
def slow(queue: Queue) -> Iterator[Callable[[str], Slow]]:
    """``slow(type)``: a worker in this process running :class:`Slow` on that type."""
    handlers: list[Slow] = []

    def start(job_type: str) -> Slow:
        handler = Slow()
        handlers.append(handler)
        queue.process(job_type, handler)
        return handler

    yield start
    for handler in handlers:
        handler.release.set()
    queue.shutdown(5)


def test_cancel_a_running_job_with_a_reason(
    ui: Watched, queue: Queue, slow: Callable[[str], Slow]
) -> None:
    """From the job's page: the question says the running attempt is stopped; the reason is
    kept, shown as text; the handler learns at once; another page sees it go live."""
    handler = slow("long")
    job = queue.create_job("long", {"title": "forever"}).save()
    assert handler.started.wait(5)
    page = ui.goto(f"/job/{job.id}")
    expect(page.locator("h1 .badge")).to_have_text("Active")
    lists = ui.context.new_page()
    lists.goto(f"{ui.server.base}/jobs/active")
    expect(lists.locator(f'tr[data-job="{job.id}"]')).to_have_count(1)
    expect(lists.locator("#live-status")).to_have_text("live")
    page.bring_to_front()  # a page behind gets few animation frames: slow clicks

    page.get_by_role("button", name="Cancel", exact=True).click()
    dialog = page.locator("dialog#confirm")
    expect(dialog).to_be_visible()
    expect(dialog).to_contain_text(f"Cancel job #{job.id} (long)? Its running attempt is stopped")
    expect(dialog.get_by_label("Reason")).to_be_focused()
    dialog.get_by_label("Reason").fill(f"wrong input {XSS}")
    dialog.get_by_role("button", name="Cancel job").click()

    expect(page.locator("h1 .badge")).to_have_text("Failed")
    expect(page.locator("#cancelled")).to_contain_text(f"Reason: wrong input {XSS}")
    expect(page.locator(".timeline li.cancelled")).to_contain_text("Cancelled from Active")
    assert handler.stopped.wait(5)  # the worker was told, not left to find out later
    got = queue.get_job(job.id)
    assert got.state == "failed" and got.error == f"cancelled: wrong input {XSS}"
    expect(lists.locator(f'tr[data-job="{job.id}"]')).to_have_count(0)  # live, elsewhere
    assert page.evaluate("window.__xss") is None


def test_a_refresh_waits_for_a_press_to_end(ui: Watched, queue: Queue) -> None:
    """A live refresh that comes between a button's press and its release leaves the part
    alone until the release, so the click is not lost; then the part catches up."""
    job = queue.create_job("mail", {"title": "press me"}).save()
    page = ui.goto("/jobs/inactive")
    button = page.locator(f'tr[data-job="{job.id}"]').get_by_role("button", name="Cancel")
    button.hover()  # waits until the button is visible and still, then puts the pointer on it
    page.mouse.down()
    other = queue.create_job("mail", {"title": "arrives"}).save()  # the list changes
    # The refresh has come: the header's count, in a part not pressed, shows the new job...
    expect(page.locator('nav .count[data-count="inactive"]')).to_have_text("2")
    expect(page.locator(f'tr[data-job="{other.id}"]')).to_have_count(0)  # ...the list waits
    page.mouse.up()
    dialog = page.locator("dialog#confirm")
    expect(dialog).to_contain_text(f"Cancel job #{job.id} (mail)? It fails at once")
    expect(page.locator(f'tr[data-job="{other.id}"]')).to_have_count(1)  # and then happens
    dialog.get_by_role("button", name="Keep it").click()


def test_cancel_from_the_lists(ui: Watched, queue: Queue) -> None:
    """A row's Cancel asks first: keeping the job keeps it; confirming (with Enter in the
    reason field, or without a reason) cancels it, and the row goes."""
    kept = queue.create_job("mail", {"title": "keep me"}).save()
    gone = queue.create_job("mail", {"title": "cancel me"}).save()
    page = ui.goto("/jobs/inactive")
    dialog = page.locator("dialog#confirm")
    page.locator(f'tr[data-job="{kept.id}"]').get_by_role("button", name="Cancel").click()
    expect(dialog).to_contain_text(f"Cancel job #{kept.id} (mail)? It fails at once")
    dialog.get_by_role("button", name="Keep it").click()
    expect(dialog).to_be_hidden()
    assert queue.get_job(kept.id).state == "inactive"

    page.locator(f'tr[data-job="{gone.id}"]').get_by_role("button", name="Cancel").click()
    dialog.get_by_label("Reason").fill("duplicate")
    dialog.get_by_label("Reason").press("Enter")
    expect(page.locator(f'tr[data-job="{gone.id}"]')).to_have_count(0)
    expect(page.locator("table.jobs tbody tr")).to_have_count(1)
    assert queue.get_job(gone.id).error == "cancelled: duplicate"

    delayed = queue.create_job("mail").delay(3_600_000).save()
    page.goto(f"{ui.server.base}/jobs/delayed")
    page.locator(f'tr[data-job="{delayed.id}"]').get_by_role("button", name="Cancel").click()
    dialog.get_by_role("button", name="Cancel job").click()
    expect(page.locator("p.empty")).to_have_text("No delayed jobs.")
    assert queue.get_job(delayed.id).error == "cancelled"

    page.goto(f"{ui.server.base}/jobs/failed")
    row = page.locator(f'tr[data-job="{delayed.id}"]')
    expect(row.locator(".error .badge.cancelled")).to_have_text("cancelled")
    expect(page.locator(f'tr[data-job="{gone.id}"] .error')).to_have_text("cancelled duplicate")


def test_move_a_waiting_job_and_a_running_one(
    ui: Watched, queue: Queue, slow: Callable[[str], Slow]
) -> None:
    """Move suggests the known types; a running job moves only after a question that says
    its attempt will be stopped; a list of the old type sees the job leave, live."""
    waiting = queue.create_job("mail", {"title": "to sms"}).save()
    queue.create_job("sms").save()
    page = ui.goto(f"/job/{waiting.id}")
    options = page.locator("#known-types option")
    expect(options).to_have_count(1)
    assert options.first.get_attribute("value") == "sms"
    listed = ui.context.new_page()
    listed.goto(f"{ui.server.base}/jobs/inactive?type=mail")
    expect(listed.locator(f'tr[data-job="{waiting.id}"]')).to_have_count(1)
    expect(listed.locator("#live-status")).to_have_text("live")
    page.bring_to_front()  # a page behind gets few animation frames: slow clicks

    page.get_by_label("Move to type").fill("sms")
    page.get_by_role("button", name="Move", exact=True).click()
    expect(page.locator("h1 .type")).to_have_text("sms")
    expect(page.locator("h1 .badge")).to_have_text("Queued")
    expect(page.locator(".timeline li.moved")).to_contain_text("Moved from mail to sms")
    assert queue.get_job(waiting.id).type == "sms"
    expect(listed.locator("p.empty")).to_have_text("No queued jobs of type mail.")

    handler = slow("render")
    running = queue.create_job("render", {"title": "busy"}).save()
    assert handler.started.wait(5)
    page.goto(f"{ui.server.base}/job/{running.id}")
    expect(page.locator("h1 .badge")).to_have_text("Active")
    dialog = page.locator("dialog#confirm")
    page.get_by_label("Move to type").fill("render-later")
    page.get_by_role("button", name="Move", exact=True).click()
    expect(dialog).to_contain_text(f"Job #{running.id} is running: moving it to render-later")
    expect(dialog).to_contain_text("stops its running attempt")
    dialog.get_by_role("button", name="Keep it running").click()
    expect(dialog).to_be_hidden()
    assert queue.get_job(running.id).state == "active"
    assert not handler.stopped.is_set()

    page.get_by_role("button", name="Move", exact=True).click()
    dialog.get_by_role("button", name="Stop and move").click()
    expect(page.locator("h1 .type")).to_have_text("render-later")
    expect(page.locator("h1 .badge")).to_have_text("Queued")
    assert handler.stopped.wait(5)
    got = queue.get_job(running.id)
    assert (got.type, got.state) == ("render-later", "inactive")


def test_edit_data_then_retry_from_the_failed_list(ui: Watched, queue: Queue) -> None:
    """Two clicks from the failed list: Edit opens the job's editor on its data, pretty-
    printed; invalid JSON is refused in the page (nothing is sent); Save and retry saves the
    data and queues the job again. A live refresh meanwhile leaves the text being typed."""
    job = queue.create_job("webhook", {"url": "http://bad.example", "n": 1}).save()
    finish(queue, "webhook", ok=False)
    page = ui.goto("/jobs/failed")
    page.locator(f'tr[data-job="{job.id}"]').get_by_role("link", name="Edit").click()
    page.wait_for_url(f"**/kue/job/{job.id}#edit")
    editor = page.get_by_label("The job's data, as JSON")
    expect(editor).to_be_focused()
    assert json.loads(editor.input_value()) == {"url": "http://bad.example", "n": 1}
    assert editor.input_value() == json.dumps(job.data, indent=2)
    expect(page.locator("#job-data")).to_be_hidden()

    editor.fill('{"url": "http://good.example", "n": 2,}')
    page.get_by_role("button", name="Save", exact=True).click()
    expect(page.locator("#edit-error")).to_contain_text("Not valid JSON, nothing was saved")
    expect(editor).to_have_attribute("aria-invalid", "true")
    assert not [u for u in ui.requests if u.endswith(f"/api/job/{job.id}/data")]
    editor.press("End")
    editor.press("Backspace")
    editor.press("Backspace")
    editor.type("}")
    expect(page.locator("#edit-error")).to_be_empty()  # typing clears the error

    expect(page.locator("#live-status")).to_have_text("live")
    with page.expect_response(
        lambda r: r.url.split("#")[0].endswith(f"/job/{job.id}")
    ) as refreshed:
        queue.get_job(job.id).progress(30, 100)
    refreshed.value.finished()
    expect(page.locator(".facts progress")).to_have_attribute("value", "30")
    expect(editor).to_have_value('{"url": "http://good.example", "n": 2}')

    page.get_by_role("button", name="Save and retry").click()
    expect(page.locator("h1 .badge")).to_have_text("Queued")
    expect(page.locator("#editor")).to_be_hidden()
    expect(page.locator("#job-data")).to_contain_text('"url": "http://good.example"')
    expect(page.locator(".timeline li.edited")).to_contain_text("Data edited while failed")
    got = queue.get_job(job.id)
    assert (got.state, got.data) == ("inactive", {"url": "http://good.example", "n": 2})

    # A queued job: Save only (no retry), and Discard leaves the data as it was.
    page.get_by_role("button", name="Edit", exact=True).click()
    expect(page.get_by_role("button", name="Save and retry")).to_be_hidden()
    editor.fill("[1, 2]")
    page.get_by_role("button", name="Discard").click()
    expect(page.locator("#job-data")).to_be_visible()
    assert queue.get_job(job.id).data == {"url": "http://good.example", "n": 2}
    page.get_by_role("button", name="Edit", exact=True).click()
    editor.fill('{"n": 3}')
    page.get_by_role("button", name="Save", exact=True).click()
    expect(page.locator("#job-data")).to_have_text('{\n  "n": 3\n}')
    assert queue.get_job(job.id).data == {"n": 3}


def test_stop_a_worker_process(ui: Watched, queue: Queue, slow: Callable[[str], Slow]) -> None:
    """Stop on a worker's row asks first; the row then says Stopping… while its running job
    finishes, and goes when the process has stopped. Types paused in that process show."""
    handler = slow("report")
    queue.process("mail", lambda job: None)
    queue.pause("mail", local=True)
    job = queue.create_job("report").save()
    assert handler.started.wait(5)
    wait_for(lambda: [w["paused"] for w in queue.workers()] == [["mail"]])
    page = ui.goto("/")
    row = page.locator("table.workers tbody tr")
    expect(row).to_have_count(1)
    expect(row.locator(".chip.paused")).to_have_text("mail paused here")
    dialog = page.locator("dialog#confirm")
    row.get_by_role("button", name="Stop").click()
    expect(dialog).to_contain_text("It claims no more jobs, as on SIGTERM")
    dialog.get_by_role("button", name="Keep it running").click()
    expect(dialog).to_be_hidden()
    assert len(queue.workers()) == 1

    row.get_by_role("button", name="Stop").click()
    dialog.get_by_role("button", name="Stop it").click()
    expect(row.get_by_role("button", name="Stopping…")).to_be_disabled()
    assert queue.get_job(job.id).state == "active"
    handler.release.set()  # its running job finishes; then the process is gone
    expect(page.locator("table.workers")).to_have_count(0, timeout=15_000)
    expect(page.get_by_text("No worker is running.")).to_be_visible()
    assert queue.get_job(job.id).state == "complete"
    assert queue.stopped_remotely.wait(5)
