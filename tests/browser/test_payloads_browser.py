"""Jobs whose payloads are in the payload store, in Chromium (docs/payloads.md): with the store,
the job page shows the data and result whole (hostile text as text) while Redis holds a
reference, and an edit writes the new data; without the store, the page names the value it
cannot read, shows the reference, and offers no edit."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from kue_core import Job, Queue, payloads
from tests.browser.conftest import HOST_APP, MOUNT, Watched, watched
from tests.conftest import Server, wait_for

HOSTILE = "<img src=x onerror=alert(1)>"
BIG = {"title": "a big import", "rows": [f"{HOSTILE} row {n}" for n in range(60)]}
LIMIT = "1000"


@pytest.fixture
def store(tmp_path: Path) -> str:
    return tmp_path.as_uri()


@pytest.fixture
def done(redis_url: str, prefix: str, store: str) -> Iterator[int]:
    """A job whose data and result are in the store, run to its end."""
    with Queue(redis_url, prefix=prefix, max_data_bytes=int(LIMIT), payload_store=store) as q:
        job = q.create_job("import", BIG).save()

        def run(j: Job) -> dict[str, Any]:
            return {"imported": j.data["rows"]}

        q.process("import", 1, run)
        wait_for(lambda: q.get_job(job.id).state == "complete")  # type: ignore[arg-type]
        yield job.id  # type: ignore[misc]


def page_with(browser: Any, redis_url: str, prefix: str, **settings: str) -> Iterator[Watched]:
    server = Server(redis_url, prefix, HOST_APP, MOUNT, **settings)
    server.start()
    w = watched(browser, server)
    try:
        yield w
    finally:
        w.context.close()
        server.kill()
    w.check()


def test_with_the_store_the_page_shows_it_whole(
    browser: Any, redis_url: str, prefix: str, store: str, done: int, r: redis.Redis
) -> None:
    assert payloads.STORED in str(r.hget(f"{prefix}:job:{done}", "data"))
    assert payloads.STORED in str(r.hget(f"{prefix}:job:{done}", "result"))
    with Queue(redis_url, prefix=prefix, max_data_bytes=int(LIMIT), payload_store=store) as q:
        waiting = q.create_job("held", BIG).save()  # no worker takes it
    settings = {"KUE_MAX_DATA_BYTES": LIMIT, "KUE_PAYLOAD_STORE": store}
    for w in page_with(browser, redis_url, prefix, **settings):
        page = w.goto(f"/job/{done}")
        assert json.loads(page.locator("#job-data").inner_text()) == BIG  # as text
        assert json.loads(page.locator("#job-result").inner_text()) == {"imported": BIG["rows"]}
        assert page.locator(".subtitle").inner_text() == "a big import"
        assert page.locator("#unopened").count() == 0
        assert page.evaluate("document.querySelectorAll('img[src=x]').length") == 0
        page = w.goto(f"/job/{waiting.id}")
        page.locator("#edit-data").click()
        changed = {**BIG, "title": "edited"}
        page.locator("#edit-text").fill(json.dumps(changed))
        with page.expect_response(lambda res: res.request.method == "PUT") as saved:
            page.locator("#edit-save").click()
        assert saved.value.ok
        with Queue(redis_url, prefix=prefix, max_data_bytes=int(LIMIT), payload_store=store) as q:
            assert q.get_job(waiting.id).data == changed  # type: ignore[union-attr]
        assert r.llen(f"{prefix}:payloads:trash") == 1  # the data it replaced


def test_without_the_store_the_page_names_the_value(
    browser: Any, redis_url: str, prefix: str, done: int, store: str
) -> None:
    with Queue(redis_url, prefix=prefix, max_data_bytes=int(LIMIT), payload_store=store) as q:
        waiting = q.create_job("held", BIG).save()
    for w in page_with(browser, redis_url, prefix):
        page = w.goto(f"/job/{waiting.id}")
        notice = page.locator("#unopened")
        assert notice.is_visible() and "KUE_PAYLOAD_STORE" in notice.inner_text()
        assert payloads.STORED in page.locator("#job-data").inner_text()
        assert page.locator("#edit-data").count() == 0
        assert HOSTILE not in page.content()
