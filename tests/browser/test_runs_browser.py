"""A fan-out job's page in a real browser: one row per run (worker, state, times, result or
error) that follows the runs live, and the job's state with them; a result holding markup
shows as text."""

from __future__ import annotations

import threading

from playwright.sync_api import expect

from kue_core import Job, Queue
from tests.browser.conftest import Watched


def test_the_runs_of_a_fan_out_job_follow_live(ui: Watched, queue: Queue, redis_url: str) -> None:
    release = threading.Event()

    def slow(job: Job) -> str:
        release.wait(30)
        return "<i>slow</i>"

    job = queue.create_job("render", {"title": "flush"}).only(["w1", "w2"]).fan_out(2).save()
    page = ui.goto(f"/job/{job.id}")
    expect(page.locator("#live-status")).to_have_text("live")
    expect(page.locator("#runs .empty")).to_have_text("No run has started.")
    with (
        Queue(redis_url, queue.prefix, worker_id="w1") as w1,
        Queue(redis_url, queue.prefix, worker_id="w2") as w2,
    ):
        w1.process("render", lambda j: {"on": "w1"})
        first = page.locator('tr[data-run="w1"]')
        expect(first.locator(".badge")).to_have_text("complete")  # live
        expect(first).to_contain_text('{"on": "w1"}')
        expect(page.locator("#runs-done")).to_have_text("1 of 2 complete")
        w2.process("render", slow)
        second = page.locator('tr[data-run="w2"]')
        expect(second.locator(".badge")).to_have_text("running")
        expect(page.locator("h1")).to_contain_text("Active")
        release.set()
        expect(second.locator(".badge")).to_have_text("complete")
        expect(page.locator("#runs-done")).to_have_text("2 of 2 complete")
        expect(page.locator("h1")).to_contain_text("Complete")
        expect(second).to_contain_text('"<i>slow</i>"')  # as text, not markup
        expect(page.locator("#runs i")).to_have_count(0)
        expect(page.locator(".timeline .run")).to_have_count(4)  # two started, two complete
