"""Make the pictures of the dashboard in docs/screenshots/: every page, filled by the demo
(``kue example``'s workers, producer, schedules, limits and rules), in the light and the dark
scheme, at 1280 x 860, in Debian's Chromium (Playwright drives it; no browser is downloaded).

    .venv/bin/python docs/screenshots.py            # two minutes; writes docs/screenshots/

It runs on an embedded Redis of its own in a temporary folder, so it touches no queue of
yours, and writes docs/screenshots/README.md, the page that shows them.
"""

from __future__ import annotations

import atexit
import logging
import re
import shutil
import tempfile
import threading
import time
from pathlib import Path

from playwright.sync_api import Page, sync_playwright
from werkzeug.serving import make_server

from kue_core import Queue, connection
from kue_example import demo
from kue_http import close, create_app

OUT = Path(__file__).with_name("screenshots")
#: Most seconds the demo runs before the pictures, while some list is still empty.
WARM_UP = 60
#: Most seconds to wait, after that, for the history's first minute of points.
HISTORY_WAIT = 90
#: The states whose lists must hold jobs first.
FILLED = ("inactive", "active", "complete", "failed", "delayed", "blocked")
WIDTH, HEIGHT = 1280, 860
#: (file name, what it shows, the path; "{failed}", "{flow}" stand for ids found at run time).
PAGES = [
    ("overview", "Overview: jobs per state, throughput, job types, workers", "/"),
    ("queued", "Queued jobs, in the order workers take them", "/jobs/inactive"),
    ("active", "Active jobs, with their workers and progress", "/jobs/active"),
    ("complete", "Complete jobs, newest first", "/jobs/complete"),
    ("failed", "Failed jobs, newest first, with their errors", "/jobs/failed"),
    ("delayed", "Delayed jobs, soonest due first", "/jobs/delayed"),
    ("blocked", "Blocked jobs, waiting for their dependencies", "/jobs/blocked"),
    ("job-failed", "A failed job: facts, timeline, errors per attempt, log", "/job/{failed}"),
    ("job-flow", "A job of a flow: what it depends on and what depends on it", "/job/{flow}"),
    ("flow-tree", "A whole flow as a tree, each job above those it depends on", "/flow/{flow}"),
    ("search", "Search: the jobs some words find", "/search?q=welcome"),
    ("tags", "Tags, most used first", "/tags"),
    ("schedules", "Schedules: cron and interval, next ticks, last job", "/schedules"),
    ("limits", "Limits: rate and concurrency per type, and what holds a type back", "/limits"),
    ("groups", "Groups of a type, in their turn", "/groups/webhook"),
    ("rules", "Rules: watchers, their lists, events handled and failed", "/rules"),
    ("workers", "Workers: each process, its version, slots, limits and running jobs", "/workers"),
    ("history", "History: throughput, backlog, wait and run times, deploys", "/history?range=1h"),
    ("audit", "Audit: the changes made through the API and the dashboard", "/audit"),
]


def _ids(queue: Queue) -> dict[str, int]:
    """A failed job, and a job of a flow that has dependencies (the demo's reports)."""
    failed = queue.page("failed", count=1, desc=True, by="finished")
    flows = [j for j in queue.page("blocked", count=20) if j.depends_count]
    return {
        "failed": failed[0].id if failed else 1,  # type: ignore[dict-item]
        "flow": flows[0].id if flows else 1,  # type: ignore[dict-item]
    }


def _shoot(page: Page, base: str, path: str, file: Path) -> None:
    page.goto(base + path)
    page.wait_for_load_state("networkidle")
    page.evaluate("document.fonts.ready")
    page.screenshot(path=str(file))


def main() -> None:
    OUT.mkdir(exist_ok=True)
    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # no line per request
    folder = tempfile.mkdtemp(prefix="kue-screenshots-")
    # Removed last: the embedded Redis, started after, is shut down at exit before it.
    atexit.register(shutil.rmtree, folder, True)
    queue = Queue(connection.embedded_url(folder), prefix="demo")
    stop = demo.start(queue, echo=lambda line: None, rounds_per_second=4)
    app = create_app({"KUE_REDIS_URL": connection.embedded_url(folder), "KUE_PREFIX": "demo"})
    server = make_server("127.0.0.1", 0, app, threaded=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_port}"
    try:
        deadline = time.monotonic() + WARM_UP
        while time.monotonic() < deadline and not all(
            n > 0 for s, n in queue.counts().items() if s in FILLED
        ):
            time.sleep(0.5)
        # The history's first sample is where it starts from: its points come a minute after.
        deadline = time.monotonic() + HISTORY_WAIT
        while (
            time.monotonic() < deadline
            and not queue.stats_history(None, "1h")["total"]["run"]["count"]
        ):
            time.sleep(1)
        ids = _ids(queue)
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox"])
            for scheme in ("light", "dark"):
                context = browser.new_context(
                    viewport={"width": WIDTH, "height": HEIGHT}, color_scheme=scheme
                )
                page = context.new_page()
                for name, _, path in PAGES:
                    _shoot(page, base, path.format(**ids), OUT / f"{name}-{scheme}.png")
                context.close()
            browser.close()
    finally:
        server.shutdown()
        close(app)
        stop(5)
        queue.close()
    _gallery()


def _gallery() -> None:
    lines = [
        "# The dashboard, page by page",
        "",
        "Filled by the demo (`kue example`), light then dark. Made by "
        "[`docs/screenshots.py`](../screenshots.py); run it again after a change to a page.",
        "",
    ]
    for name, what, path in PAGES:
        shown = re.sub(r"\{\w+\}", "42", path)
        lines += [f"## {what}", "", f"`{shown}`", ""]
        lines += [f"![{what} (light)]({name}-light.png)", f"![{what} (dark)]({name}-dark.png)", ""]
    (OUT / "README.md").write_text("\n".join(lines), "utf-8")


if __name__ == "__main__":
    main()
