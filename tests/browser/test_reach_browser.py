"""Every action within reach at a desktop (1280 px), a small laptop (1024 px) and a phone
(390 px), light and dark: each button of every page (a list's row actions, the overview's
Pause buttons, a job's actions) lies inside the screen, is not hidden in a table that scrolls
sideways, and is what a tap on its middle reaches; the header takes at most two rows and
leads to every page, the Workers page among them; a job's flow panel stays inside the screen,
whatever the length of its type."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kue_core import Queue
from tests.browser.conftest import ARTIFACTS, Watched, watched
from tests.browser.test_layout_browser import ROWS, _pages, _slug
from tests.browser.test_layout_browser import filled as filled
from tests.conftest import Server, wait_for

pytestmark = pytest.mark.single_node  # the rules watcher's lists live outside the prefix's slot

#: The buttons of the page shown that cannot be reached (see its header).
UNREACHABLE = (Path(__file__).parent / "reach.js").read_text("utf-8")

#: The header's rows: its brand, tabs, page links, search, menu and status.
HEADER_ITEMS = (
    "header.top > .brand, header.top .tab, header.top .pages a, header.top > .find,"
    " header.top > details > summary, header.top > .live-status"
)

SIZES = [(1280, "light"), (1024, "light"), (390, "light"), (390, "dark")]


@pytest.mark.parametrize(("width", "scheme"), SIZES)
def test_every_action_is_within_reach(
    browser: Any, server: Server, filled: dict[str, Any], width: int, scheme: str
) -> None:
    ui: Watched = watched(
        browser, server, viewport={"width": width, "height": 900}, color_scheme=scheme
    )
    try:
        found = {}
        counted = 0
        for path in _pages(filled):
            page = ui.goto(path)
            page.wait_for_load_state("load")
            counted += page.locator("main button:visible, main a.btn:visible").count()
            wrong = page.evaluate(UNREACHABLE)
            rows = page.evaluate(ROWS, HEADER_ITEMS)
            if rows > 2:
                wrong.append(f"the header takes {rows} rows")
            if wrong:
                found[path] = wrong
                page.screenshot(path=str(ARTIFACTS / f"reach-{width}-{scheme}-{_slug(path)}.png"))
        assert not found, found
        assert counted > 50  # the pages had their actions: rows of jobs, types, schedules...
    finally:
        ui.context.close()
    ui.check()


@pytest.mark.parametrize("width", [1280, 1024, 390])
def test_a_phone_pauses_a_type_and_acts_on_a_row(
    browser: Any, server: Server, filled: dict[str, Any], queue: Queue, width: int
) -> None:
    """The overview's Pause and a list row's Retry work by a tap where they are shown."""
    ui = watched(browser, server, viewport={"width": width, "height": 844})
    try:
        page = ui.goto("/")
        pause = page.locator("tr[data-type='email'] button", has_text="Pause")
        pause.click(no_wait_after=True)
        page.locator("tr[data-type='email'] button", has_text="Resume").wait_for()
        assert "email" in queue.paused()
        page = ui.goto("/jobs/failed")
        retry = page.locator(f"#retry-{filled['failed']}")
        box = wait_for(retry.bounding_box)  # None while a live refresh swaps the list
        assert box["x"] >= 0 and box["x"] + box["width"] <= width
        retry.click()
        page.locator(f"tr[data-job='{filled['failed']}']").wait_for(state="detached")
        assert queue.get_job(filled["failed"]).state != "failed"
    finally:
        ui.context.close()
    ui.check()


@pytest.mark.parametrize("width", [1280, 1024, 390])
def test_the_workers_page_is_in_the_header(
    browser: Any, server: Server, queue: Queue, width: int
) -> None:
    queue.create_job("email", {"title": "x"}).save()
    ui = watched(browser, server, viewport={"width": width, "height": 844})
    try:
        page = ui.goto("/jobs/inactive")
        link = page.locator("header nav[aria-label='Pages'] a#workers-link")
        if width <= 600:
            assert not link.is_visible()  # in the menu, closed
            summary = page.locator("header details.menu > summary")
            summary.click()
            assert link.is_visible()
            page.locator("main h1").click()  # a tap elsewhere closes it
            assert not link.is_visible()
            summary.click()
            page.keyboard.press("Escape")  # and so does Escape
            assert not link.is_visible()
            summary.click()
        box = link.bounding_box()
        assert box and box["x"] >= 0 and box["x"] + box["width"] <= width
        link.click()
        page.wait_for_url("**/workers")
        assert page.locator("h1").inner_text().startswith("Workers")
        if width <= 600:
            page.locator("header details.menu > summary").click()
        assert page.locator("#workers-link").get_attribute("aria-current") == "page"
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / f"header-menu-{width}.png"))
    finally:
        ui.context.close()
    ui.check()


@pytest.fixture
def long_blocked(queue: Queue) -> Iterator[int]:
    """A blocked job of a long type, between a dependency and a dependent."""
    kind = "billing.statements.send_the_monthly_statement_to_every_customer_account"
    first = queue.create_job("report", {"title": "gather"}).save()
    blocked = queue.create_job(kind, {"title": "send"}).depends_on(first).save()
    queue.create_job("email", {"title": "tell"}).depends_on(blocked).save()
    yield blocked.id  # type: ignore[misc]


@pytest.mark.parametrize(("width", "scheme"), SIZES)
def test_the_flow_panel_stays_inside_the_screen(
    browser: Any, server: Server, long_blocked: int, width: int, scheme: str
) -> None:
    ui = watched(browser, server, viewport={"width": width, "height": 844}, color_scheme=scheme)
    try:
        page = ui.goto(f"/job/{long_blocked}")
        panel = page.locator("section#flow")
        this = panel.locator(".this-job")
        outer = wait_for(panel.bounding_box)  # None while a live refresh swaps the panel
        box = wait_for(this.bounding_box)
        assert outer["x"] >= 0 and outer["x"] + outer["width"] <= width
        assert box["x"] >= outer["x"] and box["x"] + box["width"] <= outer["x"] + outer["width"]
        assert page.evaluate("document.documentElement.scrollWidth") <= width
        this.screenshot(path=str(ARTIFACTS / f"flow-this-job-{width}-{scheme}.png"))
    finally:
        ui.context.close()
    ui.check()


@pytest.mark.parametrize("width", [1280, 1024, 390])
def test_the_overviews_counts_fit_their_cells(
    browser: Any, server: Server, queue: Queue, width: int
) -> None:
    """A type's counts of four digits and more stay inside their cells: on a phone each
    count is under its state's name ("Complete 1200" beside it overflowed its quarter)."""
    jobs = queue.save_many(queue.create_job("invoice", {"title": "x"}) for _ in range(1200))
    for job in jobs[:1100]:
        job.set_state("complete")
    queue.create_job("billing.statements", {}).save()
    ui = watched(browser, server, viewport={"width": width, "height": 844})
    try:
        page = ui.goto("/")
        page.locator("table.types td.num a", has_text="1100").wait_for()
        over = page.evaluate(
            """() => [...document.querySelectorAll('table.types td.num')]
                .filter((td) => td.scrollWidth > td.clientWidth + 1)
                .map((td) => `${td.dataset.label} ${td.textContent.trim()}`)"""
        )
        assert not over, over
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        page.locator("table.types").screenshot(path=str(ARTIFACTS / f"types-{width}.png"))
    finally:
        ui.context.close()
    ui.check()
