"""Users with roles in Chromium (docs/security.md): a viewer signed in with basic auth sees a
job's page without a button that writes; an operator sees those acting on the job, not the
data editor (an admin's)."""

from __future__ import annotations

from typing import Any

from kue_core import Queue
from tests.browser.conftest import HOST_APP, MOUNT, watched
from tests.conftest import Server

USERS = "ada:ad-pass:admin,olga:op-pass:operator,vic:view-pass:viewer"


def test_a_viewer_sees_no_button_and_an_operator_does(
    browser: Any, redis_url: str, prefix: str
) -> None:
    with Queue(redis_url, prefix=prefix) as q:
        job = q.create_job("email", {"to": "ada"}).save()
    server = Server(redis_url, prefix, HOST_APP, MOUNT, KUE_USERS=USERS)
    server.start()
    try:
        for name, password, buttons, edits in (
            ("vic", "view-pass", 0, 0),
            ("olga", "op-pass", 1, 0),
            ("ada", "ad-pass", 1, 1),
        ):
            credentials = {"username": name, "password": password}
            w = watched(browser, server, http_credentials=credentials)
            try:
                page = w.goto(f"/job/{job.id}")
                assert page.locator("h1").count() == 1  # signed in: the page, not a 401
                assert page.locator("#edit-data").count() == edits
                assert page.locator(f"#cancel-{job.id}").count() == buttons
            finally:
                w.context.close()
            w.check()
    finally:
        server.kill()
