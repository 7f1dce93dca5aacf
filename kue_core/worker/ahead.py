"""What a slot claims ahead: a worker process of one slot whose handlers are quick, with jobs
waiting, claims its next job while the one it runs runs, so that the reply is there when the
handler returns and a job costs no round trip of its own. An ``async def`` slot on the event
loop keeps its claims in a :class:`Line` (:mod:`kue_core.worker.tasks`); a ``def`` slot in
its own thread posts its report with the next claim and reads the reply once it has the next
job ready, a :class:`Streak` (:mod:`kue_core.worker.serving`). The job claimed ahead is
active under the process's lease; it goes back to wait behind a handler that turns out slow
(``HOLD_S``), and when the workers stop; a job cancelled or moved meanwhile is not run
(``WorkerState.ended_early``)."""

from __future__ import annotations

import asyncio
import collections
import threading
from dataclasses import dataclass, field
from typing import Any

from ..store.calls import Claim
from ..store.transport import Posted

#: A slot whose last handler returned within this long (s) claims its next job while the
#: job it runs now runs: the reply is there when the handler returns, and a job costs no
#: round trip of its own (docs/benchmarks.md: the one-slot drain).
QUICK_S = 0.005
#: The longest a job claimed ahead waits behind a handler that turned out slow: then it is
#: given back (no attempt counted), for another slot or process to run.
HOLD_S = 0.02


@dataclass(eq=False)
class Ahead:
    """A slot's job claimed ahead: the claim's task (a completion's, which claims in the
    same call, or a claim's), and when it was sent."""

    claim: asyncio.Future[Claim]
    asked: tuple[float, float]


class Line(collections.deque[Ahead]):
    """A slot's jobs claimed ahead, in turn. ``more``: its last job came with others
    waiting (a report's claim found one), so that claiming ahead is likely to find one too;
    an idle slot's jobs, which come one by one, are not claimed ahead (a claim for nothing)."""

    more = False


@dataclass(eq=False)
class Posting:
    """A call a slot's thread posted: a claim, or the report of a job of type ``reports``
    that claims; sent at ``asked`` (see ``Slot.asked``)."""

    posted: Posted[Any]
    asked: tuple[float, float]
    reports: str = ""


@dataclass(eq=False)
class Streak:
    """A slot's thread's claim ahead: the call on its way (``posting``, handed over under the
    workers' lock: to the thread, or to the loop, which gives its job back behind a slow
    handler), and the lock of the connection it came on, held to send and to read."""

    posting: Posting | None = None
    io: threading.Lock = field(default_factory=threading.Lock)
    #: The loop looks at this streak every ``HOLD_S`` (see LoopServing.watch).
    watched: bool = False
