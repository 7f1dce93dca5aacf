"""The flow page in a real browser: a whole flow as a tree, reached from any job's page,
live as its jobs change, paged past its size, hostile type names shown as text, in dark mode
and at a phone's width."""

from __future__ import annotations

from playwright.sync_api import Browser, expect

from kue_core import Queue
from kue_core.store import calls
from kue_http.dashboard.flows import TREE_CHILDREN
from tests.browser.conftest import ARTIFACTS, Server, Watched, fits_phone, phone_dark

XSS = "<img src=x onerror=\"window.__xss = 'flow'\">"


def _complete(queue: Queue, job_id: int) -> None:
    claimed = queue.scripts.call(
        calls.claim(queue.keys, queue.get_job(job_id).type, "kue:test:1", 10_000)
    )
    assert claimed and claimed != "paused" and claimed[0] == job_id, claimed
    ended = queue.scripts.call(
        calls.complete(queue.keys, job_id, claimed[1]["lease"], '{"ok":true}', None)
    )
    assert ended.outcome == "complete"


def _flow(queue: Queue) -> dict[str, int]:
    report = queue.create_job("report")
    a, b = queue.create_job("fetch"), queue.create_job(XSS)
    p1, p2 = queue.create_job("page"), queue.create_job("page")
    queue.flow(report, [a, (b, [p1, p2])])
    return {"report": report.id, "a": a.id, "b": b.id, "p1": p1.id, "p2": p2.id}  # type: ignore[dict-item]


def test_the_tree_of_a_flow_from_a_jobs_page_live(ui: Watched, queue: Queue) -> None:
    ids = _flow(queue)
    page = ui.goto(f"/job/{ids['p1']}")
    page.locator("#whole-flow").click()
    expect(page.locator("h1")).to_contain_text(f"Flow of job #{ids['report']}")
    tree = page.locator("#flow-tree")
    nodes = tree.locator("li.flow-node")
    expect(nodes).to_have_count(5)
    # Each job above those it depends on: the report, its two fetches, the pages under b.
    under_b = tree.locator(f'li[data-id="{ids["b"]}"] li.flow-node')
    expect(under_b).to_have_count(2)
    expect(tree.locator(f'li[data-id="{ids["b"]}"] > details > summary .type')).to_have_text(XSS)
    expect(tree.locator(f'li[data-id="{ids["p1"]}"]')).to_have_class("flow-node asked")
    expect(page.locator('#flow-counts [data-count="blocked"]')).to_have_text("2 blocked")
    expect(page.locator("#live-status")).to_have_text("live")
    page.evaluate("window.__kept = true")

    _complete(queue, ids["p1"])
    _complete(queue, ids["p2"])  # b is unblocked by the second
    expect(tree.locator(f'li[data-id="{ids["p2"]}"]')).to_have_attribute("data-state", "complete")
    expect(tree.locator(f'li[data-id="{ids["b"]}"]')).to_have_attribute("data-state", "inactive")
    expect(page.locator('#flow-counts [data-count="complete"]')).to_have_text("2 complete")
    assert page.evaluate("window.__kept") is True  # refreshed in place, not reloaded
    assert page.evaluate("window.__xss") is None
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "flow-tree.png"), full_page=True)

    tree.locator(f'li[data-id="{ids["a"]}"] a').first.click()
    expect(page.locator("h1")).to_contain_text(f"Job #{ids['a']}")


def test_a_big_flow_is_paged_and_collapsed(ui: Watched, queue: Queue) -> None:
    parent = queue.create_job("batch")
    kids = [queue.create_job("item", {"i": i}) for i in range(TREE_CHILDREN + 5)]
    grandkids = [queue.create_job("part") for _ in range(3)]
    queue.flow(parent, [(kids[0], grandkids), *kids[1:]])
    page = ui.goto(f"/flow/{kids[7].id}")
    expect(page.locator("#flow-tree-h")).to_have_text(f"{1 + TREE_CHILDREN + 3} jobs shown")
    expect(page.locator("#flow-paged")).to_be_visible()
    # Past a few dozen jobs, only the top job's branch starts open.
    first = page.locator(f'li[data-id="{kids[0].id}"] > details')
    expect(first).not_to_have_attribute("open", "")
    more = page.locator(".flow-more a")
    expect(more).to_have_text("5 more jobs it depends on")
    more.click()
    expect(page.locator("#flow-tree > li.flow-node > details > ul > li.flow-node")).to_have_count(5)
    expect(page.locator("#flow-tree-h")).to_have_text("6 jobs shown")  # the earlier ones too
    expect(page.locator(".page-head a.btn")).to_have_count(0)  # it starts at the root
    page = ui.goto(f"/flow/{kids[7].id}?start={kids[0].id}")  # a branch: its own page
    expect(page.locator("#flow-tree li.flow-node")).to_have_count(4)
    page.locator(".page-head a.btn", has_text="Whole flow").click()
    expect(page.locator("#flow-tree-h")).to_have_text(f"{1 + TREE_CHILDREN + 3} jobs shown")


def test_the_flow_page_in_dark_mode_at_a_phones_width(
    browser: Browser, server: Server, queue: Queue
) -> None:
    ids = _flow(queue)
    with phone_dark(browser, server) as w:
        page = w.goto(f"/flow/{ids['report']}")
        expect(page.locator("#flow-tree li.flow-node")).to_have_count(5)
        fits_phone(page, "flow-tree-phone-dark.png")
