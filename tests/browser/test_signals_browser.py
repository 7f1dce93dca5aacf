"""A job's signals on its page, in Chromium (docs/signals.md): a job suspended by its handler
says what it waits for; an operator sends its signal from the Signal button's form, and the
page follows the job to its end, the wait and the resumption in its timeline; text that is not
JSON is refused in the form and nothing is sent; an error from the server is told; a viewer
gets no Signal button and sees signals and steps as ``[hidden]``; hostile text in a payload
stays text."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, Request, Response, expect

from kue_core import Job, Queue, WaitForSignal
from tests.browser.conftest import HOST_APP, MOUNT, Watched, fits_phone, phone_dark
from tests.browser.test_redaction_browser import USERS, pretty, signed_in, text_of
from tests.conftest import Server, wait_for

IMG = "<img src=x onerror=window.__pwned=1>"
SCRIPT = "</pre><script>window.__pwned=1</script>"
SECRET = "zq7signal"
#: How long a test waits at most for the event stream to connect or a live refresh, in ms.
LIVE = 15_000


@pytest.fixture
def dashboard(redis_url: str, prefix: str) -> Iterator[Server]:
    """The dashboard with an admin (ada), an operator (olga) and a viewer (vic)."""
    server = Server(redis_url, prefix, HOST_APP, MOUNT, KUE_USERS=USERS)
    server.start()
    yield server
    server.kill()


def suspended(q: Queue, timeout: int | None = None, step: Any = None) -> int:
    """A job whose handler records step ``check`` (its result ``step``), then waits for signal
    ``approval`` and returns its payload; its id, once suspended (a worker in this process)."""

    def handler(job: Job) -> Any:
        job.step("check", lambda: step)
        if "approval" not in job.signals:
            raise WaitForSignal("approval", timeout=timeout)
        return job.signals["approval"]

    job = q.create_job("approve", {}).save()
    q.process("approve", 1, handler)
    wait_for(lambda: q.get_job(job.id).state == "suspended")  # type: ignore[arg-type]
    return job.id  # type: ignore[return-value]


def signalling(response: Response) -> bool:
    return response.request.method == "POST" and response.url.endswith("/signal")


def open_form(page: Page) -> None:
    """Once the page is live, press Signal: its form opens."""
    expect(page.locator("#live-status")).to_have_text("live", timeout=LIVE)
    page.locator("#signal").click()
    expect(page.locator("#signal-dialog")).to_be_visible()


def send(page: Page, payload: str) -> Any:
    """Type ``payload`` into the open form and send it; the server's answer (JSON)."""
    page.locator("#signal-payload").fill(payload)
    with page.expect_response(signalling) as answer:
        page.locator("#signal-send").click()
    return answer.value.json()


def test_an_operator_signals_a_suspended_job_and_its_page_follows_it(
    browser: Browser, redis_url: str, prefix: str, dashboard: Server
) -> None:
    with Queue(redis_url, prefix=prefix) as q:
        job_id = suspended(q, timeout=3_600_000, step={"checked": SECRET})
        with (
            signed_in(browser, dashboard, "ada") as admin,
            signed_in(browser, dashboard, "olga") as w,
        ):
            watching = admin.goto(f"/job/{job_id}")  # an admin's page, left open
            page = w.goto(f"/job/{job_id}")
            notice = page.locator("#waiting-for")
            expect(notice).to_contain_text(re.compile(r"Waiting for signal approval until \d{4}-"))
            expect(notice).to_contain_text("; then it resumes without it.")
            expect(notice.locator("time[data-ms]")).to_have_text(re.compile(r"^in (59m|1h)$"))
            wait_item = page.locator(".timeline li.signal")
            expect(wait_item).to_contain_text("Waits for signal approval (until ")
            expect(page.locator(".timeline li.step")).to_contain_text("Step check recorded")

            open_form(page)
            expect(page.locator("#signal-name")).to_have_value("approval")  # the one waited for
            expect(page.locator("#signal-payload")).to_be_focused()
            answer = send(page, '{"by": "olga", "n": [1, 2]}')
            assert answer["outcome"] == "resumed"
            expect(page.locator("#signal-dialog")).to_be_hidden()
            expect(page.locator("#toast")).to_have_text(f"job {job_id} resumed by signal approval")

            for p in (page, watching):
                expect(p.locator("h1 .badge")).to_have_text("Complete", timeout=LIVE)
                expect(p.locator("#waiting-for")).to_have_count(0)
                expect(p.locator(".timeline li.signal")).to_have_count(1)
                resumed = p.locator(".timeline li.resumed")
                expect(resumed).to_contain_text("Resumed by signal approval now queued")
                expect(p.locator("#resumed")).to_contain_text("by signal approval")
            expect(page.locator("#signal")).to_have_count(0)  # it has ended
            # An operator sees no payload; the admin's page shows the signal and the result.
            for pre in ("#job-signals", "#job-steps", "#job-result"):
                assert text_of(page, pre) == '"[hidden]"', pre
            assert SECRET not in page.content()
            expect(watching.locator("#job-signals dt")).to_have_text(["approval"])
            assert text_of(watching, "#job-signals dd pre") == pretty({"by": "olga", "n": [1, 2]})
            assert text_of(watching, "#job-steps dd pre") == pretty({"checked": SECRET})
            assert text_of(watching, "#job-result") == pretty({"by": "olga", "n": [1, 2]})
        assert q.get_job(job_id).signals == {"approval": {"by": "olga", "n": [1, 2]}}


def test_text_that_is_not_json_is_refused_in_the_form_and_nothing_is_sent(
    browser: Browser, redis_url: str, prefix: str, dashboard: Server
) -> None:
    with Queue(redis_url, prefix=prefix) as q:
        job_id = suspended(q)
        with signed_in(browser, dashboard, "olga") as w:
            page = w.goto(f"/job/{job_id}")
            posts: list[str] = []

            def note(request: Request) -> None:
                if request.method == "POST":
                    posts.append(request.url)

            page.on("request", note)
            open_form(page)
            payload = page.locator("#signal-payload")
            payload.fill('{"by": olga}')
            page.locator("#signal-send").click()
            error = page.locator("#signal-error")
            expect(error).to_contain_text("Not valid JSON, nothing was sent")
            expect(payload).to_have_attribute("aria-invalid", "true")
            expect(payload).to_be_focused()
            # No name: told too.
            page.locator("#signal-name").fill("")
            payload.fill('{"by": "olga"}')
            expect(error).to_be_hidden()  # typing clears it
            page.locator("#signal-name").press("Enter")
            expect(error).to_have_text("Name the signal: nothing was sent.")
            expect(page.locator("#signal-name")).to_be_focused()
            page.locator("#signal-back").click()
            expect(page.locator("#signal-dialog")).to_be_hidden()
            # The form checks before it sends: each refusal was shown before any request.
            assert posts == []
        job = q.get_job(job_id)
        assert job.state == "suspended" and job.signals == {}


def test_a_signal_to_a_job_that_ended_meanwhile_is_told_as_an_error(
    browser: Browser, redis_url: str, prefix: str, dashboard: Server
) -> None:
    with Queue(redis_url, prefix=prefix) as q:
        job_id = suspended(q)
        with signed_in(browser, dashboard, "olga") as w:
            page = w.goto(f"/job/{job_id}")
            open_form(page)
            q.cancel(job_id, "no longer wanted")  # while the form is open
            expect(page.locator("h1 .badge")).to_have_text("Failed", timeout=LIVE)
            expect(page.locator("#signal-dialog")).to_be_visible()  # the refresh left it
            answer = send(page, '{"by": "olga"}')
            assert "waits for no signal" in answer["error"]
            toast = page.locator("#toast")
            expect(toast).to_have_text(answer["error"])
            expect(toast).to_have_class(re.compile(r"\bbad\b"))
            expect(page.locator("#signal-error")).to_have_text(answer["error"])
            expect(page.locator("#signal-dialog")).to_be_visible()
        assert q.get_job(job_id).signals == {}


def test_a_viewer_gets_no_signal_button_and_sees_signals_and_steps_hidden(
    browser: Browser, redis_url: str, prefix: str, dashboard: Server
) -> None:
    with Queue(redis_url, prefix=prefix) as q:
        job_id = suspended(q, step={"checked": SECRET})
        assert q.signal(job_id, "other", {"pin": SECRET}) == "kept"
        with signed_in(browser, dashboard, "vic") as w:
            page = w.goto(f"/job/{job_id}")
            expect(page.locator("#waiting-for")).to_contain_text("Waiting for signal approval")
            expect(page.locator("#signal")).to_have_count(0)
            expect(page.locator("#signal-dialog")).to_have_count(0)
            for pre in ("#job-signals", "#job-steps"):
                assert text_of(page, pre) == '"[hidden]"', pre
            assert SECRET not in page.content()
            # Signalled from elsewhere: the page follows, its payloads hidden still.
            expect(page.locator("#live-status")).to_have_text("live", timeout=LIVE)
            assert q.signal(job_id, "approval", {"pin": SECRET}) == "resumed"
            expect(page.locator("h1 .badge")).to_have_text("Complete", timeout=LIVE)
            expect(page.locator(".timeline li.resumed")).to_contain_text(
                "Resumed by signal approval"
            )
            for pre in ("#job-signals", "#job-steps", "#job-result"):
                assert text_of(page, pre) == '"[hidden]"', pre
            assert SECRET not in page.content()


def test_hostile_text_in_signals_and_steps_stays_text(
    ui: Watched, redis_url: str, prefix: str
) -> None:
    step = {"note": IMG, "end": SCRIPT}
    payload = {"by": IMG, "why": SCRIPT}
    with Queue(redis_url, prefix=prefix) as q:
        job_id = suspended(q, step=step)
        page = ui.goto(f"/job/{job_id}")
        assert text_of(page, "#job-steps dd pre") == pretty(step)
        open_form(page)
        assert send(page, pretty(payload))["outcome"] == "resumed"
        expect(page.locator("h1 .badge")).to_have_text("Complete", timeout=LIVE)
        assert text_of(page, "#job-signals dd pre") == pretty(payload)
        assert text_of(page, "#job-steps dd pre") == pretty(step)
        assert text_of(page, "#job-result") == pretty(payload)
        assert page.locator("#data-panel pre *").count() == 0  # no element made of the text
        assert page.evaluate("document.querySelectorAll('img[src=x], main script').length") == 0
        assert page.evaluate("typeof window.__pwned") == "undefined"


def test_the_wait_and_the_form_fit_a_phone(
    browser: Browser, server: Server, redis_url: str, prefix: str
) -> None:
    with Queue(redis_url, prefix=prefix) as q:
        job_id = suspended(q, timeout=86_400_000, step={"checked": "x" * 300})
        with phone_dark(browser, server) as w:
            page = w.goto(f"/job/{job_id}")
            expect(page.locator("#waiting-for")).to_be_visible()
            fits_phone(page, "job-suspended-phone-dark.png")
            open_form(page)
            box = page.locator("#signal-dialog").bounding_box()
            assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= 390
            fits_phone(page, "job-signal-form-phone-dark.png")


def test_reveal_shows_signals_and_steps_as_text(
    browser: Browser, redis_url: str, prefix: str
) -> None:
    """An operator allowed to reveal (``KUE_REVEAL_ROLE``) gets signals and steps whole, as
    the page shows them to an admin."""
    server = Server(redis_url, prefix, HOST_APP, MOUNT, KUE_USERS=USERS, KUE_REVEAL_ROLE="operator")
    server.start()
    try:
        with Queue(redis_url, prefix=prefix) as q:
            job_id = suspended(q, step={"note": IMG})
            assert q.signal(job_id, "other", {"why": SCRIPT}) == "kept"
            with signed_in(browser, server, "olga") as w:
                page = w.goto(f"/job/{job_id}")
                assert text_of(page, "#job-signals") == '"[hidden]"'
                with page.expect_response(lambda r: r.url.endswith("/reveal")) as answer:
                    page.locator("#reveal").click()
                assert answer.value.ok
                expect(page.locator("#job-signals dt")).to_have_text(["other"])
                assert text_of(page, "#job-signals dd pre") == pretty({"why": SCRIPT})
                expect(page.locator("#job-steps dt")).to_have_text(["check"])
                assert text_of(page, "#job-steps dd pre") == pretty({"note": IMG})
                assert page.locator("#data-panel pre *").count() == 0
                assert page.evaluate("typeof window.__pwned") == "undefined"
    finally:
        server.kill()
