"""Pinned jobs in a real browser: the Pinned state has its tab and count; the workers view
shows, live, the pinned jobs waiting for a worker and those pinned to workers not running,
each linking to the job, whose page names its workers; a pinned job's title shows as text
(worker ids cannot hold markup: they are checked)."""

from __future__ import annotations

from playwright.sync_api import expect

from kue_core import Queue
from tests.browser.conftest import Watched
from tests.conftest import wait_for


def test_pinned_jobs_in_the_nav_the_workers_view_and_the_job_page(
    ui: Watched, queue: Queue, redis_url: str
) -> None:
    with Queue(redis_url, queue.prefix, worker_id="gpu-1") as gpu:
        gpu.process("render", lambda job: None)
        gpu.pause("render", local=True)  # its pinned jobs wait while the page is looked at
        wait_for(lambda: [w for w in gpu.workers() if w["paused"] == ["render"]])
        page = ui.goto("/")
        expect(page.locator("#live-status")).to_have_text("live")
        mine = queue.create_job("render", {"title": "<b>x</b>"}).only(["gpu-1"]).save()
        away = queue.create_job("render").only(["gpu-9"]).save()
        expect(page.locator('nav [data-count="pinned"]')).to_have_text("2")  # live
        row = page.locator('tr[data-worker="gpu-1"]')
        expect(row.locator("td[data-pinned] a")).to_have_text([f"#{mine.id}"])
        elsewhere = page.locator("[data-pinned-elsewhere]")
        expect(elsewhere).to_contain_text("gpu-9")
        elsewhere.get_by_role("link", name=f"#{away.id}").click()
        expect(page.locator("#only")).to_have_text("gpu-9")
        expect(page.locator("h1")).to_contain_text("Pinned")
        page.goto(ui.server.base + "/jobs/pinned")
        expect(page.locator("tbody tr")).to_have_count(2)
        expect(page.get_by_text("<b>x</b>")).to_have_count(1)  # the title, as text
        gpu.resume("render", local=True)
        expect(page.locator('nav [data-count="pinned"]')).to_have_text("1")  # live
        expect(page.locator("tbody tr")).to_have_count(1)


def test_the_job_page_changes_who_may_run_a_job(ui: Watched, queue: Queue) -> None:
    """Workers typed on the job page pin the job to them (it is listed as pinned, its workers
    shown); emptied, it waits for any worker again."""
    job = queue.create_job("render").save()
    page = ui.goto(f"/job/{job.id}")
    expect(page.locator("#live-status")).to_have_text("live")
    page.fill("#only-workers", "gpu-1, gpu-2")
    page.click("#set-only")
    expect(page.locator("#only")).to_have_text("gpu-1 gpu-2")
    expect(page.locator("h1")).to_contain_text("Pinned")
    assert queue.get_job(job.id).only() == ["gpu-1", "gpu-2"]  # type: ignore[arg-type]
    page.fill("#only-workers", "")
    page.click("#set-only")
    expect(page.locator("h1")).to_contain_text("Queued")
    expect(page.locator("#only")).to_have_count(0)
    page.fill("#only-workers", "bad id!")
    page.click("#set-only")
    expect(page.locator("#toast")).to_contain_text("worker id")
    assert queue.get_job(job.id).state == "inactive"  # type: ignore[arg-type]
    # The refusal is the one console error this test causes, on purpose.
    assert [e for e in ui.errors if "400" in e] == ui.errors and len(ui.errors) == 1
    ui.errors.clear()
