"""How a slot's thread claims ahead (see :mod:`kue_core.worker.ahead`): the only slot of a
process, whose ``def`` handlers are quick, posts the report of the job it ran with the claim
of a job to come (:meth:`kue_core.store.transport.Transport.post`), and reads the reply once
it has run the next job, on a connection of its own: each reply has a whole job's time to
come back, so that Redis works while the thread does. The call on its way is the slot's
:class:`Streak`. Behind a handler that turns out slow (``HOLD_S``), the event loop takes
the call over, reads its reply in a thread and gives the job it claimed back; the same when
the slot has gone on in a new turn. One slot of a no-op handler: 3,400-3,900 jobs/s a report
at a time, 9,100-10,400 posted (interleaved runs)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, cast

from ..store.calls import Call, Claim, Reported
from ..store.transport import Posted, Transport
from . import ahead
from .slots import Slot, clock
from .state import WorkerState


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
    workers' lock: to the thread, or to the loop behind a slow handler), and the lock of the
    connection it came on, held to send and to read."""

    posting: Posting | None = None
    io: threading.Lock = field(default_factory=threading.Lock)
    #: The loop looks at this streak every ``HOLD_S`` (see Posts._watching).
    watched: bool = False


class Posts:
    """The calls the ``def`` slots' threads of one worker process post ahead (see the
    module): ``alone`` says whether the process has one slot; ``loop`` is the worker's event
    loop, where ``give_back`` releases a job claimed but not run."""

    def __init__(
        self,
        scripts: Transport,
        state: WorkerState,
        alone: Callable[[], bool],
        loop: asyncio.AbstractEventLoop,
        give_back: Callable[[Claim], Awaitable[None]],
    ) -> None:
        self._scripts = scripts
        self._state = state
        self._alone = alone
        self._loop = loop
        self._give_back = give_back
        self._letting_go: set[asyncio.Future[None]] = set()  # give-backs on their way
        self._watched: set[Streak] = set()  # the streaks the loop looks at (see _watching)

    # -- the slot's thread --------------------------------------------------------------------
    def ok(self, slot: Slot) -> bool:
        """Whether the slot claims ahead: its last handler was quick, and it is the process's
        only slot (else the others' calls fill Redis's time already)."""
        return slot.quick and self._alone() and not self._state.stopping.is_set()

    def post(self, slot: Slot, streak: Streak, call: Call[Any]) -> None:
        """Post the claim ``call``; the loop watches the streak from now."""
        self._publish(slot, streak, self._send(streak, call, "", None))

    def post_behind(
        self, slot: Slot, streak: Streak, call: Call[Any], reports: str, behind: Posting
    ) -> Claim:
        """Post ``call`` (the report of a job of type ``reports`` that claims) behind the call
        before it, then read that one's reply: its job, next. (In that order, so that the loop
        cannot take the new call over while the one before it is still to be read.)"""
        posting = self._send(streak, call, reports, behind)
        claimed = self.next(slot, streak, behind)
        self._publish(slot, streak, posting)
        return claimed

    def _send(
        self, streak: Streak, call: Call[Any], reports: str, behind: Posting | None
    ) -> Posting:
        asked = clock()
        with streak.io:
            posted = self._scripts.post(call, None if behind is None else behind.posted)
        return Posting(posted, asked, reports)

    def _publish(self, slot: Slot, streak: Streak, posting: Posting) -> None:
        with self._state.lock:
            streak.posting = posting
            watch, streak.watched = not streak.watched, True
        if watch:
            self._loop.call_soon_threadsafe(self._watching, slot, slot.turn, streak)

    def taken(self, streak: Streak) -> Posting | None:
        """The streak's call on its way, now the thread's (unless the loop took it)."""
        with self._state.lock:
            posting, streak.posting = streak.posting, None
        return posting

    def next(self, slot: Slot, streak: Streak, posting: Posting | None) -> Claim:
        """The job ``posting`` claimed, next: the slot asked for it when it was posted."""
        if posting is None:
            return None
        claimed = self.take(streak, posting)
        slot.asked = posting.asked
        return claimed

    def take(self, streak: Streak, posting: Posting) -> Claim:
        """The job ``posting`` claimed (or why there was none), read; a report's completion
        is tallied. A call that failed is reported: its jobs come back by their lease."""
        try:
            with streak.io:
                got = self._scripts.take(posting.posted)
        except Exception as e:
            self._state.report(e)
            return None
        if isinstance(got, Reported):
            if got.tally is not None:  # see kue_core.features.tally
                self._state.tally.add(posting.reports, *got.tally)
            return got.next_job
        return cast(Claim, got)

    # -- the event loop -----------------------------------------------------------------------
    def _watching(self, slot: Slot, turn: int, streak: Streak) -> None:
        """Every ``HOLD_S`` while the streak has a call on its way: taken over behind a
        handler that has run that long, or once the slot has gone on in a new turn."""
        with self._state.lock:
            posting, attempt = streak.posting, slot.attempt
            if posting is None:  # the streak ended (or is between two jobs): watched no more
                streak.watched = False
                self._watched.discard(streak)
                return
            self._watched.add(streak)
            late = attempt is not None and time.monotonic() - attempt.began >= ahead.HOLD_S
            if late or slot.turn != turn:
                streak.posting = None
            else:
                posting = None
        if posting is not None:
            task = self._loop.create_task(self._let_go(streak, posting))
            self._letting_go.add(task)
            task.add_done_callback(self._letting_go.discard)
        self._loop.call_later(ahead.HOLD_S, self._watching, slot, turn, streak)

    async def stop(self) -> None:
        """Give back the jobs the slots' threads claimed ahead: the workers stop, whatever
        the handlers still running do."""
        with self._state.lock:
            taken = [(s, s.posting) for s in self._watched if s.posting is not None]
            for streak, _ in taken:
                streak.posting = None
        for streak, posting in taken:
            assert posting is not None
            await self._let_go(streak, posting)

    async def _let_go(self, streak: Streak, posting: Posting) -> None:
        """Give back the job a call taken over claimed: its reply read in a thread (the
        connection blocks)."""
        await self._give_back(await asyncio.to_thread(self.take, streak, posting))
