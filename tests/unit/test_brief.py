"""Which ``def`` handlers are brief (``kue_core.worker.slots``): one that returned within
``BRIEF_S``, or took longer without ever waiting (its thread preempted by the kernel, on a
machine with more to run than CPUs); one that waited (a sleep, I/O) past ``BRIEF_S`` is slow
and puts the process's ``def`` slots in threads of their own for a while."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable

import pytest

from kue_core import Job
from kue_core.worker import slots
from kue_core.worker.attempt import Attempt
from kue_core.worker.reserve import Reserver
from kue_core.worker.slots import BRIEF_S, HandlerRunner, Slot


def _spin(seconds: float) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass


def _runner() -> tuple[HandlerRunner, Callable[[slots.Handler], bool]]:
    runner = HandlerRunner(lambda: None, None)  # type: ignore[arg-type]
    job = Job.__new__(Job)
    job.id = 7

    def run(handler: slots.Handler) -> bool:
        slot = Slot(("t",), Reserver(("t",), "ordered"), handler, False, "s")
        runner.call(slot, Attempt(job, "1", 0), {}, ())
        return slot.brief

    return runner, run


def test_waits_counts_a_sleep_and_not_a_computation() -> None:
    if slots.waits is not slots._waits_rusage:
        pytest.skip("a thread's own waits are counted on Linux")
    before = slots.waits()
    _spin(2 * BRIEF_S)  # shorter than the interpreter's switch interval: nobody takes over
    spun = slots.waits()
    threading.Event().wait(2 * BRIEF_S)
    assert spun == before and slots.waits() > spun


def _slow(job: Job) -> None:
    threading.Event().wait(3 * BRIEF_S)


def test_a_handler_that_waited_past_brief_s_is_slow_and_one_that_did_not_is_brief() -> None:
    runner, run = _runner()
    assert run(lambda job: None)
    assert not run(_slow)
    if slots.waits is slots._waits_rusage:  # elsewhere, the time alone decides
        assert run(lambda job: _spin(3 * BRIEF_S))
    assert runner.slow_at == -math.inf  # once is a hiccup


def test_the_slots_go_in_threads_when_a_handler_is_slow_again_soon() -> None:
    runner, run = _runner()
    assert not run(_slow) and runner.slow_at == -math.inf
    for _ in range(slots.SLOW_AGAIN):
        run(lambda job: None)
    assert not run(_slow) and runner.slow_at == -math.inf  # too long after the last
    assert not run(_slow) and runner.slow_at > time.monotonic() - 10
