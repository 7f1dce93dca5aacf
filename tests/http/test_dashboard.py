"""The dashboard's pages through the Flask test client, against the suite's real Redis: what
each page shows, pagination, escaping, read-only mode, the CSP, mounting, static files, and
``Queue.page``, which the job lists read through."""

from __future__ import annotations

import json
import re
import time
from html import unescape
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import quote

import pytest
import redis
from flask import Flask
from flask.testing import FlaskClient
from markupsafe import escape

from kue_core import InvalidJob, Queue
from kue_core.base.states import STATES
from kue_core.store import calls
from kue_http import ConfigError, create_app
from kue_http.app import mount
from kue_http.dashboard import LABELS, dashboard
from kue_http.dashboard.filters import short_count
from tests.conftest import finish, server_ms, wait_for

SCRIPT = "<script>alert(1)</script>"
IMG = "<img src=x onerror=alert(1)>"


class _Rows(HTMLParser):
    """The rows of the job and type tables, ``{header: cell text}`` each, keyed by the row's
    ``data-job`` or ``data-type``, in page order."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: dict[str, dict[str, str]] = {}
        self._head: list[str] = []
        self._in_head = False
        self._key: str | None = None
        self._cells: list[str] = []
        self._text: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "thead":
            self._in_head, self._head = True, []
        elif tag == "tr" and ("data-job" in a or "data-type" in a):
            self._key, self._cells = a.get("data-job") or a.get("data-type"), []
        elif tag in ("td", "th"):
            self._text = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._text is not None:
            text, self._text = " ".join("".join(self._text).split()), None
            if self._in_head:
                self._head.append(text)
            elif self._key is not None:
                self._cells.append(text)
        elif tag == "thead":
            self._in_head = False
        elif tag == "tr" and self._key is not None:
            self.rows[self._key] = dict(zip(self._head, self._cells, strict=True))
            self._key = None

    def handle_data(self, data: str) -> None:
        if self._text is not None:
            self._text.append(data)


def rows(html: str) -> dict[str, dict[str, str]]:
    parser = _Rows()
    parser.feed(html)
    return parser.rows


def page(client: FlaskClient, url: str) -> str:
    """The HTML of a page that must answer 200."""
    res = client.get(url)
    assert res.status_code == 200, (url, res.status_code)
    assert res.mimetype == "text/html"
    return res.get_data(as_text=True)


def fail(queue: Queue, job_type: str, error: str) -> int:
    """Claim the next job of ``job_type`` and fail the attempt with ``error`` (retried at once
    when attempts are left); its id."""
    claimed = queue.scripts.call(calls.claim(queue.keys, job_type, "kue:test:1", 10_000))
    assert claimed and claimed != "paused"
    job_id, fields = claimed
    queue.scripts.call(
        calls.fail(queue.keys, job_id, fields["lease"], error.split("\n")[0], error, 0, None)
    )
    return job_id


# -- overview ------------------------------------------------------------------------------
def test_overview_counts_types_pause_and_chart(client: FlaskClient, queue: Queue) -> None:
    """The state cards, the per-type table and the chart's legend show what Redis holds; a
    paused type is marked and offers Resume."""
    for _ in range(5):
        queue.create_job("email").save()
    finish(queue, "email", ok=True)
    finish(queue, "email", ok=True)
    finish(queue, "email", ok=False)
    queue.create_job("sms").save()
    for _ in range(2):
        queue.create_job("sms").delay(60_000).save()
    queue.create_job("video").save()
    assert queue.scripts.call(calls.claim(queue.keys, "video", "kue:test:1", 10_000))  # active
    queue.pause("sms")

    html = page(client, "/")
    expected = {
        "inactive": 3,
        "active": 1,
        "complete": 2,
        "failed": 1,
        "delayed": 2,
        "blocked": 0,
        "pinned": 0,
        "suspended": 0,
    }
    assert queue.counts() == expected
    shown = re.findall(r'data-count="(\w+)"[^>]*>(\d+)<', html)
    # The nav tabs and the cards; a state shown only while it holds jobs is left out.
    assert len(shown) == 2 * (len(STATES) - 1)
    assert {state: int(n) for state, n in shown} == {
        s: n for s, n in expected.items() if s != "suspended"
    }
    assert all(int(n) == expected[state] for state, n in shown)

    types = rows(html)
    assert list(types) == ["email", "sms", "video"]
    for job_type, counts in queue.counts_by_type().items():
        shown_states = [s for s in STATES if s != "suspended"]  # none suspended: no column
        assert "Suspended" not in types[job_type]
        assert {s: int(types[job_type][LABELS[s]]) for s in shown_states} == {
            s: counts[s] for s in shown_states
        }
    assert types["sms"]["Delayed"] == "2" and types["email"]["Complete"] == "2"
    assert types["sms"]["Type"] == "sms paused" and types["sms"]["Pause"] == "Resume"
    assert types["email"]["Type"] == "email" and types["email"]["Pause"] == "Pause"

    legend = re.search(r'<p class="legend">(.*?)</p>', html, re.S)
    assert legend
    text = " ".join(re.sub(r"<[^>]+>", " ", legend.group(1)).split())
    assert "complete 2 " in text and "failed 1 " in text


@pytest.mark.parametrize(("query", "window"), [("", 60), ("?minutes=360", 360), ("?minutes=7", 60)])
def test_overview_chart_window(client: FlaskClient, query: str, window: int) -> None:
    """The chart covers a window offered in the links; any other ``minutes`` means 60."""
    html = page(client, "/" + query)
    assert re.findall(r'href="/\?minutes=(\d+)"\s+aria-current="page"', html) == [str(window)]
    assert f"{window} min ago" in html


def test_pause_buttons_work_for_a_type_with_a_slash(client: FlaskClient, queue: Queue) -> None:
    """The Pause and Resume buttons' URLs reach the API for any valid type ("a/b" is one)."""
    queue.create_job("mail/welcome").save()
    button = re.search(r'data-method="PUT" data-url="([^"]+)"', page(client, "/"))
    assert button
    assert client.put(unescape(button.group(1))).status_code == 200
    assert queue.paused() == ["mail/welcome"]
    button = re.search(r'data-method="DELETE" data-url="([^"]+)"', page(client, "/"))
    assert button
    assert client.delete(unescape(button.group(1))).status_code == 200
    assert queue.paused() == []


# -- job lists -----------------------------------------------------------------------------
def test_list_rows_filter_and_bulk_buttons(client: FlaskClient, queue: Queue) -> None:
    """A failed job's row shows its id, type, title, priority name, attempts and the first
    line of its error; ``?type=`` filters; the failed list offers Retry all and Remove all,
    each asking for confirmation."""
    job = queue.create_job("email", {"title": "Welcome Ann"}).priority("high").save()
    assert finish(queue, "email", ok=False) == job.id
    other = queue.create_job("sms").save()
    finish(queue, "sms", ok=False)

    html = page(client, "/jobs/failed")
    found = rows(html)
    assert list(found) == [str(other.id), str(job.id)]  # newest first (a tie: by id)
    row = found[str(job.id)]
    assert row["Id"] == f"#{job.id}" and row["Type"] == "email"
    assert row["Title"] == "Welcome Ann" and row["Priority"] == "high"
    assert row["Attempts"] == "1/1" and row["Error"] == "boom"  # not "boom\ntrace"
    for label in ("Retry all", "Remove all"):
        button = re.search(rf"<button [^>]*>{label}</button>", html)
        assert button and "data-confirm=" in button.group(0), label

    assert list(rows(page(client, "/jobs/failed?type=sms"))) == [str(other.id)]


def test_active_list_has_no_bulk_actions(client: FlaskClient, queue: Queue) -> None:
    """Running jobs can be neither removed nor retried from the list, only cancelled, one by
    one, after a question that says the running attempt is stopped."""
    job = queue.create_job("t").save()
    queue.scripts.call(calls.claim(queue.keys, "t", "kue:test:1", 10_000))
    html = page(client, "/jobs/active")
    assert list(rows(html)) == [str(job.id)]
    assert 'class="bulk"' not in html
    buttons = re.findall(r"<button [^>]*data-method[^>]*>[^<]*</button>", html)
    assert len(buttons) == 1 and buttons[0].endswith(">Cancel</button>")
    assert f'data-url="/api/job/{job.id}/cancel"' in buttons[0]
    assert "running attempt is stopped" in buttons[0] and " data-reason" in buttons[0]


def test_list_pages_clamp_and_order(client: FlaskClient, queue: Queue) -> None:
    """Pages of ``size`` rows; a page past the end shows the last; ``desc`` reverses the
    order; higher priorities come first."""
    ids = [j.id for j in queue.save_many(queue.create_job("t") for _ in range(60))]

    first = page(client, "/jobs/inactive?size=25")
    assert list(rows(first)) == [str(i) for i in ids[:25]] and "Page 1 of 3" in first
    after = re.search(r'href="([^"]+)" rel="next"', first)
    assert after and list(rows(page(client, unescape(after.group(1))))) == [
        str(i) for i in ids[25:50]
    ]
    last = page(client, "/jobs/inactive?size=25&page=3")
    assert list(rows(last)) == [str(i) for i in ids[50:]] and "Page 3 of 3" in last
    # The same rows (their "Created 0s ago" may have turned into "1s ago" meanwhile).
    assert list(rows(page(client, "/jobs/inactive?size=25&page=999"))) == list(rows(last))
    desc = list(rows(page(client, "/jobs/inactive?size=25&order=desc")))
    assert desc == [str(i) for i in ids[::-1][:25]]

    assert ">Priority, then oldest first</option>" in first
    assert ">Lowest priority, newest first</option>" in first
    queue.create_job("t").delay(60_000).save()
    delayed = page(client, "/jobs/delayed")  # by due time, and says so
    assert ">Soonest due first</option>" in delayed and ">Latest due first</option>" in delayed
    box = re.search(r'<select name="order".*?</select>', delayed, re.S)
    assert box and "Priority" not in box.group(0)

    urgent = queue.create_job("t").priority("critical").save()
    low = queue.create_job("t").priority("low").save()
    ordered = list(rows(page(client, "/jobs/inactive?size=100")))
    assert ordered[0] == str(urgent.id) and ordered[-1] == str(low.id)


def test_a_types_delayed_list_is_soonest_due_first(client: FlaskClient, queue: Queue) -> None:
    """On the page and through Kue's API route, as the all-types list (not by priority)."""
    late = queue.create_job("t").priority("critical").delay(90_000).save()
    soon = queue.create_job("t").priority("low").delay(5_000).save()
    mid = queue.create_job("t").delay(30_000).save()
    order = [str(soon.id), str(mid.id), str(late.id)]
    assert list(rows(page(client, "/jobs/delayed?type=t"))) == order
    assert list(rows(page(client, "/jobs/delayed?type=t&order=desc"))) == order[::-1]
    assert list(rows(page(client, "/jobs/delayed"))) == order
    window = client.get("/api/jobs/t/delayed/0..1").json  # by due time, then by id (Kue)
    assert [j["id"] for j in window] == sorted([soon.id, mid.id])  # type: ignore[union-attr]


def test_finished_lists_are_newest_first_and_say_so(client: FlaskClient, queue: Queue) -> None:
    """Complete and failed jobs are listed by when they finished, newest first, unless the
    order box says otherwise; an unknown order is the default."""
    low = queue.create_job("t").priority("low").save()
    high = queue.create_job("t").priority("high").save()
    assert finish(queue, "t", ok=True) == high.id
    first = queue.client.zscore(queue.keys.finished("complete"), f"01|{high.id}")
    wait_for(lambda: server_ms(queue.client) > first)  # a later finish time, not a tie
    assert finish(queue, "t", ok=True) == low.id
    html = page(client, "/jobs/complete")
    assert list(rows(html)) == [str(low.id), str(high.id)]  # the last to finish first
    done = queue.get_job(low.id)
    shown = re.search(rf'data-job="{low.id}".*?<time datetime="[^"]+" data-ms="(\d+)"', html, re.S)
    assert shown and int(shown.group(1)) == done.started_at + done.duration  # type: ignore[operator]
    assert ">Completed</th>" in html
    box = re.search(r'<select name="order".*?</select>', html, re.S)
    assert box and re.findall(r">([^<]+)</option>", box.group(0)) == [
        "Newest first",
        "Oldest first",
        "Priority, then oldest first",
        "Lowest priority, newest first",
    ]
    assert '<option value="newest" selected>' in box.group(0)
    assert list(rows(page(client, "/jobs/complete?order=oldest"))) == [str(high.id), str(low.id)]
    assert list(rows(page(client, "/jobs/complete?order=asc"))) == [str(high.id), str(low.id)]
    assert list(rows(page(client, "/jobs/complete?order=bogus"))) == [str(low.id), str(high.id)]
    assert list(rows(page(client, "/jobs/complete?type=t&order=newest&size=25"))) == [
        str(low.id),
        str(high.id),
    ]
    assert list(rows(page(client, "/jobs/inactive?order=newest"))) == []  # not offered: asc


@pytest.mark.parametrize(
    ("url", "status"),
    [
        ("/jobs/nope", 404),
        ("/jobs/failed?type=a%01b", 400),
        ("/jobs/failed?type=" + "x" * 300, 400),
    ],
)
def test_list_errors_are_html_pages(client: FlaskClient, url: str, status: int) -> None:
    """An unknown state or a bad type is answered with the dashboard's error page."""
    res = client.get(url)
    assert res.status_code == status and res.mimetype == "text/html"
    assert f"<h1>{status}</h1>" in res.get_data(as_text=True)


# -- job detail ----------------------------------------------------------------------------
def test_detail_of_a_job_that_failed_twice(client: FlaskClient, queue: Queue) -> None:
    """Data pretty-printed, the last error in full, each attempt's error, the log, the
    timeline and the priority form."""
    data = {"title": "Report", "rows": [1, 2]}
    job = queue.create_job("report", data).attempts(2).priority("high").save()
    job.log("fetched %s rows", 2)
    fail(queue, "report", "first failure\ntrace one")
    fail(queue, "report", "second failure\ntrace two")

    html = page(client, f"/job/{job.id}")
    assert str(escape(json.dumps(data, indent=2))) in html
    assert '<pre class="error-text">second failure\ntrace two</pre>' in html
    assert '<pre class="error-text">first failure\ntrace one</pre>' in html
    assert re.findall(
        r'<li><time class="at".*?</time> <span class="text">(.*?)</span></li>', html, re.S
    ) == ["fetched 2 rows"]
    timeline = re.findall(r'<li class="state-(\w+)">', html)
    assert timeline == [h["state"] for h in queue.history(job.id)]
    assert timeline == ["inactive", "active", "inactive", "active", "failed"]
    assert re.search(r'<option value="high"\s+selected>', html)


def test_detail_shows_the_result(client: FlaskClient, queue: Queue) -> None:
    """A completed job's result is shown, pretty-printed."""
    queue.create_job("t").save()
    jid = finish(queue, "t", ok=True)
    html = page(client, f"/job/{jid}")
    shown = str(escape(json.dumps({"ok": True}, indent=2)))
    assert '<pre class="json result" id="job-result">' + shown in html


def test_detail_shows_the_unique_key_escaped(client: FlaskClient, queue: Queue) -> None:
    """A job's unique key and mode are among its facts, the key as text; none without one."""
    key = f"<b>bold</b>{IMG}"
    job = queue.create_job("t").unique(key, "debounce").delay(60_000).save()
    html = page(client, f"/job/{job.id}")
    assert "<b>bold</b>" not in html and IMG not in html
    assert f'<span class="mono">{escape(key)}</span>' in html and ">debounce</span>" in html
    plain = queue.create_job("t").save()
    assert 'id="unique"' not in page(client, f"/job/{plain.id}")


@pytest.mark.parametrize("url", ["/job/999999", "/job/abc", "/job/0", "/job/1e3"])
def test_detail_of_no_job_is_404(client: FlaskClient, url: str) -> None:
    """An unknown or malformed id is the 404 page, not a 400 or a 500."""
    res = client.get(url)
    assert res.status_code == 404 and res.mimetype == "text/html"
    assert "<h1>404</h1>" in res.get_data(as_text=True)


# -- job control ---------------------------------------------------------------------------
def _buttons(html: str) -> dict[str, str]:
    """The action buttons of a page, each whole tag by its id."""
    tags = re.findall(r"<button [^>]*>[^<]*</button>", html)
    return {m.group(1): tag for tag in tags if (m := re.search(r'\bid="([^"]+)"', tag))}


def test_cancel_and_edit_are_offered_where_the_state_allows(
    client: FlaskClient, queue: Queue
) -> None:
    """Cancel (with a question that asks for a reason) on queued, delayed and running jobs;
    a link to the data editor on queued, delayed and failed ones; neither on complete jobs."""
    waiting = queue.create_job("t").save()
    delayed = queue.create_job("t").delay(60_000).save()
    queue.create_job("r").save()
    running = finish(queue, "r", ok=False)  # a failed one, then a running one
    queue.create_job("r").save()
    claimed = queue.scripts.call(calls.claim(queue.keys, "r", "kue:test:1", 10_000))
    assert claimed and claimed != "paused"
    active = claimed[0]
    queue.create_job("c").save()
    done = finish(queue, "c", ok=True)
    failed = running

    for state, jid, cancel, edit in [
        ("inactive", waiting.id, True, True),
        ("delayed", delayed.id, True, True),
        ("active", active, True, False),
        ("failed", failed, False, True),
        ("complete", done, False, False),
    ]:
        html = page(client, f"/jobs/{state}")
        buttons = _buttons(html)
        assert (f"cancel-{jid}" in buttons) is cancel, state
        assert (f'href="/job/{jid}#edit"' in html) is edit, state
        if cancel:
            tag = buttons[f"cancel-{jid}"]
            assert f'data-url="/api/job/{jid}/cancel"' in tag and " data-reason" in tag
            assert 'data-method="POST"' in tag and "data-confirm=" in tag
            assert ("running attempt is stopped" in tag) is (state == "active")
            assert 'title="Stop it for good: it fails without retry' in tag
            assert "danger" not in tag  # the job stays; Remove, in red, deletes it
            remove = buttons.get(f"remove-{jid}")
            assert remove is None or ('title="Delete the job' in remove and "danger" in remove)
        detail = page(client, f"/job/{jid}")
        assert (f"cancel-{jid}" in _buttons(detail)) is cancel, state
        assert ('id="edit-data"' in detail) is edit, state
        assert f'class="edit-data" id="editor" data-url="/api/job/{jid}/data"' in detail
        move = re.search(r'<form class="move"[^>]*>', detail)
        assert move and f'data-url="/api/job/{jid}/type/"' in move.group(0)
        assert ("data-running" in move.group(0)) is (state == "active"), state


def test_move_suggests_the_other_known_types(client: FlaskClient, queue: Queue) -> None:
    job = queue.create_job("email").save()
    queue.create_job(f"sms{SCRIPT}").save()
    html = page(client, f"/job/{job.id}")
    known = re.search(r'<datalist id="known-types">(.*?)</datalist>', html, re.S)
    assert known
    values = re.findall(r'<option value="([^"]*)">', known.group(1))
    assert values == [str(escape(f"sms{SCRIPT}"))]  # not its own type; escaped
    assert 'list="known-types"' in html


def test_the_editor_starts_from_the_data_the_page_shows(client: FlaskClient, queue: Queue) -> None:
    """The editor copies the page's pretty-printed data, which must be JSON as it stands
    (non-ASCII kept); the page has the retry URL for "Save and retry"."""
    data = {"to": "Zoë", "n": [1, 2], "html": IMG}
    job = queue.create_job("t", data).save()
    html = page(client, f"/job/{job.id}")
    shown = re.search(r'<pre class="json" id="job-data">(.*?)</pre>', html, re.S)
    assert shown and json.loads(unescape(shown.group(1))) == data
    assert f'data-retry-url="/api/job/{job.id}/retry"' in html
    assert re.search(r'<textarea id="edit-text"[^>]*></textarea>', html)  # filled by the script


def test_a_cancelled_job_shows_its_reason_and_its_history(
    client: FlaskClient, queue: Queue
) -> None:
    """The reason stands out on the job's page (in full) and in the lists (its first line),
    escaped; the timeline shows the move, the edit and the cancel as such."""
    job = queue.create_job("old", {"n": 1}).save()
    queue.move(job.id, "new")
    queue.update_data(job.id, {"n": 2})
    reason = f"wrong input {SCRIPT}\nsee the ticket"
    queue.cancel(job.id, reason)

    html = page(client, f"/job/{job.id}")
    notice = re.search(r'<p class="notice cancelled" id="cancelled">(.*?)</p>', html, re.S)
    assert notice and str(escape(reason)) in notice.group(1) and SCRIPT not in html
    items = re.findall(r'<li class="state-(\w+)( \w+)?">(.*?)</li>', html, re.S)
    timeline = [
        (state, kind.strip(), " ".join(re.sub(r"<[^>]+>", " ", body).split()))
        for state, kind, body in items
    ]
    assert [t[:2] for t in timeline] == [
        ("inactive", ""),
        ("inactive", "moved"),
        ("inactive", "edited"),
        ("failed", "cancelled"),
    ]
    assert timeline[1][2].startswith("Moved from old to new")
    assert timeline[2][2].startswith("Data edited while queued")
    assert timeline[3][2].startswith("Cancelled from Queued")
    assert unescape(timeline[3][2]).endswith(f"Reason: wrong input {SCRIPT} see the ticket")

    for url in ("/jobs/failed", "/search?q=new"):
        row = rows(page(client, url))[str(job.id)]
        assert row["Error"] == f"cancelled wrong input {SCRIPT}", url

    other = queue.create_job("t").save()
    queue.cancel(other.id)  # no reason
    assert rows(page(client, "/jobs/failed"))[str(other.id)]["Error"] == "cancelled"
    assert "No reason given." in page(client, f"/job/{other.id}")
    failed = queue.create_job("t").save()
    fail(queue, "t", "cancelled by the remote side")  # a handler's error: not a cancel
    assert "notice cancelled" not in page(client, f"/job/{failed.id}")


def test_workers_table_offers_stop_and_shows_local_pauses(
    client: FlaskClient, queue: Queue
) -> None:
    """Each worker row has Stop (confirmed), whose URL reaches the API, and lists the types
    paused in that process only."""
    queue.process("mail", lambda job: None)
    queue.process("sms", lambda job: None)
    queue.pause("sms", local=True)
    worker = wait_for(lambda: [w for w in queue.workers() if w["paused"] == ["sms"]])[0]
    try:
        html = page(client, "/")
        row = re.search(rf'<tr data-worker="{re.escape(worker["id"])}">(.*?)</tr>', html, re.S)
        assert row
        assert "sms paused here" in row.group(1) and "mail paused here" not in row.group(1)
        stop = re.search(r"<button [^>]*>Stop</button>", row.group(1))
        assert stop and 'data-method="POST"' in stop.group(0) and "data-confirm=" in stop.group(0)
        assert "10 s to finish" in stop.group(0)
        url = re.search(r'data-url="([^"]+)"', stop.group(0))
        assert url and unescape(url.group(1)) == f"/api/workers/{worker['id']}/stop"
        assert client.post(unescape(url.group(1)), json={}).status_code == 200
        wait_for(lambda: queue.workers() == [])  # in this process: its workers shut down
        assert "No worker is running" in page(client, "/")
    finally:
        queue.shutdown(5)


def test_a_list_of_one_type_hears_of_a_job_moved_out_of_it(
    client: FlaskClient, queue: Queue
) -> None:
    """The stream of a type's list passes ``moved`` events naming that type as the old one
    (the event's own type is the new one), so the job leaves the list live."""
    job = queue.create_job("email").save()
    res = client.get("/api/events?type=email", buffered=False)
    chunks = iter(res.response)
    queue.create_job("sms").save()  # filtered out
    queue.move(job.id, "sms")
    deadline = time.monotonic() + 5
    events: list[dict[str, object]] = []
    while not events:
        assert time.monotonic() < deadline, "no event came"
        text = next(chunks).decode()  # a keep-alive at least every 0.2 s
        events += [json.loads(line[5:]) for line in text.splitlines() if line.startswith("data:")]
    assert events[0] == {
        "id": job.id,
        "event": "moved",
        "args": ["moved", "email"],
        "type": "sms",
    }
    res.close()


# -- search --------------------------------------------------------------------------------
def test_search(client: FlaskClient, queue: Queue) -> None:
    """An existing id (with or without ``#``) opens the job; text lists the jobs whose type
    contains it; an unknown id is an empty result; no text shows the hint."""
    welcome = queue.create_job("email-welcome").save()
    reset = queue.create_job("email-reset").save()
    queue.create_job("sms").save()
    for q in (str(welcome.id), f"%23{welcome.id}"):
        res = client.get(f"/search?q={q}")
        assert res.status_code == 302 and res.headers["Location"].endswith(f"/job/{welcome.id}")

    assert list(rows(page(client, "/search?q=EMAIL"))) == [str(reset.id), str(welcome.id)]
    assert "No job matches." in page(client, "/search?q=999999")
    assert "Type a job id or words" in page(client, "/search?q=")


# -- escaping ------------------------------------------------------------------------------
def test_job_content_is_escaped_on_every_page(client: FlaskClient, queue: Queue) -> None:
    """Markup in a job's type, title, data, error and log is shown as text everywhere."""
    job_type = f"x{SCRIPT}{IMG}"
    job = queue.create_job(job_type, {"title": SCRIPT + IMG, "html": IMG}).save()
    job.log(SCRIPT + IMG)
    fail(queue, job_type, f"{SCRIPT}{IMG}\n{SCRIPT}")
    queue.pause(job_type)

    listed = ["/", "/jobs/failed", f"/jobs/failed?type={quote(job_type)}"]
    listed.append(f"/search?q={quote(SCRIPT)}")
    for url in [*listed, f"/job/{job.id}"]:
        html = page(client, url)
        assert SCRIPT not in html and IMG not in html, url
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html, url
        assert "&lt;img src=x onerror=alert(1)&gt;" in html, url
        if url in listed:
            key = job_type if url == "/" else str(job.id)
            assert rows(html)[key]["Type"].startswith(job_type), url  # the text, unchanged


# -- read-only mode ------------------------------------------------------------------------
def test_read_only_pages_offer_no_actions(
    client: FlaskClient, queue: Queue, redis_url: str, prefix: str
) -> None:
    """Read-only: no action buttons (Stop on a worker included), no priority or move form, no
    data editor nor link to it, and the badge; the same pages of a writable app do have
    actions."""
    queue.create_job("email").save()
    jid = finish(queue, "email", ok=False)
    queue.process("sms", lambda job: None)  # a worker process, with its row on the overview
    wait_for(queue.workers)
    readonly = create_app({"KUE_REDIS_URL": redis_url, "KUE_PREFIX": prefix, "KUE_READONLY": True})
    urls = ["/", "/jobs/failed", f"/job/{jid}", "/search?q=email"]
    forms = ('class="priority"', 'class="move"', 'class="edit-data"', "data-edit", '#edit"')
    try:
        with readonly.test_client() as ro:
            for url in urls:
                html = page(ro, url)
                assert "data-method" not in html, url
                assert not [f for f in forms if f in html], url
                assert 'class="badge readonly"' in html, url
        for url in urls:
            html = page(client, url)
            assert "data-method" in html and 'class="badge readonly"' not in html, url
        assert "Stop</button>" in page(client, "/")
        html = page(client, f"/job/{jid}")
        assert [f for f in forms if f in html] == list(forms[:4])
        assert '#edit"' in page(client, "/jobs/failed")
    finally:
        queue.shutdown(5)


# -- security headers ----------------------------------------------------------------------
def test_pages_obey_their_content_security_policy(client: FlaskClient, queue: Queue) -> None:
    """Every page carries the CSP, and none needs what it forbids: no inline script, style
    or event handler."""
    queue.create_job("email", {"title": "hi"}).save()
    jid = finish(queue, "email", ok=False)
    for url in ["/", "/jobs/failed", f"/job/{jid}", "/search?q=email", "/jobs/nope"]:
        res = client.get(url)
        assert res.status_code in (200, 404) and res.mimetype == "text/html"
        assert "default-src 'self'" in res.headers["Content-Security-Policy"], url
        html = res.get_data(as_text=True)
        scripts = re.findall(r"<script\b([^>]*)>(.*?)</script>", html, re.S)
        assert scripts and all("src=" in attrs and not body.strip() for attrs, body in scripts)
        assert not re.search(r"\sstyle\s*=|<style\b|\son[a-z]+\s*=", html, re.I), url


# -- mounting ------------------------------------------------------------------------------
def test_mounted_under_a_path(redis_url: str, prefix: str) -> None:
    """Under ``/kue`` in another app: the host keeps its routes, and every URL the
    dashboard makes starts with the mount path."""
    host = Flask(__name__)
    host.add_url_rule("/", "home", lambda: "host home")
    mount(host, "/kue", {"KUE_REDIS_URL": redis_url, "KUE_PREFIX": prefix})
    with host.test_client() as c:
        assert c.get("/").get_data(as_text=True) == "host home"
        html = page(c, "/kue/")
        urls = re.findall(r'\s(?:href|src|action|data-url|data-events)="([^"]*)"', html)
        assert len(urls) > 10
        assert [u for u in urls if not u.startswith("/kue/") and u != "#main"] == []
        assert 'data-events="/kue/api/events"' in html
        res = c.get("/kue/api/stats")
        assert res.status_code == 200 and res.is_json
        assert c.get("/kue/static/kue.js").status_code == 200
    for bad in ("kue", "/kue/"):
        with pytest.raises(ConfigError):
            mount(host, bad)


# -- static files --------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("name", "mimetypes"),
    [
        ("kue.js", {"text/javascript", "application/javascript"}),
        ("job.js", {"text/javascript", "application/javascript"}),
        ("kue.css", {"text/css"}),
        ("favicon.svg", {"image/svg+xml"}),
    ],
)
def test_static_files(client: FlaskClient, name: str, mimetypes: set[str]) -> None:
    """The scripts, style sheet and icon are served whole, with their types."""
    res = client.get(f"/static/{name}")
    assert res.status_code == 200 and res.mimetype in mimetypes
    assert res.data == (Path(str(dashboard.static_folder)) / name).read_bytes()
    res.close()


def test_the_job_page_alone_loads_its_own_script(client: FlaskClient, queue: Queue) -> None:
    """static/job.js (the editor, reveal, signal dialog and stream) after static/kue.js, on
    the job page only."""
    job = queue.create_job("t").save()
    html = page(client, f"/job/{job.id}")
    scripts = re.findall(r'<script src="([^"]+)" defer>', html)
    assert [s.split("?")[0] for s in scripts] == ["/static/kue.js", "/static/job.js"]
    assert "job.js" not in page(client, "/") and "job.js" not in page(client, "/jobs/inactive")


# -- Queue.page ----------------------------------------------------------------------------
def _save_with_id(queue: Queue, r: redis.Redis, job_id: int, priority: str = "normal") -> int:
    r.set(queue.keys.ids, job_id - 1)
    assert queue.create_job("t").priority(priority).save().id == job_id
    return job_id


def test_queue_page(queue: Queue, r: redis.Redis) -> None:
    """Priority, then first in first out (across id lengths); an offset/count window;
    ``desc`` reverses the whole order, not just the window."""
    for jid in (9, 10, 100):
        _save_with_id(queue, r, jid)
    _save_with_id(queue, r, 200, "low")
    _save_with_id(queue, r, 300, "critical")
    _save_with_id(queue, r, 400, "high")
    order = [300, 400, 9, 10, 100, 200]

    def ids(**kwargs: object) -> list[int | None]:
        return [j.id for j in queue.page("inactive", **kwargs)]  # type: ignore[arg-type]

    assert ids() == order
    assert [j.id for j in queue.page("inactive", "t", offset=0, count=100)] == order
    assert ids(offset=2, count=3) == order[2:5]
    assert ids(desc=True) == order[::-1]
    assert ids(offset=1, count=2, desc=True) == order[::-1][1:3]
    assert ids(count=0) == [] and ids(offset=6) == []
    assert queue.page("inactive", "other") == [] and queue.page("failed") == []


@pytest.mark.parametrize(
    "bad", [{"offset": -1}, {"count": -1}, {"offset": True}, {"count": "5"}, {"offset": 1.5}]
)
def test_queue_page_refuses_bad_windows(queue: Queue, bad: dict[str, object]) -> None:
    """A negative or non-integer offset or count is ``InvalidJob``, not a Redis error."""
    with pytest.raises(InvalidJob):
        queue.page("inactive", **bad)  # type: ignore[arg-type]


def test_workers_table_shows_the_pinned_jobs_waiting_for_each_worker(
    client: FlaskClient, redis_url: str, prefix: str
) -> None:
    """Each live worker's row lists the jobs pinned to it that wait; jobs pinned to workers
    not running are listed under the table; the job page names its workers (escaped)."""
    with Queue(redis_url, prefix, worker_id="gpu-1") as gpu:
        gpu.process("render", lambda job: None)
        gpu.pause("render", local=True)  # it holds its pinned jobs back
        wait_for(lambda: [w for w in gpu.workers() if w["paused"] == ["render"]])
        mine = gpu.create_job("render").only(["gpu-1"]).save()
        other = gpu.create_job("render").only(["gpu-9", "gpu-1"]).save()
        lonely = gpu.create_job("render").only(["gpu-9"]).save()
        html = page(client, "/")
        row = re.search(r'<tr data-worker="gpu-1">(.*?)</tr>', html, re.S)
        assert row
        cell = re.search(r"<td [^>]*data-pinned>(.*?)</td>", row.group(1), re.S)
        assert cell and re.findall(r"#(\d+)", cell.group(1)) == [str(mine.id), str(other.id)]
        elsewhere = re.search(r"<p data-pinned-elsewhere>(.*?)</p>", html, re.S)
        assert elsewhere and "gpu-9" in elsewhere.group(1)
        assert re.findall(r"#(\d+)", elsewhere.group(1)) == [str(other.id), str(lonely.id)]
        job_page = page(client, f"/job/{other.id}")
        assert re.search(r'id="only">.*gpu-9.*gpu-1', job_page, re.S)
        gpu.resume("render", local=True)
        wait_for(lambda: gpu.counts("render")["complete"] == 2)
        html = page(client, "/")
        assert "data-pinned-elsewhere" in html and f"#{mine.id}</a>" not in html


@pytest.mark.parametrize(
    "bad",
    [
        "https://traces.example/t/",  # no {trace_id}
        "https://traces.example/{trace_id}/{trace_id}",
        "javascript:alert(1)//{trace_id}",
        "/relative/{trace_id}",
        'https://x/{trace_id}" onmouseover="x',
    ],
)
def test_a_trace_url_that_is_not_an_http_url_with_the_id_is_refused(bad: str) -> None:
    with pytest.raises(ConfigError, match="KUE_TRACE_URL"):
        create_app({"KUE_TRACE_URL": bad})


@pytest.mark.parametrize(
    ("n", "text"),
    [
        (0, "0"),
        (999, "999"),
        (1000, "1.0k"),
        (1234, "1.2k"),
        (9949, "9.9k"),
        (9950, "10k"),
        (45_678, "46k"),
        (999_499, "999k"),
        (999_999, "1.0M"),
        (3_100_000, "3.1M"),
        (1_234_567_890, "1.2G"),
    ],
)
def test_counts_in_the_navigation_take_four_characters_at_most(n: int, text: str) -> None:
    assert short_count(n) == text and len(text) <= 4
