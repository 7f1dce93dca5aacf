"""The dashboard's job records parts, as served HTML: the tags pages, the search page through
the index, the job page's tags and tracking, the overview's tracked jobs, retention and
memory; markup shown as text; bad input answered with an error page, never a 500."""

from __future__ import annotations

from flask import Flask
from flask.testing import FlaskClient

from kue_core import Queue
from kue_http import create_app
from tests.http.test_dashboard import page, rows

MARKUP = "<b>x</b>"


def test_tags_pages(client: FlaskClient, queue: Queue) -> None:
    a = queue.create_job("email").tags("vip", MARKUP).save()
    b = queue.create_job("email").tags("vip").save()
    html = page(client, "/tags")
    assert "&lt;b&gt;x&lt;/b&gt;" in html and MARKUP not in html
    assert html.index(">vip<") < html.index("&lt;b&gt;")  # most used first
    html = page(client, "/tags/vip")
    assert list(rows(html)) == [str(b.id), str(a.id)]  # most recently tagged first
    assert "No job has this tag." in page(client, "/tags/nobody")
    assert client.get("/tags/%20").status_code == 400


def test_search_page(client: FlaskClient, queue: Queue) -> None:
    a = queue.create_job("email", {"title": f"Invoice {MARKUP}"}).save()
    b = queue.create_job("video", {"title": "Invoice reel"}).save()
    html = page(client, "/search?q=inv")
    assert list(rows(html)) == [str(b.id), str(a.id)] and "2 jobs found." in html
    assert "Invoice &lt;b&gt;x&lt;/b&gt;" in html
    assert list(rows(page(client, "/search?q=inv&type=email"))) == [str(a.id)]
    assert list(rows(page(client, "/search?q=inv&state=complete"))) == []
    for bad in ("/search?q=inv&state=gone", "/search?q=!!", "/search?q=x&type=a%0Ab"):
        res = client.get(bad)
        assert res.status_code == 400 and res.mimetype == "text/html", bad


def test_job_page_tags_and_tracking(client: FlaskClient, queue: Queue) -> None:
    job = queue.create_job("email").tags(MARKUP).track().save()
    html = page(client, f"/job/{job.id}")
    assert 'id="tags"' in html and "&lt;b&gt;x&lt;/b&gt;" in html and MARKUP not in html
    assert 'form class="add-tag"' in html and 'id="untrack"' in html
    plain = page(client, f"/job/{queue.create_job('email').save().id}")
    assert 'id="track"' in plain and '<span class="muted">none</span>' in plain


def test_read_only_offers_no_tag_form(redis_url: str, prefix: str, queue: Queue) -> None:
    app: Flask = create_app(
        {"KUE_REDIS_URL": redis_url, "KUE_PREFIX": prefix, "KUE_READONLY": "true"}
    )
    job = queue.create_job("email").tags("vip").save()
    html = page(app.test_client(), f"/job/{job.id}")
    assert "add-tag" not in html and 'id="track"' not in html and "Remove tag" not in html


def test_overview_leads_with_tracked_jobs_and_shows_retention(
    client: FlaskClient, queue: Queue
) -> None:
    assert 'id="tracked"' not in page(client, "/")  # nothing tracked: no panel
    job = queue.create_job("email", {"title": MARKUP}).track().save()
    queue.set_retention(failed={"count": 3})
    html = page(client, "/")
    assert "<title>Overview · kue</title>" in html
    assert html.count('id="kept-h"') == 1
    assert html.index('id="tracked"') < html.index('id="chart-h"')
    assert f'data-ids="{job.id}"' in html and "&lt;b&gt;x&lt;/b&gt;" in html
    assert "newest 3" in html[html.index('id="kept-failed"') :]
    assert " used, peak " in html
