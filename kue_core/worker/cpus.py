"""Which CPU a thread runs on, and keeping another thread there: the thread woken to run the
``def`` handlers' brief calls while the worker's loop waits for them
(:class:`kue_core.worker.loop.Handoff`) is woken on the loop's CPU.

The two take turns, never running at once, so they lose nothing by sharing a CPU, and a
thread woken on another CPU costs far more than a switch on the same one, above all in a
virtual machine, where waking an idle CPU goes through the host. Measured on a 2-CPU virtual
machine: two threads handing a lock back and forth, 45 us of CPU a round trip across CPUs
against 12 on one; the hand-off of 8 no-op calls at a time, 9.5 us a call against 5.5-7.2;
16 ``def`` slots of no-op handlers draining, 6.5% more jobs a second (median of 7 interleaved
pairs, every pair better) and 3-5 us less worker CPU a job. Where there is more to run than
CPUs, a thread kept on one CPU may wait there while another is free: 4 processes of 16 such
slots on the same 2 CPUs drained about 5% slower (median of 8 interleaved pairs, 3 of them
faster).

Linux only (``sched_getcpu`` from the C library, :func:`os.sched_setaffinity`); elsewhere,
or once either fails (a CPU taken away from the process, say), nothing is kept anywhere.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
from collections.abc import Callable

_getcpu: Callable[[], int] | None = None
with contextlib.suppress(AttributeError, OSError):
    if hasattr(os, "sched_setaffinity"):
        _getcpu = ctypes.CDLL(None).sched_getcpu


class Cpus:
    """Keeps threads (by native id) on one CPU, or lets them run on any of the process's."""

    def __init__(self) -> None:
        self.on = _getcpu is not None
        #: The CPUs a thread let go runs on: the process's when this was made.
        self._any = os.sched_getaffinity(0) if self.on else set[int]()

    def current(self) -> int:
        """The CPU the calling thread runs on (-1 when not known)."""
        if _getcpu is None or not self.on:
            return -1
        return _getcpu()

    def keep(self, tid: int, cpu: int) -> bool:
        """Let thread ``tid`` run only on ``cpu`` (-1: on any of the process's CPUs); False
        when it could not (and nothing is kept from then on)."""
        if not self.on:
            return False
        try:
            os.sched_setaffinity(tid, self._any if cpu < 0 else {cpu})
        except OSError:  # a CPU no longer the process's, a thread gone: the kernel chooses
            self.on = False
            return False
        return True
