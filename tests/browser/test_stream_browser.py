"""A job's stream on its page, in Chromium (docs/streams.md, "In the dashboard"): the parts a
running job streams appear live, in order, hostile text as text; the end closes the page's
EventSource and says how the job ended; a retry's parts come under a marker of their attempt,
and a job retried after its end is followed again; a viewer sees every part as ``[hidden]``."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, expect

from kue_core import Queue
from kue_core.store import calls
from tests.browser.conftest import HOST_APP, MOUNT, Watched
from tests.browser.test_redaction_browser import USERS, signed_in
from tests.conftest import Server

IMG = "<img src=x onerror=window.__pwned=1>"
SCRIPT = "</span><script>window.__pwned=1</script>"
SECRET = "zq7secret"
#: How long a test waits at most for a stream to connect or a part to show, in ms.
LIVE = 15_000
#: Run before the page's own script: every EventSource it opens is kept in
#: ``window.__sources``, so that a test can tell whether one was closed.
SOURCES = """
window.__sources = [];
window.EventSource = class extends window.EventSource {
  constructor(...args) {
    super(...args);
    window.__sources.push(this);
  }
};
"""


def running(q: Queue, attempts: int = 1) -> tuple[int, str]:
    """A ``tell`` job of ``attempts`` claimed as worker ``kue:test:1``: its id and lease."""
    job = q.create_job("tell", {}).attempts(attempts).save()
    return job.id, claim(q)  # type: ignore[return-value]


def claim(q: Queue) -> str:
    """The next ``tell`` job claimed as worker ``kue:test:1``: its lease token."""
    claimed = q.scripts.call(calls.claim(q.keys, "tell", "kue:test:1", 60_000))
    assert isinstance(claimed, tuple), claimed
    return str(claimed[1]["lease"])


def put(q: Queue, job_id: int, token: str, value: Any) -> str:
    part = json.dumps(value)
    return q.scripts.call(calls.stream(q.keys, job_id, token, [part], 1000, 10**6))


def complete(q: Queue, job_id: int, token: str) -> None:
    q.scripts.call(calls.complete(q.keys, job_id, token, '"told"', None))


def fail(q: Queue, job_id: int, token: str) -> None:
    """Fail the attempt; retried at once when the job has attempts left."""
    q.scripts.call(calls.fail(q.keys, job_id, token, "once more", "once more", 0, None))


def opened(ui: Watched, job_id: int) -> Page:
    """The job's page, its EventSources watched, once its stream is open."""
    ui.page.add_init_script(SOURCES)
    page = ui.goto(f"/job/{job_id}")
    expect(page.locator("#stream-state")).to_have_text("live", timeout=LIVE)
    return page


def shown(page: Page) -> list[list[str]]:
    """What the output holds: [class, text] of each of its elements, in order."""
    script = "e => [...e.children].map(c => [c.className, c.textContent])"
    return list(page.locator("#stream-output").evaluate(script))


def streams(page: Page) -> list[dict[str, Any]]:
    """The page's EventSources on a job's stream: their URL and state (2: closed)."""
    script = """() => window.__sources.filter(s => s.url.includes("/stream"))
        .map(s => ({url: s.url, state: s.readyState}))"""
    return list(page.evaluate(script))


def test_parts_show_live_as_text_and_the_end_closes_the_stream(
    ui: Watched, redis_url: str, prefix: str
) -> None:
    with Queue(redis_url, prefix=prefix) as q:
        job_id, token = running(q)
        put(q, job_id, token, "Once")  # held before the page opens: sent first
        page = opened(ui, job_id)
        expect(page.locator("#stream-output")).to_have_text("Once", timeout=LIVE)
        for value in (" upon", " a time", {"step": 2, "of": [1, 2]}, IMG, SCRIPT):
            put(q, job_id, token, value)
        expect(page.locator("#stream-output .stream-text")).to_have_count(2, timeout=LIVE)
        expect(page.locator("#stream-output .stream-text").last).to_have_text(
            IMG + SCRIPT, timeout=LIVE
        )
        assert shown(page) == [
            ["stream-text", "Once upon a time"],  # a stream of tokens reads as prose
            ["stream-value", '{"step":2,"of":[1,2]}'],  # any other value: compact JSON
            ["stream-text", IMG + SCRIPT],
        ]
        assert page.locator("#stream-output *").count() == 3  # no element made of the text
        assert page.evaluate("document.querySelectorAll('img[src=x], main script').length") == 0
        assert page.evaluate("typeof window.__pwned") == "undefined"
        expect(page.locator("#stream-empty")).to_be_hidden()
        [source] = streams(page)
        assert source["url"] == f"{ui.server.base}/api/job/{job_id}/stream"  # under the mount

        complete(q, job_id, token)
        expect(page.locator("#stream-state")).to_have_text("ended: complete", timeout=LIVE)
        assert streams(page) == [{**source, "state": 2}]  # closed: it does not reconnect
        # The page refreshes on the job's completion, its stream panel left as it was.
        expect(page.locator("h1 .badge")).to_have_text("Complete", timeout=LIVE)
        assert shown(page)[0] == ["stream-text", "Once upon a time"]
        assert len(streams(page)) == 1


def test_a_retrys_parts_come_under_their_attempt(ui: Watched, redis_url: str, prefix: str) -> None:
    with Queue(redis_url, prefix=prefix) as q:
        job_id, token = running(q, attempts=2)
        put(q, job_id, token, "try 1")
        page = opened(ui, job_id)
        expect(page.locator("#stream-output")).to_have_text("try 1", timeout=LIVE)
        fail(q, job_id, token)
        token = claim(q)
        put(q, job_id, token, "try 2")  # another claim: its parts are the attempt after
        put(q, job_id, token, {"done": True})
        expect(page.locator("#stream-output .stream-value")).to_have_count(1, timeout=LIVE)
        assert shown(page) == [
            ["stream-text", "try 1"],
            ["stream-attempt", "attempt 2"],
            ["stream-text", "try 2"],
            ["stream-value", '{"done":true}'],
        ]
        complete(q, job_id, token)
        expect(page.locator("#stream-state")).to_have_text("ended: complete", timeout=LIVE)
        assert [s["state"] for s in streams(page)] == [2]


def test_a_job_retried_after_its_end_is_followed_again(
    ui: Watched, redis_url: str, prefix: str
) -> None:
    with Queue(redis_url, prefix=prefix) as q:
        job_id, token = running(q)
        put(q, job_id, token, "first run")
        page = opened(ui, job_id)
        fail(q, job_id, token)  # no attempt left: failed
        expect(page.locator("#stream-state")).to_have_text("ended: failed", timeout=LIVE)
        q.retry(job_id)
        # The refresh that shows it retried opens the stream again, after the last part.
        expect(page.locator("#stream-state")).to_have_text("live", timeout=LIVE)
        token = claim(q)
        put(q, job_id, token, {"run": 2})
        complete(q, job_id, token)
        expect(page.locator("#stream-state")).to_have_text("ended: complete", timeout=LIVE)
        assert shown(page) == [
            ["stream-text", "first run"],
            ["stream-attempt", "attempt 2"],
            ["stream-value", '{"run":2}'],
        ]
        again = streams(page)
        assert [s["state"] for s in again] == [2, 2]
        assert "?after=" in again[1]["url"]


@pytest.fixture
def dashboard(redis_url: str, prefix: str) -> Iterator[Server]:
    """The dashboard with an admin, an operator and a viewer."""
    server = Server(redis_url, prefix, HOST_APP, MOUNT, KUE_USERS=USERS)
    server.start()
    yield server
    server.kill()


def test_a_viewer_sees_each_part_hidden(
    browser: Browser, redis_url: str, prefix: str, dashboard: Server
) -> None:
    with Queue(redis_url, prefix=prefix) as q:
        job_id, token = running(q)
        put(q, job_id, token, f"{SECRET} words")
        with signed_in(browser, dashboard, "vic") as w:
            page = w.goto(f"/job/{job_id}")
            expect(page.locator("#stream-state")).to_have_text("live", timeout=LIVE)
            put(q, job_id, token, {"card": SECRET})
            values = page.locator("#stream-output .stream-value")
            expect(values).to_have_count(2, timeout=LIVE)
            assert shown(page) == [["stream-value", "[hidden]"]] * 2  # one a line
            expect(page.locator("#stream-hidden-note")).to_be_visible()
            assert SECRET not in page.content()


def test_a_suspended_job_is_read_once_and_followed_again_once_it_runs(
    ui: Watched, redis_url: str, prefix: str
) -> None:
    """A job waiting for a signal may wait for days: its page reads what it streamed and
    closes its stream rather than hold a server thread; once the signal resumes it and a
    worker runs it, the page follows it again, after the last part it had."""
    with Queue(redis_url, prefix=prefix) as q:
        job_id, token = running(q)
        put(q, job_id, token, "asked for approval")
        q.scripts.call(calls.suspend(q.keys, job_id, token, "approval", None, "resume"))
        ui.page.add_init_script(SOURCES)
        page = ui.goto(f"/job/{job_id}")
        expect(page.locator("#stream-state")).to_have_text(
            "paused: waiting for a signal", timeout=LIVE
        )
        expect(page.locator("#stream-output")).to_have_text("asked for approval")
        assert [s["state"] for s in streams(page)] == [2]  # closed
        assert q.signal(job_id, "approval", "yes") == "resumed"
        token = claim(q)
        expect(page.locator("h1 .badge")).to_have_text("Active", timeout=LIVE)
        expect(page.locator("#stream-state")).to_have_text("live", timeout=LIVE)
        put(q, job_id, token, {"approved": True})
        expect(page.locator("#stream-output .stream-value")).to_have_text(
            '{"approved":true}', timeout=LIVE
        )
        complete(q, job_id, token)
        expect(page.locator("#stream-state")).to_have_text("ended: complete", timeout=LIVE)
        assert shown(page) == [
            ["stream-text", "asked for approval"],
            ["stream-attempt", "attempt 2"],
            ["stream-value", '{"approved":true}'],
        ]
