"""The dashboard's schedules page, as served HTML: each schedule's rule in words, time zone,
next runs, last job and state, with the buttons of its state; the empty page; read-only mode
offers no buttons; markup in keys and types shown as text."""

from __future__ import annotations

from html.parser import HTMLParser

import pytest
from flask import Flask, url_for
from flask.testing import FlaskClient

from kue_core import Queue
from kue_http import create_app
from kue_http.dashboard.schedules import ENDPOINTS, cron_words, interval_text, schedule_url
from tests.http.test_dashboard import page

MARKUP = "<b>x<b>"  # a key has no '/'
TYPE = "<script>alert(1)</script>"


class _Schedules(HTMLParser):
    """The rows of the schedules table, ``{header: cell text}`` each, keyed by the row's
    ``data-schedule``, in page order; and each row's times and links."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: dict[str, dict[str, str]] = {}
        self.times: dict[str, list[str]] = {}
        self.links: dict[str, list[str]] = {}
        self._head: list[str] = []
        self._in_head = False
        self._key: str | None = None
        self._cells: list[str] = []
        self._text: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "thead":
            self._in_head, self._head = True, []
        elif tag == "tr" and "data-schedule" in a:
            self._key, self._cells = a["data-schedule"], []
            self.times[self._key], self.links[self._key] = [], []
        elif tag in ("td", "th"):
            self._text = []
        elif tag == "time" and self._key is not None:
            self.times[self._key].append(a["datetime"] or "")
        elif tag == "a" and self._key is not None:
            self.links[self._key].append(a["href"] or "")

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


def schedules(html: str) -> _Schedules:
    parser = _Schedules()
    parser.feed(html)
    return parser


def test_the_page_lists_each_schedule(client: FlaskClient, queue: Queue) -> None:
    queue.every("beat", 5000, "ping")
    queue.every("fast", 200, "ping")
    queue.cron("office", "0 9 * * 1-5", "report", tz="Europe/Paris")
    queue.cron("nightly", "@daily", "cleanup")
    job = queue.trigger("office")
    html = page(client, "/schedules")
    found = schedules(html)
    assert list(found.rows) == ["beat", "fast", "nightly", "office"]  # by key
    beat, office = found.rows["beat"], found.rows["office"]
    assert beat["Rule"] == "every 5 s" and beat["Time zone"] == "—"
    assert found.rows["fast"]["Rule"] == "every 200 ms"
    assert office["Rule"] == "cron 0 9 * * 1-5 weekdays at 09:00"
    assert office["Time zone"] == "Europe/Paris" and office["Job type"] == "report"
    assert found.rows["nightly"]["Rule"] == "cron 0 0 * * * daily at 00:00"
    assert found.rows["nightly"]["Time zone"] == "UTC"
    assert len(found.times["beat"]) == 3 and found.times["beat"] == sorted(found.times["beat"])
    assert len(found.times["office"]) == 3
    assert office["Last job"] == f"#{job.id} Queued"
    assert f"/job/{job.id}" in found.links["office"]
    assert office["Runs"] == "0 +1 by hand" and beat["Runs"] == "0"
    assert beat["Last job"] == "none yet"
    assert beat["State"] == office["State"] == "active"
    assert 'data-url="/api/schedules/beat/pause"' in html
    assert 'data-url="/api/schedules/beat/trigger"' in html
    assert 'data-method="DELETE" data-url="/api/schedules/beat"' in html
    assert 'data-confirm="Remove schedule beat?' in html
    assert 'id="schedules-link"' in html and "<title>Schedules · kue</title>" in html


def test_deduplicated_ticks_are_shown(client: FlaskClient, queue: Queue) -> None:
    queue.every("u", 3_600_000, "ping", unique="one")
    queue.trigger("u")
    queue.trigger("u")
    assert (
        schedules(page(client, "/schedules")).rows["u"]["Runs"] == "0 +2 by hand (1 deduplicated)"
    )


def test_a_paused_schedule_offers_resume(client: FlaskClient, queue: Queue) -> None:
    queue.every("beat", 60_000, "ping")
    queue.pause_schedule("beat")
    html = page(client, "/schedules")
    row = schedules(html).rows["beat"]
    assert row["State"] == "paused"
    assert 'data-url="/api/schedules/beat/resume"' in html and "/beat/pause" not in html
    queue.resume_schedule("beat")
    html = page(client, "/schedules")
    assert schedules(html).rows["beat"]["State"] == "active" and "/beat/pause" in html


def test_an_ended_schedule_has_no_next_runs(client: FlaskClient, queue: Queue) -> None:
    queue.every("once", 60_000, "ping", end=1)  # over before it began
    html = page(client, "/schedules")
    found = schedules(html)
    assert found.rows["once"]["State"] == "ended" and found.rows["once"]["Next runs"] == "none"
    assert found.times["once"] == []
    assert "/once/pause" not in html and "/once/resume" not in html and "/once/trigger" in html


def test_no_schedules(client: FlaskClient) -> None:
    html = page(client, "/schedules")
    assert "No schedules." in html and 'id="schedule-list"' not in html


def test_markup_is_shown_as_text(client: FlaskClient, queue: Queue) -> None:
    queue.every(MARKUP, 1000, TYPE)
    html = page(client, "/schedules")
    assert MARKUP not in html and TYPE not in html
    assert "&lt;b&gt;x&lt;b&gt;" in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    row = schedules(html).rows[MARKUP]  # the parser unescapes
    assert row["Key"] == MARKUP and row["Job type"] == TYPE
    assert "/api/schedules/%3Cb%3Ex%3Cb%3E/pause" in html


def test_keys_are_quoted_in_the_urls(client: FlaskClient, queue: Queue) -> None:
    queue.every("a?b#c%d", 1000, "ping")
    html = page(client, "/schedules")
    assert 'data-url="/api/schedules/a%3Fb%23c%25d/trigger"' in html


@pytest.mark.parametrize("action", sorted(ENDPOINTS))
def test_urls_without_the_api_routes(
    app: Flask, monkeypatch: pytest.MonkeyPatch, action: str
) -> None:
    """Built from the API prefix while an endpoint is missing, the same URL as its route's."""
    with app.test_request_context("/schedules"):
        routed = url_for(ENDPOINTS[action], key="a?b#c")
        monkeypatch.setitem(ENDPOINTS, action, "kue_api.missing")
        assert schedule_url(action, "a?b#c") == routed


def test_read_only_offers_no_buttons(redis_url: str, prefix: str, queue: Queue) -> None:
    app: Flask = create_app(
        {"KUE_REDIS_URL": redis_url, "KUE_PREFIX": prefix, "KUE_READONLY": "true"}
    )
    queue.every("beat", 5000, "ping")
    html = page(app.test_client(), "/schedules")
    assert "beat" in html and "data-url=" not in html


@pytest.mark.parametrize(
    ("ms", "text"),
    [
        (5000, "every 5 s"),
        (200, "every 200 ms"),
        (1500, "every 1500 ms"),
        (1000, "every second"),
        (90_000, "every 90 s"),
        (300_000, "every 5 min"),
        (3_600_000, "every hour"),
        (172_800_000, "every 2 d"),
    ],
)
def test_intervals_in_words(ms: int, text: str) -> None:
    assert interval_text(ms) == text


@pytest.mark.parametrize(
    ("expression", "text"),
    [
        ("* * * * *", "every minute"),
        ("*/15 * * * *", "every 15 minutes"),
        ("0 * * * *", "every hour"),
        ("30 * * * *", "every hour at :30"),
        ("0 0 * * *", "daily at 00:00"),
        ("0 9 * * 1-5", "weekdays at 09:00"),
        ("0 10 * * 0,6", "weekends at 10:00"),
        ("0 0 * * 0", "Sundays at 00:00"),
        ("15 8 * * 1", "Mondays at 08:15"),
        ("0 0 1 * *", "monthly on day 1 at 00:00"),
        ("0 0 1 1 *", "yearly on Jan 1 at 00:00"),
        ("0 9-17 * * *", None),
        ("0 0 1 * 1", None),
        ("5,10 * * * *", None),
    ],
)
def test_cron_in_words(expression: str, text: str | None) -> None:
    assert cron_words(expression) == text
