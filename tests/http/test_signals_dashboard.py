"""A job's signals on its page (docs/signals.md), through the Flask test client: a suspended
job says what it waits for, until when and what its timeout does; Signal is offered to a user
who may write on a job that has not ended; the timeline reads its wait, its resumption, its
steps and what it streamed; signals and steps show as text, escaped, ``[hidden]`` below admin."""

from __future__ import annotations

import json
import re
from html import unescape
from typing import Any

from flask import Flask
from markupsafe import escape

from kue_core import Job, Queue, WaitForSignal
from kue_http.dashboard.filters import utc
from tests.conftest import wait_for

from .test_redaction import ADA, OLGA, VIC, app_with

IMG = "<img src=x onerror=alert(1)>"
SECRET = "zq7signal"


def started(
    q: Queue, timeout: int | None = None, on_timeout: str = "resume", job_type: str = "approve"
) -> int:
    """A job that records step ``charge``, streams a part, then waits for signal ``approval``
    (its result: the signal's payload, or ``"timed out"``), and a worker for it; its id."""

    def handler(job: Job) -> Any:
        job.step("charge", lambda: {"note": IMG, "secret": SECRET})
        job.stream("working")
        if job.resumed is not None and job.resumed.by == "timeout":
            return "timed out"
        if "approval" not in job.signals:
            raise WaitForSignal("approval", timeout=timeout, on_timeout=on_timeout)
        return job.signals["approval"]

    job = q.create_job(job_type, {}).save()
    q.process(job_type, 1, handler)
    return job.id  # type: ignore[return-value]


def suspended(q: Queue, timeout: int | None = None, on_timeout: str = "resume") -> int:
    """A job of :func:`started`, once suspended; its id."""
    job_id = started(q, timeout, on_timeout)
    wait_for(lambda: q.get_job(job_id).state == "suspended")
    return job_id


def html_of(app: Flask, url: str, headers: dict[str, str] | None = None) -> str:
    res = app.test_client().get(url, headers=headers)
    assert res.status_code == 200, res.status_code
    return res.get_data(as_text=True)


def text(html: str) -> str:
    """A piece of a page as its words read, tags gone, spaces folded."""
    return " ".join(unescape(re.sub(r"<[^>]+>", "", html)).split())


def part(html: str, pattern: str) -> str:
    found = re.search(pattern, html, re.S)
    assert found, pattern
    return found.group(0)


def timeline(html: str) -> list[tuple[str, str]]:
    """The timeline's entries: (their classes, their words)."""
    items = re.findall(r'<li class="(state-[\w ]+)">(.*?)</li>', html, re.S)
    return [(classes, text(body)) for classes, body in items]


def test_a_suspended_jobs_page_says_what_it_waits_for_and_offers_signal(
    app: Flask, redis_url: str, prefix: str
) -> None:
    with Queue(redis_url, prefix=prefix) as q:
        job_id = suspended(q, timeout=3_600_000, on_timeout="fail")
        wait = q.get_job(job_id).waiting_for
        assert wait is not None and wait.until is not None
        html = html_of(app, f"/job/{job_id}")
    notice = text(part(html, r'<p class="notice suspended" id="waiting-for">.*?</p>'))
    assert re.fullmatch(
        rf"Waiting for signal approval until {utc(wait.until)} \(in (59m|1h)\); then it fails\."
        r" It holds no worker's slot meanwhile\.",
        notice,
    ), notice
    button = part(html, r'<button type="button" class="btn" id="signal"[^>]*>Signal</button>')
    assert 'data-signal="approval"' in button
    assert f'<form class="signal" id="signal-form" data-url="/api/job/{job_id}/signal"' in html
    entries = timeline(html)
    assert [classes for classes, _ in entries] == [
        "state-inactive",
        "state-active",
        "state-active step",
        "state-active streamed",
        "state-suspended signal",
    ]
    assert re.fullmatch(r"Step charge recorded \d+s ago attempt 1", entries[2][1])
    assert re.fullmatch(r"Streamed \(attempt 1\) \d+s ago", entries[3][1])
    waits = rf"Waits for signal approval \(until {utc(wait.until)}\) \d+s ago \S+"
    assert re.fullmatch(waits, entries[4][1]), entries[4][1]
    # The step's result as text: escaped, never markup.
    steps = part(html, r'<dl class="pairs" id="job-steps">.*?</dl>')
    pretty = json.dumps({"note": IMG, "secret": SECRET}, indent=2)
    assert steps == (
        f'<dl class="pairs" id="job-steps"><dt class="mono">charge</dt>'
        f'<dd><pre class="json">{escape(pretty)}</pre></dd></dl>'
    )
    assert IMG not in html


def test_a_wait_without_a_deadline_says_so(app: Flask, redis_url: str, prefix: str) -> None:
    with Queue(redis_url, prefix=prefix) as q:
        job_id = suspended(q)
        html = html_of(app, f"/job/{job_id}")
    notice = text(part(html, r'<p class="notice suspended" id="waiting-for">.*?</p>'))
    assert notice.startswith("Waiting for signal approval: no deadline.")
    assert "(until" not in text(html)


def test_a_signalled_job_shows_its_signal_escaped_and_its_resumption(
    app: Flask, redis_url: str, prefix: str
) -> None:
    payload = {"by": IMG, "note": "</pre><script>alert(1)</script>"}
    with Queue(redis_url, prefix=prefix) as q:
        job_id = suspended(q)
        assert q.signal(job_id, "approval", payload) == "resumed"
        wait_for(lambda: q.get_job(job_id).state == "complete")
        html = html_of(app, f"/job/{job_id}")
    assert 'id="waiting-for"' not in html and 'id="signal"' not in html  # it has ended
    signals = part(html, r'<dl class="pairs" id="job-signals">.*?</dl>')
    assert f'<pre class="json">{escape(json.dumps(payload, indent=2))}</pre>' in signals
    assert IMG not in html and "<script>alert" not in html
    assert text(part(html, r'<dd id="resumed">.*?</dd>')).startswith("by signal approval")
    resumed = [e for e in timeline(html) if e[0].endswith(" resumed")]
    assert len(resumed) == 1 and resumed[0][0] == "state-inactive resumed"
    assert resumed[0][1].startswith("Resumed by signal approval now queued")


def test_a_wait_that_times_out_says_so(app: Flask, redis_url: str, prefix: str) -> None:
    with Queue(redis_url, prefix=prefix) as q:
        resumes = started(q, timeout=1)
        wait_for(lambda: q.get_job(resumes).state == "complete")
        assert q.get_job(resumes).result == "timed out"
        html = html_of(app, f"/job/{resumes}")
        assert text(part(html, r'<dd id="resumed">.*?</dd>')).startswith(
            "timed out waiting for approval"
        )
        [entry] = [e for e in timeline(html) if e[0].endswith(" resumed")]
        assert entry[1].startswith("Resumed: timed out waiting for approval now queued")

        fails = started(q, timeout=1, on_timeout="fail", job_type="approve-or-fail")
        wait_for(lambda: q.get_job(fails).state == "failed")
        html = html_of(app, f"/job/{fails}")
        [entry] = [e for e in timeline(html) if e[0].endswith(" resumed")]
        assert entry[0] == "state-failed resumed"
        assert entry[1].startswith("Failed: timed out waiting for approval")


def test_who_may_signal_and_who_sees_signals_and_steps(redis_url: str, prefix: str) -> None:
    app = app_with(redis_url, prefix)
    with Queue(redis_url, prefix=prefix) as q:
        job_id = suspended(q)
        assert q.signal(job_id, "other", {"pin": SECRET}) == "kept"  # still waits for approval
        url = f"/job/{job_id}"
        for who, may_signal, sees in ((VIC, False, False), (OLGA, True, False), (ADA, True, True)):
            html = html_of(app, url, who)
            assert ('id="signal"' in html) is may_signal
            assert ('id="signal-dialog"' in html) is may_signal
            assert "Waiting for signal" in html  # the wait is no payload
            assert (SECRET in html) is sees
            if not sees:
                for name in ("signals", "steps"):
                    shown = f'<pre class="json" id="job-{name}">&#34;[hidden]&#34;</pre>'
                    assert shown in html, name
        readonly = app_with(redis_url, prefix, KUE_READONLY=True)
        html = html_of(readonly, url, ADA)
        assert 'id="signal"' not in html and 'id="signal-dialog"' not in html
