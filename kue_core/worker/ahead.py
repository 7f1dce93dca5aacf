"""What a slot claims ahead: a worker process of one slot whose handlers are quick, with jobs
waiting, claims its next job while the one it runs runs, so that the reply is there when the
handler returns and a job costs no round trip of its own. An ``async def`` slot on the event
loop keeps its claims in a :class:`Line` (:class:`Lines`, for :mod:`kue_core.worker.tasks`); a
``def`` slot in its own thread posts its report with the claim of a job to come and reads the
reply a job later (:mod:`kue_core.worker.posting`). The job claimed ahead is active under the
process's lease; it goes back to wait behind a handler that turns out slow (``HOLD_S``), and
when the workers stop; a job cancelled or moved meanwhile is not run
(``WorkerState.ended_early``)."""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from ..store.calls import Claim
from .slots import Slot, clock
from .state import WorkerState

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


class Lines:
    """How the slots' tasks on the event loop claim ahead (the only slot of a process, its
    handler ``async def``): ``claim`` claims from a list of types, ``order`` gives a slot's
    types in order, ``give_back`` releases a job claimed but not run, ``alone`` says whether
    the process has one slot."""

    def __init__(
        self,
        state: WorkerState,
        loop: asyncio.AbstractEventLoop,
        claim: Callable[[list[str]], Coroutine[Any, Any, Claim]],
        order: Callable[[Slot], list[str]],
        give_back: Callable[[Claim], Awaitable[None]],
        alone: Callable[[], bool],
    ) -> None:
        self._state = state
        self._loop = loop
        self._claim = claim
        self._order = order
        self._give_back = give_back
        self._alone = alone
        self._letting_go: set[asyncio.Future[None]] = set()  # give-backs on their way

    async def next(self, slot: Slot, line: Line) -> Claim:
        """The first job claimed ahead in ``line``, if any."""
        while line:
            ahead = line.popleft()
            try:
                claimed = await ahead.claim
            except Exception as e:  # the call's jobs come back by their lease
                self._state.report(e)
                continue
            if isinstance(claimed, tuple):
                slot.asked = ahead.asked
                return claimed
            line.more = False
        return None

    async def let_go(self, line: collections.deque[Ahead]) -> None:
        """Give back the jobs claimed ahead in ``line`` (emptied): the slot stops, or its
        handler turned out slow."""
        while line:
            claim = line.popleft().claim
            try:
                claimed = await claim
            except Exception as e:  # its call failed: the jobs in it come back by their lease
                self._state.report(e)
                continue
            await self._give_back(claimed)

    def claim(self, slot: Slot, line: Line) -> None:
        """While a quick slot's handler runs, its next job is claimed (see ``QUICK_S``), when
        jobs were waiting and the process has no other slot (else the slots' calls overlap
        already: see kue_core.worker.dispatch). Not for a child process's handler, whose
        job costs more in its pipes than in a round trip."""
        alone = self._alone() and slot.child is None
        if line or not line.more or not alone or not slot.quick or self._state.stopping.is_set():
            return
        order = self._order(slot)
        if order:
            asked = clock()
            line.append(Ahead(self._loop.create_task(self._claim(order)), asked))

    def append(self, line: Line, report: Coroutine[Any, Any, Claim]) -> None:
        """A report that claims the job after the next, on its way while the next one runs."""
        line.append(Ahead(self._loop.create_task(report), clock()))

    def slow(self, slot: Slot, line: Line) -> None:
        """A handler with a job claimed ahead behind it passed ``HOLD_S``: the job goes back."""
        slot.quick = False
        held = collections.deque(line)
        line.clear()
        task = self._loop.create_task(self.let_go(held))
        self._letting_go.add(task)
        task.add_done_callback(self._letting_go.discard)
