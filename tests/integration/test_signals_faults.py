"""Signals and steps under crashes, with real worker processes (SIGKILL): a worker killed
between a recorded step and the next (the recovery does not run the step again), killed with
a signal kept for its running job (the recovery reads it and does not wait), killed in the
attempt a signal resumed (the recovery completes it with the signal, resumed once). Each job
completes once; ``kue doctor`` finds nothing."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator

import pytest

from kue_core import Queue, doctor
from tests.conftest import wait_for
from tests.integration.processes import Processes

LEASE_MS = 500

# A worker process for jobs of type "t". The handler records "charge" as a step (its side
# effect: a push to <prefix>:charged); then, without signal "go", waits for it; with it, it
# pushes its pid to <prefix>:holding and, in mode "hang", hangs there (to be killed); in mode
# "finish", completes with the signal's payload and how many times it charged.
WORKER = """
import os, signal, sys, threading, time
from kue_core import Queue, WaitForSignal
url, prefix, lease_ms, mode = sys.argv[1:5]
queue = Queue(url, prefix=prefix, lease_ms=int(lease_ms))
stop = threading.Event()
signal.signal(signal.SIGTERM, lambda *a: stop.set())
pid = os.getpid()

def charge():
    queue.client.rpush(prefix + ":charged", pid)
    return {"charged_by": pid}

def handler(job):
    receipt = job.step("charge", charge)
    queue.client.rpush(prefix + ":holding", pid)
    if mode == "hang":
        threading.Event().wait()
    if job.data.get("wait") and "go" not in job.signals:
        raise WaitForSignal("go")
    return {"receipt": receipt, "go": job.signals.get("go"), "by": pid}

queue.process("t", 1, handler)
print("ready", flush=True)
stop.wait()
queue.shutdown(timeout=5)
queue.close()
"""


class Workers(Processes):
    def start(self, mode: str) -> subprocess.Popen[str]:
        argv = [sys.executable, "-c", textwrap.dedent(WORKER), self.redis_url, self.prefix]
        return self.launch([*argv, str(LEASE_MS), mode])


@pytest.fixture
def workers(redis_url: str, prefix: str) -> Iterator[Workers]:
    w = Workers(redis_url, prefix)
    yield w
    w.close()


def _list(queue: Queue, name: str) -> list[str]:
    return queue.client.lrange(f"{queue.prefix}:{name}", 0, -1)  # type: ignore[return-value]


def _kill_holder(queue: Queue, proc: subprocess.Popen[str]) -> None:
    """Kill ``proc`` once it holds the job past its step."""
    wait_for(lambda: str(proc.pid) in _list(queue, "holding"), timeout=15)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)


def _finished(queue: Queue, job_id: int) -> dict[str, object]:
    wait_for(lambda: queue.get_job(job_id).state == "complete", timeout=30)
    done = queue.get_job(job_id)
    assert sum(1 for h in queue.history(job_id) if h.get("state") == "complete") == 1
    wait_for(lambda: doctor.check(queue).findings == [], timeout=15)
    return done.result  # type: ignore[no-any-return]


@pytest.mark.slow
@pytest.mark.single_node  # the scripts run on Cluster in test_signals.py and test_steps.py
def test_a_step_recorded_before_a_crash_is_not_run_again(queue: Queue, workers: Workers) -> None:
    job = queue.create_job("t", {}).save()
    doomed = workers.start("hang")
    _kill_holder(queue, doomed)
    rescuer = workers.start("finish")
    result = _finished(queue, job.id)  # type: ignore[arg-type]
    assert _list(queue, "charged") == [str(doomed.pid)]  # charged once, by the first
    assert result == {"receipt": {"charged_by": doomed.pid}, "go": None, "by": rescuer.pid}


@pytest.mark.slow
@pytest.mark.single_node  # the scripts run on Cluster in test_signals.py and test_steps.py
def test_a_signal_kept_for_a_job_whose_worker_died_is_read_by_the_recovery(
    queue: Queue, workers: Workers
) -> None:
    job = queue.create_job("t", {"wait": True}).save()
    doomed = workers.start("hang")
    wait_for(lambda: str(doomed.pid) in _list(queue, "holding"), timeout=15)
    assert queue.signal(job.id, "go", "now") == "kept"  # type: ignore[arg-type]
    _kill_holder(queue, doomed)
    rescuer = workers.start("finish")
    result = _finished(queue, job.id)  # type: ignore[arg-type]
    assert result == {"receipt": {"charged_by": doomed.pid}, "go": "now", "by": rescuer.pid}
    states = [h["state"] for h in queue.history(job.id)]  # type: ignore[arg-type]
    assert "suspended" not in states  # it never had to wait


@pytest.mark.slow
@pytest.mark.single_node  # the scripts run on Cluster in test_signals.py and test_steps.py
def test_a_worker_killed_in_the_resumed_attempt_loses_nothing(
    queue: Queue, workers: Workers
) -> None:
    job = queue.create_job("t", {"wait": True}).save()
    first = workers.start("finish")
    wait_for(lambda: queue.get_job(job.id).state == "suspended", timeout=15)  # type: ignore[arg-type]
    first.send_signal(signal.SIGTERM)
    first.wait(timeout=15)
    doomed = workers.start("hang")
    assert queue.signal(job.id, "go", {"n": 1}) == "resumed"  # type: ignore[arg-type]
    _kill_holder(queue, doomed)
    rescuer = workers.start("finish")
    result = _finished(queue, job.id)  # type: ignore[arg-type]
    assert result == {"receipt": {"charged_by": first.pid}, "go": {"n": 1}, "by": rescuer.pid}
    assert _list(queue, "charged") == [str(first.pid)]
    resumed = [h for h in queue.history(job.id) if h.get("by") == "signal"]  # type: ignore[arg-type]
    assert len(resumed) == 1
