"""Who sees payloads, in Chromium (kue_http/redaction.py, docs/security.md, "Who sees
payloads"): a viewer's and an operator's job page holds none of a job's data, result and
progress data, only ``[hidden]``, live refreshes included, and offers no Reveal; an admin's
masks the sensitive fields until Reveal shows them whole (recorded in the audit log first),
and a live refresh does not mask them again; hostile text revealed stays text; the data editor
of a job with a masked field is hidden until Reveal, then opens on the true data, and the page
shows what was saved."""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, Request, Response, expect

from kue_core import Queue
from kue_core.store import calls
from tests.browser.conftest import HOST_APP, MOUNT, Watched, watched
from tests.conftest import Server

USERS = "ada:a-pass:admin,olga:o-pass:operator,vic:v-pass:viewer"
SENSITIVE = "signup:card.number,*:token"
#: A word in every payload below, and nowhere else on a page.
SECRET = "zq7secret"
DATA = {"email": f"{SECRET}-email", "card": {"number": f"{SECRET}-card", "brand": "visa"}}
RESULT = {"token": f"{SECRET}-token", "sent": True}
PROGRESS = {"step": "sending", "token": f"{SECRET}-progress"}
#: Progress reported again once the job completed (at 100%): an event for the job, and a
#: change to both its progress bar and its progress data, in one write.
LATER = {"step": "sent", "token": f"{SECRET}-later"}
#: What an admin's view hides of a signup job run with the payloads above.
MASKED = ["data.card.number", "result.token", "progress_data.token"]
IMG = "<img src=x onerror=window.__pwned=1>"
SCRIPT = "</pre><script>window.__pwned=1</script>"
#: How long a test waits at most for the event stream to connect or a live refresh, in ms.
LIVE = 15_000


@pytest.fixture
def dashboard(redis_url: str, prefix: str) -> Iterator[Server]:
    """The dashboard with an admin, an operator and a viewer, and sensitive fields; Reveal
    for the admin (``KUE_REVEAL_ROLE`` unset)."""
    server = Server(
        redis_url, prefix, HOST_APP, MOUNT, KUE_USERS=USERS, KUE_SENSITIVE_FIELDS=SENSITIVE
    )
    server.start()
    yield server
    server.kill()


@contextlib.contextmanager
def signed_in(browser: Browser, server: Server, name: str) -> Iterator[Watched]:
    """A page signed in as ``name`` (basic auth), checked at the end as ``ui``'s."""
    credentials = {"username": name, "password": f"{name[0]}-pass"}
    w = watched(browser, server, http_credentials=credentials)
    try:
        yield w
    finally:
        w.context.close()
    w.check()


def run_to_complete(q: Queue, data: Any, result: Any, progress: Any) -> int:
    """A signup job with ``data``, claimed as worker ``kue:test:1``, reporting half done with
    ``progress`` data, completed to ``result``: its id."""
    q.create_job("signup", data).save()
    claimed = q.scripts.call(calls.claim(q.keys, "signup", "kue:test:1", 10_000))
    assert isinstance(claimed, tuple), claimed
    job_id, fields = claimed
    q.get_job(job_id).progress(1, 2, progress)
    q.scripts.call(calls.complete(q.keys, job_id, fields["lease"], json.dumps(result), None))
    return int(job_id)


def text_of(page: Page, selector: str) -> str:
    """An element's textContent, exactly (``inner_text`` and ``to_have_text`` trim)."""
    return str(page.locator(selector).evaluate("e => e.textContent"))


def pretty(value: Any) -> str:
    """A value as JSON, indented as the page shows it (the server's and kue.js's alike)."""
    return json.dumps(value, indent=2, ensure_ascii=False)


def revealing(response: Response) -> bool:
    return response.request.method == "POST" and response.url.endswith("/reveal")


def reveal(page: Page) -> Any:
    """Press Reveal, and wait until the page shows what the server answered (returned) and
    marks the notice hidden (out of sight: test_the_notice_goes_once_revealed)."""
    with page.expect_response(revealing) as answer:
        page.locator("#reveal").click()
    assert answer.value.status == 200
    expect(page.locator('[data-live="data"]')).to_have_attribute("data-revealed", "")
    expect(page.locator("#hidden-note")).to_have_attribute("hidden", "")
    return answer.value.json()


def progress_bar(page: Page) -> Any:
    return page.locator('[data-live="job"] progress')


@pytest.mark.parametrize("name", ["vic", "olga"])
def test_a_viewer_and_an_operator_see_no_payload_and_no_reveal(
    browser: Browser, redis_url: str, prefix: str, dashboard: Server, name: str
) -> None:
    with Queue(redis_url, prefix=prefix) as q:
        job_id = run_to_complete(q, DATA, RESULT, PROGRESS)
        with signed_in(browser, dashboard, name) as w:
            page = w.goto(f"/job/{job_id}")
            expect(page.locator("h1 .badge")).to_have_text("Complete")  # the page, not a 401
            for pre in ("#job-data", "#job-result", "#job-progress"):
                assert text_of(page, pre) == '"[hidden]"', pre
            note = page.locator("#hidden-note")
            expect(note).to_be_visible()
            expect(note).to_contain_text("Its payload is hidden from your role")
            expect(page.locator("#reveal")).to_have_count(0)
            expect(page.locator("#edit-data")).to_have_count(0)  # editing data is an admin's
            assert SECRET not in page.content()
            # A live refresh brings the new progress data hidden as well.
            expect(page.locator("#live-status")).to_have_text("live", timeout=LIVE)
            q.get_job(job_id).progress(1, 4, LATER)
            expect(progress_bar(page)).to_have_attribute("value", "25", timeout=LIVE)
            assert text_of(page, "#job-progress") == '"[hidden]"'
            assert SECRET not in page.content()
            # Nor does a reveal made by hand get past the server.
            refused = w.context.request.post(
                f"{dashboard.base}/api/job/{job_id}/reveal", data={}, fail_on_status_code=False
            )
            assert refused.status == 403 and SECRET not in refused.text()


def test_an_admin_reveals_the_sensitive_fields_and_a_refresh_keeps_them_shown(
    browser: Browser, redis_url: str, prefix: str, dashboard: Server
) -> None:
    with Queue(redis_url, prefix=prefix) as q:
        job_id = run_to_complete(q, DATA, RESULT, PROGRESS)
        with signed_in(browser, dashboard, "ada") as w:
            # Another page of the same job, never revealed: its data panel is refreshed.
            other = w.context.new_page()
            other.goto(f"{dashboard.base}/job/{job_id}")
            page = w.goto(f"/job/{job_id}")
            masked = {**DATA, "card": {"number": "[hidden]", "brand": "visa"}}
            assert text_of(page, "#job-data") == pretty(masked)
            assert text_of(page, "#job-result") == pretty({"token": "[hidden]", "sent": True})
            assert text_of(page, "#job-progress") == pretty({**PROGRESS, "token": "[hidden]"})
            for value in (f"{SECRET}-card", f"{SECRET}-token", f"{SECRET}-progress"):
                assert value not in page.content()
            expect(page.locator("#hidden-note")).to_contain_text(
                f"Sensitive fields are hidden: {', '.join(MASKED)}"
            )
            assert reveal(page)["revealed"] == MASKED
            assert text_of(page, "#job-data") == pretty(DATA)
            assert text_of(page, "#job-result") == pretty(RESULT)
            assert text_of(page, "#job-progress") == pretty(PROGRESS)
            # An event for the job: both pages refresh (the progress bar), the revealed one
            # but for its data panel, which would hide the fields anew.
            for p in (page, other):
                expect(p.locator("#live-status")).to_have_text("live", timeout=LIVE)
            q.get_job(job_id).progress(1, 4, LATER)
            for p in (page, other):
                expect(progress_bar(p)).to_have_attribute("value", "25", timeout=LIVE)
            assert text_of(other, "#job-progress") == pretty({**LATER, "token": "[hidden]"})
            assert text_of(page, "#job-data") == pretty(DATA)
            assert text_of(page, "#job-result") == pretty(RESULT)
            assert text_of(page, "#job-progress") == pretty(PROGRESS)  # as revealed
            expect(page.locator("#hidden-note")).to_have_attribute("hidden", "")
            # The audit log has the reveal: who, which job, what, and none of the values.
            page = w.goto("/audit")
            rows = page.locator('#audit-table tbody tr[data-action="reveal"]')
            expect(rows).to_have_count(1)
            code = rows.locator("td.request code")
            expect(code).to_have_text(f"POST /api/job/{job_id}/reveal")  # the app's own path
            expect(rows.locator("td.request .detail")).to_have_text(f"revealed {', '.join(MASKED)}")
            expect(rows.locator("td").nth(3)).to_have_text("ada")
            assert SECRET not in page.content()


def test_revealed_hostile_text_is_shown_as_text(
    browser: Browser, redis_url: str, prefix: str, dashboard: Server
) -> None:
    data = {"note": IMG, "card": {"number": IMG, "brand": SCRIPT}, "token": SCRIPT}
    result = {"token": f"{IMG}{SCRIPT}", "ok": SCRIPT}
    with Queue(redis_url, prefix=prefix) as q:
        job_id = run_to_complete(q, data, result, {"token": SCRIPT})
    with signed_in(browser, dashboard, "ada") as w:
        page = w.goto(f"/job/{job_id}")
        masked = {**data, "card": {"number": "[hidden]", "brand": SCRIPT}, "token": "[hidden]"}
        assert text_of(page, "#job-data") == pretty(masked)  # the server's, escaped
        reveal(page)
        assert text_of(page, "#job-data") == pretty(data)
        assert text_of(page, "#job-result") == pretty(result)
        assert text_of(page, "#job-progress") == pretty({"token": SCRIPT})
        assert page.locator("#data-panel pre").count() == 3
        assert page.locator("#data-panel pre *").count() == 0  # no element made of the text
        assert page.evaluate("document.querySelectorAll('img[src=x], main script').length") == 0
        assert page.evaluate("typeof window.__pwned") == "undefined"


def test_an_admin_edits_the_true_data_once_revealed(
    browser: Browser, redis_url: str, prefix: str, dashboard: Server
) -> None:
    with Queue(redis_url, prefix=prefix) as q:
        job = q.create_job("signup", DATA).save()
        with signed_in(browser, dashboard, "ada") as w:
            page = w.goto(f"/job/{job.id}")
            edit = page.locator("#edit-data")
            # Masked, the data would be saved back with "[hidden]" in it: no Edit yet.
            expect(edit).to_have_attribute("hidden", "")
            expect(edit).to_be_hidden()
            expect(page.locator("#hidden-note")).to_contain_text("data.card.number")
            reveal(page)
            expect(edit).to_be_visible()
            edit.click()
            text = page.locator("#edit-text")
            expect(text).to_be_focused()
            assert json.loads(text.input_value()) == DATA
            assert "[hidden]" not in text.input_value()
            changed = {**DATA, "card": {"number": f"{SECRET}-card", "brand": "amex"}}
            text.fill(pretty(changed))
            with page.expect_response(lambda r: r.request.method == "PUT") as saved:
                page.locator("#edit-save").click()
            assert saved.value.ok
            expect(page.locator("#editor")).to_be_hidden()
            expect(page.locator("#job-data")).to_contain_text("amex")  # what was saved
            # Saved with the card number it had, not "[hidden]".
            assert q.get_job(job.id).data == changed  # type: ignore[arg-type]


# -- what a revealed page must not do --------------------------------------------------------


def test_the_notice_goes_once_revealed(
    browser: Browser, redis_url: str, prefix: str, dashboard: Server
) -> None:
    with Queue(redis_url, prefix=prefix) as q:
        job = q.create_job("signup", DATA).save()
    with signed_in(browser, dashboard, "ada") as w:
        page = w.goto(f"/job/{job.id}")
        expect(page.locator("#hidden-note")).to_be_visible()
        reveal(page)
        expect(page.locator("#hidden-note")).to_be_hidden(timeout=2_000)


def test_reveal_sends_its_post_alone(
    browser: Browser, redis_url: str, prefix: str, dashboard: Server
) -> None:
    with Queue(redis_url, prefix=prefix) as q:
        job = q.create_job("signup", DATA).save()
    with signed_in(browser, dashboard, "ada") as w:
        page = w.goto(f"/job/{job.id}")
        sent: list[str] = []

        def note(request: Request) -> None:
            if "/reveal" in request.url:
                sent.append(f"{request.method} {request.url}")

        page.on("request", note)
        reveal(page)  # both requests go in the same click, before this answer comes
        assert sent == [f"POST {dashboard.base}/api/job/{job.id}/reveal"]


def test_the_lists_edit_link_opens_no_editor_on_masked_data(
    browser: Browser, redis_url: str, prefix: str, dashboard: Server
) -> None:
    with Queue(redis_url, prefix=prefix) as q:
        job = q.create_job("signup", DATA).save()
    with signed_in(browser, dashboard, "ada") as w:
        page = w.goto("/jobs/inactive")
        page.locator(f"#edit-{job.id}").click()
        expect(page).to_have_url(re.compile(rf"/job/{job.id}#edit$"))
        expect(page.locator("#live-status")).to_have_text("live", timeout=LIVE)  # kue.js ran
        expect(page.locator("#edit-data")).to_be_hidden()
        expect(page.locator("#editor")).to_be_hidden(timeout=2_000)


def test_an_operator_sees_no_edit_link_in_the_lists(
    browser: Browser, redis_url: str, prefix: str, dashboard: Server
) -> None:
    with Queue(redis_url, prefix=prefix) as q:
        job = q.create_job("signup", DATA).save()
    with signed_in(browser, dashboard, "olga") as w:
        page = w.goto("/jobs/inactive")
        expect(page.locator(f"#cancel-{job.id}")).to_have_count(1)  # an operator's action
        expect(page.locator(f"#edit-{job.id}")).to_have_count(0, timeout=2_000)
