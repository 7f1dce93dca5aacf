"""Which ``def`` handlers are brief (``kue_core.worker.slots``): one that returned within
``BRIEF_S``, or took longer without ever waiting (its thread preempted by the kernel, on a
machine with more to run than CPUs); one that waited (a sleep, I/O) past ``BRIEF_S`` is slow
and puts the process's ``def`` slots in threads of their own for a while."""

from __future__ import annotations

import math
import threading
import time

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


def _run(handler: slots.Handler) -> tuple[bool, float]:
    runner = HandlerRunner(lambda: None, None)  # type: ignore[arg-type]
    slot = Slot(("t",), Reserver(("t",), "ordered"), handler, False, "s")
    job = Job.__new__(Job)
    job.id = 7
    runner.call(slot, Attempt(job, "1", 0), {}, ())
    return slot.brief, runner.slow_at


def test_waits_counts_a_sleep_and_not_a_computation() -> None:
    if slots.waits is not slots._waits_rusage:
        pytest.skip("a thread's own waits are counted on Linux")
    before = slots.waits()
    _spin(2 * BRIEF_S)  # shorter than the interpreter's switch interval: nobody takes over
    spun = slots.waits()
    threading.Event().wait(2 * BRIEF_S)
    assert spun == before and slots.waits() > spun


def test_a_handler_that_waited_past_brief_s_is_slow_and_one_that_did_not_is_brief() -> None:
    assert _run(lambda job: None) == (True, -math.inf)
    brief, slow_at = _run(lambda job: threading.Event().wait(3 * BRIEF_S))
    assert not brief and slow_at > time.monotonic() - 10
    if slots.waits is slots._waits_rusage:  # elsewhere, the time alone decides
        assert _run(lambda job: _spin(3 * BRIEF_S)) == (True, -math.inf)
