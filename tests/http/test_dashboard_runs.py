"""A fan-out job's page, as served HTML: its options in words, one row per run (worker, state,
tries, result or error), the runs in the timeline, and markup in a result or an error shown as
text; a plain job's page has no runs panel."""

from __future__ import annotations

import re
import threading
from typing import Any

from flask.testing import FlaskClient

from kue_core import Queue
from kue_core.store import calls
from tests.conftest import wait_for
from tests.http.test_dashboard import page

LEASE = 10_000


def _claim(queue: Queue, worker: str) -> tuple[int, str]:
    claimed: Any = queue.scripts.call(calls.claim(queue.keys, "render", worker, LEASE))
    assert isinstance(claimed, tuple), claimed
    return claimed[0], claimed[1]["lease"]


def _row(html: str, worker: str) -> str:
    found = re.search(rf'<tr data-run="{worker}">(.*?)</tr>', html, re.S)
    assert found, f"no row for {worker}"
    return found.group(1)


def test_a_fan_out_job_shows_a_row_per_run(client: FlaskClient, queue: Queue) -> None:
    job = queue.create_job("render").fan_out(2, at_once=2, max_failed_runs=1).save()
    html = page(client, f"/job/{job.id}")
    assert "No run has started." in html and 'id="runs-done">0 of 2 complete' in html
    assert "2 at a time" in html and "1 failed run tolerated" in html
    jid, bad = _claim(queue, "w1")
    _, good = _claim(queue, "w2")
    queue.scripts.call(
        calls.fail(queue.keys, jid, bad, "<b>disk</b> full", "<b>disk</b> full\ntrace", 0, None)
    )
    html = page(client, f"/job/{jid}")
    assert re.search(r'class="badge run-failed">failed<', _row(html, "w1"))
    assert "&lt;b&gt;disk&lt;/b&gt; full" in _row(html, "w1") and "<b>disk" not in html
    assert re.search(r'class="badge run-running">running<', _row(html, "w2"))
    _, again = _claim(queue, "w1")  # its place opened again: w1 may try once more
    for token, result in ((good, '"<i>two</i>"'), (again, '{"n": 1}')):
        ended = queue.scripts.call(calls.complete(queue.keys, jid, token, result, None))
        assert ended.outcome == "complete"
    html = page(client, f"/job/{jid}")
    assert 'id="runs-done">2 of 2 complete' in html
    first = _row(html, "w1")
    assert re.search(r'class="num">2<', first) and "{&#34;n&#34;: 1}" in first
    assert "&#34;&lt;i&gt;two&lt;/i&gt;&#34;" in _row(html, "w2") and "<i>two" not in html
    timeline = re.findall(r"<strong>Run (\w+)</strong>", html)
    assert sorted(timeline) == ["complete", "complete", "failed", "started", "started", "started"]


def test_a_plain_job_has_no_runs_panel(client: FlaskClient, queue: Queue) -> None:
    job = queue.create_job("render").save()
    html = page(client, f"/job/{job.id}")
    assert 'id="runs"' not in html and "Fan-out" not in html


def test_each_worker_running_a_run_lists_the_job(
    client: FlaskClient, queue: Queue, redis_url: str
) -> None:
    """queue.workers() and the overview's workers table list a fan-out job under every worker
    running a run of it, not only under the last one that started."""
    release = threading.Event()
    with (
        Queue(redis_url, queue.prefix, worker_id="w1") as w1,
        Queue(redis_url, queue.prefix, worker_id="w2") as w2,
    ):
        for q in (w1, w2):
            q.process("render", lambda job: release.wait(30))
        job = queue.create_job("render").fan_out(2).save()
        assert wait_for(lambda: len(queue.get_job(job.id).running_on()) == 2, timeout=10)  # type: ignore[arg-type]
        jobs = {w["id"]: w["jobs"] for w in queue.workers()}
        assert jobs["w1"] == [job.id] and jobs["w2"] == [job.id]
        html = page(client, "/")
        for wid in ("w1", "w2"):
            row = re.search(rf'<tr data-worker="{wid}">(.*?)</tr>', html, re.S)
            assert row and f"#{job.id} render" in row.group(1), wid
        release.set()
        assert wait_for(lambda: queue.get_job(job.id).state == "complete", timeout=10)  # type: ignore[arg-type]
        assert {w["id"]: w["jobs"] for w in queue.workers()}["w1"] == []


def test_the_job_page_names_preferred_workers_and_offers_to_pin(
    client: FlaskClient, queue: Queue
) -> None:
    preferred = queue.create_job("render").prefer(["gpu-1"]).save()
    html = page(client, f"/job/{preferred.id}")
    assert re.search(r'id="prefer">.*gpu-1', html, re.S) and 'id="only-workers"' not in html
    plain = queue.create_job("render").save()
    html = page(client, f"/job/{plain.id}")
    assert 'id="only-workers"' in html and 'id="prefer"' not in html
