"""An encrypted queue's jobs in Chromium (docs/security.md): with the key, the job page shows
the data, result and log as written while Redis holds ciphertext; without it, the page says
which key the job is encrypted with, shows what is stored, and offers no edit."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from kue_core import Job, Queue
from tests.browser.conftest import HOST_APP, MOUNT, Watched, watched
from tests.conftest import Server, wait_for

K1 = f"k1:{base64.b64encode(bytes(range(32))).decode()}"
K2 = f"k2:{base64.b64encode(bytes(range(32, 64))).decode()}"
HOSTILE = "<img src=x onerror=alert(1)> ada@example.com"


@pytest.fixture
def done(redis_url: str, prefix: str) -> Iterator[int]:
    """A job of an encrypted queue, run to its end: it logged, and returned a result."""
    with Queue(redis_url, prefix=prefix, encryption_keys=K1) as q:
        job = q.create_job("mail", {"to": HOSTILE}).save()

        def send(j: Job) -> dict[str, str]:
            j.log("sending to %s", j.data["to"])
            return {"sent": j.data["to"]}

        q.process("mail", 1, send)
        wait_for(lambda: q.get_job(job.id).state == "complete")  # type: ignore[arg-type]
        yield job.id  # type: ignore[misc]


def page_with(browser: Any, redis_url: str, prefix: str, keys: str) -> Iterator[Watched]:
    server = Server(redis_url, prefix, HOST_APP, MOUNT, KUE_ENCRYPTION_KEYS=keys)
    server.start()
    w = watched(browser, server)
    try:
        yield w
    finally:
        w.context.close()
        server.kill()
    w.check()


def test_with_the_key_the_page_shows_it_as_written(
    browser: Any, redis_url: str, prefix: str, done: int, r: redis.Redis
) -> None:
    assert "ada@example.com" not in str(r.hget(f"{prefix}:job:{done}", "data"))
    for w in page_with(browser, redis_url, prefix, K1):
        page = w.goto(f"/job/{done}")
        assert HOSTILE in page.locator("#job-data").inner_text()  # as text, not markup
        assert HOSTILE in page.locator("pre.result").inner_text()
        assert page.locator("#log li .text").first.inner_text() == f"sending to {HOSTILE}"
        assert page.locator("#unopened").count() == 0
        assert page.evaluate("document.querySelectorAll('img[src=x]').length") == 0


def test_without_it_the_page_names_the_key_and_offers_no_edit(
    browser: Any, redis_url: str, prefix: str, done: int
) -> None:
    with Queue(redis_url, prefix=prefix, encryption_keys=K1) as q:
        waiting = q.create_job("mail", {"to": HOSTILE}).save()  # editable, were it readable
    for w in page_with(browser, redis_url, prefix, K2):
        page = w.goto(f"/job/{waiting.id}")
        notice = page.locator("#unopened")
        assert notice.is_visible() and "k1" in notice.inner_text()
        assert "kue:sealed" in page.locator("#job-data").inner_text()
        assert "ada@example.com" not in page.content()
        assert page.locator("#edit-data").count() == 0
        page = w.goto(f"/job/{done}")
        assert "ada@example.com" not in page.content()
