"""The dashboard's limits and groups pages, as served HTML: each type's limits in words, whether
it is held back now (paused, by a remote hold, its concurrency or its rate) and for how long,
its active and waiting jobs, the edit form filled with its limits and the remove button;
read-only mode offers neither; the groups of a type in turn order, paginated; markup in types
and groups shown as text; reading the pages writes nothing."""

from __future__ import annotations

import json
from html.parser import HTMLParser

import pytest
import redis
from flask import Flask, url_for
from flask.testing import FlaskClient

from kue_core import Queue
from kue_core.store import calls
from kue_http import create_app
from kue_http.dashboard.limits import ENDPOINT, limit_url, rate_text, wait_text
from tests.conftest import snapshot, written_since
from tests.http.test_dashboard import page

TYPE = "<img src=x onerror=alert(1)>"  # no '/': a path segment of the API
GROUP = "<script>alert('g')</script>"


class _Table(HTMLParser):
    """The rows of the page's table, ``{header: cell text}`` each, keyed by the row's ``key``
    attribute, in page order; and each row's form fields (name -> value) and links."""

    def __init__(self, key: str) -> None:
        super().__init__()
        self.key = key
        self.rows: dict[str, dict[str, str]] = {}
        self.fields: dict[str, dict[str, str]] = {}
        self.links: dict[str, list[str]] = {}
        self.forms: dict[str, str] = {}
        self._head: list[str] = []
        self._in_head = False
        self._row: str | None = None
        self._cells: list[str] = []
        self._text: list[str] | None = None
        self._select: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "thead":
            self._in_head, self._head = True, []
        elif tag == "tr" and self.key in a:
            self._row, self._cells = a[self.key] or "", []
            self.fields[self._row], self.links[self._row] = {}, []
        elif tag in ("td", "th"):
            self._text = []
        elif self._row is None:
            return
        elif tag == "a":
            self.links[self._row].append(a["href"] or "")
        elif tag == "form":
            self.forms[self._row] = a.get("data-url") or ""
        elif tag == "input":
            self.fields[self._row][a["name"] or ""] = a.get("value") or ""
        elif tag == "select":
            self._select = a["name"]
        elif tag == "option" and "selected" in a and self._select:
            self.fields[self._row][self._select] = a["value"] or ""

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._text is not None:
            text, self._text = " ".join("".join(self._text).split()), None
            if self._in_head:
                self._head.append(text)
            elif self._row is not None:
                self._cells.append(text)
        elif tag == "thead":
            self._in_head = False
        elif tag == "tr" and self._row is not None:
            self.rows[self._row] = dict(zip(self._head, self._cells, strict=False))
            self._row = None

    def handle_data(self, data: str) -> None:
        if self._text is not None:
            self._text.append(data)


def table(html: str, key: str = "data-type") -> _Table:
    parser = _Table(key)
    parser.feed(html)
    return parser


def cells(html: str, job_type: str) -> dict[str, str]:
    """The display cells of a type's row (before its Actions cell)."""
    row = table(html).rows[job_type]
    return {k: v for k, v in row.items() if k != "Actions"}


def test_the_page_lists_each_type_with_its_limits(client: FlaskClient, queue: Queue) -> None:
    queue.create_job("email").save()
    queue.create_job("plain").save()
    queue.limit("email", rate=(10, 1000), concurrency=3)
    queue.limit("sms", group_rate=(5, 120_000), group_concurrency=2)  # no job yet
    queue.limit("video", rate=(500, 200))
    html = page(client, "/limits")
    found = table(html)
    assert list(found.rows) == ["email", "plain", "sms", "video"]  # by type
    email = cells(html, "email")
    assert email["Job type"] == "email"
    assert email["Rate"] == "10 per 1 s (0 started)" and email["Concurrency"] == "3"
    assert email["Group rate"] == "—" and email["Group concurrency"] == "—"
    assert email["Held back now"] == "no"
    assert email["Active"] == "0" and email["Waiting"] == "1"
    sms = cells(html, "sms")
    assert sms["Rate"] == "—" and sms["Group rate"] == "5 per 2 min"
    assert sms["Group concurrency"] == "2" and sms["Waiting"] == "0"
    assert cells(html, "video")["Rate"] == "500 per 200 ms (0 started)"
    plain = cells(html, "plain")
    assert plain["Rate"] == plain["Concurrency"] == plain["Group rate"] == "—"
    assert plain["Held back now"] == "no" and plain["Waiting"] == "1"
    assert "/groups/email" in found.links["email"]
    assert found.forms["email"] == "/api/limits/email"
    assert found.fields["email"] == {
        "rate-max": "10",
        "rate-per": "1",
        "rate-unit": "1000",
        "concurrency": "3",
        "group-rate-max": "",
        "group-rate-per": "",
        "group-rate-unit": "1000",
        "group-concurrency": "",
    }
    assert found.fields["sms"]["group-rate-per"] == "2"
    assert found.fields["sms"]["group-rate-unit"] == "60000"
    assert found.fields["video"]["rate-unit"] == "1"  # 200 ms
    assert 'data-method="DELETE" data-url="/api/limits/email"' in html
    assert 'data-method="DELETE" data-url="/api/limits/plain"' not in html  # nothing to remove
    assert 'data-confirm="Remove every limit of email?' in html
    assert 'id="limits-link"' in html and "<title>Limits · kue</title>" in html
    assert 'data-live="list"' in html and 'data-events="/api/events"' in html


def test_held_back_by_concurrency(client: FlaskClient, queue: Queue) -> None:
    for _ in range(3):
        queue.create_job("email").save()
    queue.limit("email", concurrency=1)
    assert queue.scripts.call(calls.claim(queue.keys, "email", "kue:test:1", 60_000))
    row = cells(page(client, "/limits"), "email")
    assert row["Held back now"] == "at its concurrency limit"
    assert row["Active"] == "1" and row["Waiting"] == "2"


def test_held_back_by_the_rate_for_a_while(client: FlaskClient, queue: Queue) -> None:
    queue.create_job("email").save()
    queue.create_job("email").save()
    queue.limit("email", rate=(1, 60_000))
    assert queue.scripts.call(calls.claim(queue.keys, "email", "kue:test:1", 60_000))
    html = page(client, "/limits")
    row = cells(html, "email")
    assert row["Rate"] == "1 per 1 min (1 started)"
    assert row["Held back now"].startswith("at its rate limit for ")
    wait = row["Held back now"].removeprefix("at its rate limit for ")
    assert wait.endswith(" s") and 50 <= float(wait[:-2]) <= 60
    assert 'data-held="rate"' in html


def test_held_back_while_paused_or_asked_by_the_remote_side(
    client: FlaskClient, queue: Queue, r: redis.Redis
) -> None:
    queue.create_job("email").save()
    queue.create_job("sms").save()
    queue.pause("email")
    seconds, _ = r.time()
    # As a handler's RateLimited(2 min) leaves it (see kue_core.features.limits: the rule's
    # "until").
    r.hset(queue.keys.limits, "sms", json.dumps({"until": (int(seconds) + 120) * 1000}))
    html = page(client, "/limits")
    assert cells(html, "email")["Held back now"] == "paused"
    assert cells(html, "sms")["Held back now"] == "rate limited by the remote side for 2 min"
    # Nothing to edit away but the hold: the remove button ends it.
    assert 'data-method="DELETE" data-url="/api/limits/sms"' in html


def test_not_held_back_without_waiting_jobs(client: FlaskClient, queue: Queue) -> None:
    queue.create_job("email").save()
    queue.limit("email", concurrency=1)
    assert queue.scripts.call(calls.claim(queue.keys, "email", "kue:test:1", 60_000))
    assert cells(page(client, "/limits"), "email")["Held back now"] == "no"


def test_no_types(client: FlaskClient) -> None:
    html = page(client, "/limits")
    assert "No job types yet." in html and 'id="limit-list"' not in html


def test_markup_is_shown_as_text(client: FlaskClient, queue: Queue) -> None:
    queue.create_job(TYPE).group(GROUP).save()
    queue.limit(TYPE, concurrency=2)
    html = page(client, "/limits")
    assert TYPE not in html and "&lt;img src=x onerror=alert(1)&gt;" in html
    found = table(html)
    assert list(found.rows) == [TYPE]  # the parser unescapes
    assert cells(html, TYPE)["Job type"] == TYPE
    assert found.forms[TYPE] == "/api/limits/%3Cimg%20src=x%20onerror=alert(1)%3E"
    groups = page(client, found.links[TYPE][0])
    assert GROUP not in groups and TYPE not in groups
    assert "&lt;script&gt;alert(&#39;g&#39;)&lt;/script&gt;" in groups
    assert list(table(groups, "data-group").rows) == [GROUP]


def test_read_only_offers_no_form_nor_button(redis_url: str, prefix: str, queue: Queue) -> None:
    app: Flask = create_app(
        {"KUE_REDIS_URL": redis_url, "KUE_PREFIX": prefix, "KUE_READONLY": "true"}
    )
    queue.create_job("email").save()
    queue.limit("email", concurrency=2)
    html = page(app.test_client(), "/limits")
    assert cells(html, "email")["Concurrency"] == "2"
    assert "data-url=" not in html and '<form class="limits"' not in html
    assert "Edit" not in html


def test_the_url_without_the_api_route(app: Flask, monkeypatch: pytest.MonkeyPatch) -> None:
    """Built from the API prefix while the endpoint is missing: the same URL as its route's."""
    with app.test_request_context("/limits"):
        routed = limit_url("a?b#c d")
        if ENDPOINT in app.view_functions:
            assert routed == url_for(ENDPOINT, job_type="a?b#c d")
        monkeypatch.setattr("kue_http.dashboard.limits.ENDPOINT", "kue_api.missing")
        assert limit_url("a?b#c d") == routed == "/api/limits/a%3Fb%23c%20d"


# -- groups ------------------------------------------------------------------------------------
def _grouped(queue: Queue, job_type: str, groups: dict[str, int]) -> None:
    for group, n in groups.items():
        for _ in range(n):
            queue.create_job(job_type).group(group).save()


def test_groups_in_turn_order(client: FlaskClient, queue: Queue) -> None:
    _grouped(queue, "email", {"acme": 2, "globex": 1, "initech": 1})
    queue.create_job("email").save()  # in no group: not a row
    queue.limit("email", group_concurrency=4, group_rate=(10, 60_000))
    for _ in range(2):  # the turns move on
        assert queue.scripts.call(calls.claim(queue.keys, "email", "kue:test:1", 60_000))
    listed = queue.groups("email")["groups"]
    order = [g["group"] for g in listed]
    html = page(client, "/groups/email")
    found = table(html, "data-group")
    assert list(found.rows) == order and set(order) == {"acme", "globex", "initech"}
    for g in listed:
        row = found.rows[g["group"]]
        assert (row["Waiting"], row["Active"]) == (str(g["waiting"]), str(g["active"]))
    assert sum(g["active"] for g in listed) >= 1  # a grouped job started: its row says so
    assert [found.rows[g]["Turn"] for g in order] == ["1", "2", "3"]
    assert "<title>Groups of email · kue</title>" in html
    assert "Each group:" in html and "at most 4 active" in html and "10 per 1 min" in html
    assert 'data-events="/api/events?type=email"' in html


def test_a_group_with_only_running_jobs(client: FlaskClient, queue: Queue) -> None:
    _grouped(queue, "email", {"solo": 1})
    assert queue.scripts.call(calls.claim(queue.keys, "email", "kue:test:1", 60_000))
    row = table(page(client, "/groups/email"), "data-group").rows["solo"]
    assert row == {"Turn": "1", "Group": "solo", "Waiting": "0", "Active": "1"}


def test_groups_are_paginated(client: FlaskClient, queue: Queue) -> None:
    _grouped(queue, "email", {f"g{n:02d}": 1 for n in range(30)})
    html = page(client, "/groups/email")
    first = table(html, "data-group")
    assert len(first.rows) == 25 and "Page 1 of 2" in html
    assert "/groups/email?page=2&amp;size=25" in html
    second = page(client, "/groups/email?page=2")
    rows = table(second, "data-group").rows
    assert len(rows) == 5 and not set(rows) & set(first.rows)
    assert [row["Turn"] for row in rows.values()] == ["26", "27", "28", "29", "30"]
    assert len(table(page(client, "/groups/email?size=50"), "data-group").rows) == 30
    assert list(table(page(client, "/groups/email?page=9"), "data-group").rows) == list(rows)


def test_no_groups(client: FlaskClient, queue: Queue) -> None:
    queue.create_job("email").save()
    html = page(client, "/groups/email")
    assert "No group of this type" in html and "No limit per group." in html


def test_a_bad_type_is_refused(client: FlaskClient) -> None:
    res = client.get("/groups/a%00b")
    assert res.status_code == 400 and res.mimetype == "text/html"


def test_pages_write_nothing(client: FlaskClient, queue: Queue, r: redis.Redis) -> None:
    _grouped(queue, "email", {"acme": 2})
    queue.limit("email", rate=(1, 60_000), concurrency=1)
    assert queue.scripts.call(calls.claim(queue.keys, "email", "kue:test:1", 60_000))

    before = snapshot(r, queue.prefix)
    for url in ("/limits", "/groups/email", "/groups/email?page=2"):
        page(client, url)
    assert not written_since(r, queue.prefix, before)


@pytest.mark.parametrize(
    ("rate", "text"),
    [
        ((10, 1000), "10 per 1 s"),
        ((500, 200), "500 per 200 ms"),
        ((1, 1500), "1 per 1500 ms"),
        ((3, 300_000), "3 per 5 min"),
        ((100, 7_200_000), "100 per 2 h"),
        (None, ""),
    ],
)
def test_rates_in_words(rate: tuple[int, int] | None, text: str) -> None:
    assert rate_text(rate) == text


@pytest.mark.parametrize(
    ("ms", "text"),
    [(450, "450 ms"), (2500, "2.5 s"), (59_999, "60 s"), (90_000, "1.5 min"), (5_400_000, "1.5 h")],
)
def test_waits_in_words(ms: int, text: str) -> None:
    assert wait_text(ms) == text
