"""Browser tests: the dashboard mounted under ``/kue`` in a host app, served by a real
gunicorn, driven by Playwright in Debian's headless Chromium (never a downloaded browser).

Without Chromium or Playwright these tests are skipped with a message, except under CI
(``CI`` set), where that is a failure. Screenshots go to ``test-artifacts/screenshots``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Server

CHROMIUM = "/usr/bin/chromium"
MOUNT = "/kue"
HOST_APP = "tests.browser.hostapp:app"
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "screenshots"
# Chromium flags for a closed network: no background requests to Google's hosts.
FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

try:
    from playwright.sync_api import Browser, BrowserContext, Page, sync_playwright
except ImportError:  # pragma: no cover - depends on the machine
    sync_playwright = None


def _missing() -> str | None:
    if sync_playwright is None:
        return "playwright is not installed (pip install -e '.[test]')"
    if not shutil.which(CHROMIUM):
        return f"{CHROMIUM} is missing (apt-get install chromium chromium-driver)"
    return None


@pytest.fixture(scope="session")
def browser() -> Iterator[Browser]:
    reason = _missing()
    if reason:
        if os.environ.get("CI"):
            pytest.fail(f"browser tests cannot run under CI: {reason}")
        pytest.skip(reason)
    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        yield chromium
        chromium.close()


@pytest.fixture
def server(redis_url: str, prefix: str) -> Iterator[Server]:
    s = Server(redis_url, prefix, HOST_APP, MOUNT)
    s.start()
    yield s
    s.kill()


class Watched:
    """A page with everything it requested and every console error, checked at the end:
    no request to another host, nothing refused by the Content Security Policy."""

    def __init__(self, context: BrowserContext, server: Server) -> None:
        self.context = context
        self.server = server
        self.requests: list[str] = []
        self.errors: list[str] = []
        context.on("request", lambda r: self.requests.append(r.url))
        self.page: Page = context.new_page()
        self.page.on("console", self._console)
        self.page.on("pageerror", lambda e: self.errors.append(f"page error: {e}"))

    def _console(self, message: Any) -> None:
        if message.type == "error" and not _expected(message.text):
            self.errors.append(message.text)

    def goto(self, path: str) -> Page:
        self.page.goto(self.server.base + path)
        return self.page

    def check(self) -> None:
        foreign = [u for u in self.requests if not u.startswith(self.server.root + "/")]
        assert not foreign, f"requests to another host: {foreign}"
        assert not self.errors, f"console errors: {self.errors}"


def _expected(text: str) -> bool:
    """Console errors a test causes on purpose: a lost stream or fetch while the server restarts,
    a refused write in read-only mode, a remove refused while jobs wait for the job."""
    return any(
        s in text
        for s in (
            "ERR_CONNECTION_REFUSED",
            "ERR_CONNECTION_RESET",
            "ERR_INCOMPLETE_CHUNKED",
            "ERR_CONTENT_LENGTH_MISMATCH",  # a page cut short as the server is killed
            "405",
            "409",
        )
    )


def watched(browser: Browser, server: Server, **options: Any) -> Watched:
    options.setdefault("viewport", {"width": 1280, "height": 900})
    return Watched(browser.new_context(**options), server)


@contextlib.contextmanager
def phone_dark(browser: Browser, server: Server) -> Iterator[Watched]:
    """A page 390 px wide in the dark scheme, checked at the end as :func:`ui`'s."""
    w = watched(browser, server, viewport={"width": 390, "height": 844}, color_scheme="dark")
    try:
        yield w
    finally:
        w.context.close()
    w.check()


def fits_phone(page: Page, shot: str) -> None:
    """The page does not scroll sideways at a phone's width; its picture is kept as ``shot``."""
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= 390, f"the page scrolls sideways: {width}px"
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / shot), full_page=True)


@pytest.fixture
def ui(browser: Browser, server: Server) -> Iterator[Watched]:
    w = watched(browser, server)
    yield w
    w.context.close()
    w.check()
