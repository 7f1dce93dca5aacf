"""``Queue.run()`` in real scripts: kue_example/hello.py serves until Ctrl-C and exits 0; a
job running when SIGTERM comes finishes before the process ends; a second signal during the
shutdown ends the process at once (status 1), as ``kue worker`` does. (A signal before
``run()`` is called meets Python's default handlers: the slow script's jobs tell that they
started only once ``run()`` catches signals.)"""

from __future__ import annotations

import signal
import sys
from pathlib import Path

from kue_core import Queue
from tests.cli.running import ROOT, Kue

PYTHON = Path(sys.executable)
SLOW = """
import logging, signal, threading, time
from kue_core import Queue

logging.basicConfig(level=logging.INFO, format="%(message)s")
queue = Queue()
before = signal.getsignal(signal.SIGTERM)

def slow(job):
    while signal.getsignal(signal.SIGTERM) is before:  # till run() catches signals
        time.sleep(0.01)
    print("started", job.id, flush=True)
    threading.Event().wait(float(job.data["seconds"]))
    return {"slept": job.data["seconds"]}

queue.process("slow", 1, slow)
print("stopped by", queue.run(shutdown_timeout=20), flush=True)
"""


def _script(path: Path, redis_url: str, prefix: str) -> Kue:
    env = {"KUE_REDIS_URL": redis_url, "KUE_PREFIX": prefix, "PYTHONUNBUFFERED": "1"}
    return Kue(str(path), env=env, exe=PYTHON)


def test_hello_serves_until_ctrl_c(
    run: list[Kue], redis_url: str, prefix: str, queue: Queue
) -> None:
    hello = _script(ROOT / "kue_example" / "hello.py", redis_url, prefix)
    run.append(hello)
    hello.wait_for_line(r"^job \d+ -> \{'sent': True\}$")
    more = queue.create_job("greeting", {"to": "grace@example.com", "text": "again"}).save()
    assert more.wait(10) == {"sent": True}  # served by run()
    hello.wait_for_line(r"^greeting grace@example.com: 'again'$")
    hello.send(signal.SIGINT)
    assert hello.wait(timeout=30) == 0, hello.output
    assert queue.workers() == [] and "Traceback" not in hello.output


def test_a_running_job_finishes_and_a_second_signal_ends_at_once(
    run: list[Kue], tmp_path: Path, redis_url: str, prefix: str, queue: Queue
) -> None:
    script = tmp_path / "slow.py"
    script.write_text(SLOW)
    graceful = _script(script, redis_url, prefix)
    run.append(graceful)
    job = queue.create_job("slow", {"seconds": 1.5}).save()
    graceful.wait_for_line(rf"^started {job.id}$")
    graceful.send(signal.SIGTERM)
    assert graceful.wait(timeout=30) == 0, graceful.output
    assert queue.get_job(job.id).state == "complete"  # it finished: not given back
    assert "stopped by SIGTERM" in graceful.out

    hasty = _script(script, redis_url, prefix)
    run.append(hasty)
    long = queue.create_job("slow", {"seconds": 60}).save()
    hasty.wait_for_line(rf"^started {long.id}$")
    hasty.send(signal.SIGTERM)
    hasty.wait_for_line(r"^SIGTERM: stopping; running jobs get 20 s$")
    hasty.send(signal.SIGINT)
    assert hasty.wait(timeout=10) == 1, hasty.output
    assert "SIGINT again: exiting now" in hasty.output
