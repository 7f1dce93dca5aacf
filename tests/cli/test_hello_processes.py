"""The README's ``hello.py`` beside the demo (``kue example``) on one Redis, as a newcomer runs
both in one folder: hello's worker, a real process, serves its own type and never takes a job
the demo's producer saves. (tests/cli/test_packaging.py checks that the README shows hello.py
as it is, after saying to install.)"""

from __future__ import annotations

import sys
import threading
from pathlib import Path

import pytest

from kue_core import Queue
from kue_example import demo, producer
from kue_example.tasks import DemoTasks
from tests.cli.running import ROOT, Kue
from tests.conftest import wait_for

pytestmark = pytest.mark.timeout(120)

HELLO = ROOT / "kue_example" / "hello.py"
#: Every type the demo saves jobs of: its Kue handlers' and its typed tasks'.
DEMO_TYPES = ("email", "video", "webhook", "reminder", "report", "invoice", "thumbnail")


def test_hello_and_the_demo_keep_to_their_own_jobs(
    run: list[Kue], tmp_path: Path, redis_url: str, prefix: str, queue: Queue
) -> None:
    assert set(DEMO_TYPES) >= set(demo.WORKERS)
    settings = {"KUE_REDIS_URL": redis_url, "KUE_PREFIX": prefix, "PYTHONUNBUFFERED": "1"}
    hello = Kue(str(HELLO), env=settings, cwd=tmp_path, exe=Path(sys.executable))
    run.append(hello)
    hello.wait_for_line(r"^job \d+ -> \{'sent': True\}$")
    (worker,) = wait_for(queue.workers)
    assert worker["types"] == {"greeting": 4}

    # The demo's producer (no demo worker: any demo job that moves, hello's worker took).
    stopping = threading.Event()
    making = threading.Thread(
        target=producer.produce, args=(queue, stopping, 50.0, False, DemoTasks(queue))
    )
    making.start()
    try:
        wait_for(lambda: sum(queue.count("inactive", t) for t in DEMO_TYPES) >= 30)
        wait_for(lambda: queue.count("inactive", "invoice") + queue.count("inactive", "thumbnail"))
    finally:
        stopping.set()
        making.join(30)
    # A greeting saved after them is done: hello's worker was claiming all along.
    later = queue.create_job("greeting", {"to": "bob@example.com", "text": "hi"}).save()
    assert later.wait(30) == {"sent": True}
    assert hello.wait_for_line(r"^greeting bob@example.com: 'hi'$")
    for job_type in DEMO_TYPES:
        counts = queue.counts(job_type)
        assert (counts["active"], counts["complete"], counts["failed"]) == (0, 0, 0), job_type
    assert queue.count("inactive", "email") >= 10  # still waiting for the demo's workers
    assert not any("KeyError" in line for line in hello.err), hello.output

    hello.ctrl_c()
    assert hello.wait() == 0, hello.output
