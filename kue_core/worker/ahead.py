"""What a slot claims ahead: a worker process of one slot whose handlers are quick, with jobs
waiting, claims its next job while the one it runs runs, so that the reply is there when the
handler returns and a job costs no round trip of its own. An ``async def`` slot on the event
loop keeps its claims in a :class:`Line` (:mod:`kue_core.worker.tasks`); a ``def`` slot in
its own thread posts its report with the claim of a job to come and reads the reply a job
later (:mod:`kue_core.worker.posting`). The job claimed ahead is active under the process's
lease; it goes back to wait behind a handler that turns out slow (``HOLD_S``), and when the
workers stop; a job cancelled or moved meanwhile is not run (``WorkerState.ended_early``)."""

from __future__ import annotations

import asyncio
import collections
from dataclasses import dataclass

from ..store.calls import Claim

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
