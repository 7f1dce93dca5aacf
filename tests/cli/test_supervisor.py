"""``kue worker --processes P``: P worker processes under one supervisor that restarts the
ones that die and stops them all gracefully."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator

import psutil
import pytest

from kue_core import Queue
from tests.cli.running import Kue
from tests.conftest import wait_for

pytestmark = [pytest.mark.timeout(120), pytest.mark.single_node]


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie waiting to be reaped does not)."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


class Supervised(Kue):
    """A ``kue worker --processes`` run; remembers every child pid it saw."""

    children: list[int]

    def __init__(self, *args: str) -> None:
        super().__init__(*args)
        self.children = []

    def live_children(self) -> list[int]:
        try:
            found = [p.pid for p in psutil.Process(self.proc.pid).children()]
        except psutil.NoSuchProcess:
            found = []
        self.children += [p for p in found if p not in self.children]
        return found


@pytest.fixture
def run() -> Iterator[list[Supervised]]:
    started: list[Supervised] = []
    yield started
    for kue in started:
        kue.kill()
        for pid in kue.children:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)


def supervised(
    run: list[Supervised], redis_url: str, prefix: str, handler: str, *args: str
) -> Supervised:
    kue = Supervised(
        "worker", f"tests.cli.handlers:{handler}", "--redis", redis_url, "--prefix", prefix, *args
    )
    run.append(kue)
    return kue


def test_processes_share_the_work_and_stop_together_on_sigterm(
    run: list[Supervised], redis_url: str, prefix: str, queue: Queue
) -> None:
    kue = supervised(run, redis_url, prefix, "echo", "-t", "double", "-n", "2", "--processes", "3")
    pids = wait_for(lambda: len(queue.workers()) == 3 and {w["pid"] for w in queue.workers()})
    assert pids == set(kue.live_children()) and kue.proc.pid not in pids
    assert all(w["types"] == {"double": 2} for w in queue.workers())
    jobs = queue.save_many(queue.create_job("double", {"n": n}) for n in range(300))
    wait_for(lambda: queue.count("complete") == 300, timeout=30)
    results = [queue.get_job(j.id).result for j in jobs]
    assert [r["twice"] for r in results] == [n * 2 for n in range(300)]
    assert {r["pid"] for r in results} <= pids
    # The URL reached the children in their environment, not on their command line.
    for pid in pids:
        assert redis_url not in " ".join(psutil.Process(pid).cmdline())

    kue.send(signal.SIGTERM)
    assert kue.wait() == 0, kue.output
    assert "SIGTERM: stopping 3 worker processes" in kue.output
    assert kue.output.count("stopped") >= 4  # each child, then the supervisor
    assert not [p for p in pids if alive(p)]
    assert queue.workers() == []


def test_a_killed_process_is_replaced(
    run: list[Supervised], redis_url: str, prefix: str, queue: Queue
) -> None:
    kue = supervised(run, redis_url, prefix, "echo", "-t", "double", "--processes", "2")
    first = wait_for(lambda: len(kue.live_children()) == 2 and kue.live_children())
    wait_for(lambda: len(queue.workers()) == 2)
    os.kill(first[0], signal.SIGKILL)
    kue.wait_for_line(rf"worker process \d \(pid {first[0]}\) was killed by SIGKILL")
    now = wait_for(
        lambda: (
            len(kue.live_children()) == 2
            and first[0] not in kue.live_children()
            and kue.live_children()
        )
    )
    assert first[1] in now
    # The new process works: it registers, and jobs complete.
    wait_for(lambda: {w["pid"] for w in queue.workers()} >= set(now), timeout=20)
    queue.save_many(queue.create_job("double", {"n": n}) for n in range(50))
    wait_for(lambda: queue.count("complete") == 50, timeout=20)
    kue.ctrl_c()  # the terminal's Ctrl-C reaches the supervisor only; it passes it on once
    assert kue.wait() == 0, kue.output
    assert "SIGINT: stopping 2 worker processes" in kue.output
    assert "again" not in kue.output


def test_running_jobs_finish_before_the_processes_exit(
    run: list[Supervised], redis_url: str, prefix: str, queue: Queue
) -> None:
    kue = supervised(run, redis_url, prefix, "sleepy", "-t", "nap", "--processes", "2")
    wait_for(lambda: len(queue.workers()) == 2)
    jobs = [queue.create_job("nap", {"seconds": 1.5}).save() for _ in range(2)]
    wait_for(lambda: queue.count("active") == 2)
    kue.send(signal.SIGTERM)
    assert kue.wait() == 0, kue.output
    assert [queue.get_job(j.id).state for j in jobs] == ["complete", "complete"]


def test_a_second_signal_stops_the_processes_at_once(
    run: list[Supervised], redis_url: str, prefix: str, queue: Queue
) -> None:
    kue = supervised(run, redis_url, prefix, "sleepy", "-t", "nap", "--processes", "2")
    wait_for(lambda: len(queue.workers()) == 2)
    queue.create_job("nap", {"seconds": 60}).save()
    wait_for(lambda: queue.count("active") == 1)
    kue.send(signal.SIGTERM)
    kue.wait_for_line("SIGTERM: stopping")
    kue.send(signal.SIGTERM)
    assert kue.wait(timeout=20) == 1, kue.output
    assert not [p for p in kue.children if alive(p)]


def test_the_processes_end_when_the_supervisor_is_killed(
    run: list[Supervised], redis_url: str, prefix: str, queue: Queue
) -> None:
    kue = supervised(run, redis_url, prefix, "echo", "-t", "double", "--processes", "2")
    children = wait_for(lambda: len(kue.live_children()) == 2 and kue.live_children())
    wait_for(lambda: len(queue.workers()) == 2)
    kue.send(signal.SIGKILL)
    kue.wait()
    # Each child got SIGTERM from the kernel as its parent died, and shut down gracefully.
    wait_for(lambda: not [p for p in children if alive(p)], timeout=20)
    wait_for(lambda: queue.workers() == [], timeout=20)
