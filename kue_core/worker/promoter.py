"""The promotion timer of a worker process: moves due delayed jobs to inactive
(``promote.lua``) and fires due schedules (:mod:`kue_core.jobs.schedules`). It sleeps until the
next due time of either, and is woken at once, on the promote channel, when a job or a schedule
due sooner is saved. It is a task of the worker's event loop (:meth:`Promoter.run_async`),
which runs the operation :meth:`Promoter.promoting` on the loop's transport."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

import redis
import redis.asyncio

from .. import defaults
from ..base.retry import Pauses
from ..jobs import schedules
from ..store import calls
from ..store.aio_transport import AsyncTransport
from ..store.calls import Op

#: Redis's clock comes in whole milliseconds, floored (``now_ms``): the time it stands for is
#: half a millisecond later on average, which the next due time is reckoned from. A timer
#: then fires about when the job is due (the wait for it rounds up to the millisecond): a
#: delayed job's start lag p50 1.9-2.3 -> 1.1-1.5 ms with threads, 2.5-2.6 -> 1.9-2.1 ms on
#: the loop, and one promotion call a job as before (interleaved runs).
_FLOORED_MS = 0.5


class Owner(schedules.Timer, Protocol):
    """What the promotion timer uses of its queue."""


class Promoter:
    """Runs until ``closed`` is set; errors go to ``report``."""

    def __init__(
        self, queue: Owner, closed: threading.Event, report: Callable[[Exception], None]
    ) -> None:
        self.queue = queue
        self._closed = closed
        self._report = report
        self._clock = (0, 0.0)  # (server ms, local monotonic) of the last promotion call

    async def run_async(self, client: redis.asyncio.Redis, transport: AsyncTransport) -> None:
        """As a task of the worker's event loop, on its client and transport."""
        pauses = Pauses()
        while not self._closed.is_set():
            pubsub: Any = client.pubsub(ignore_subscribe_messages=True)
            try:
                await pubsub.subscribe(self.queue.keys.promote)
                while not self._closed.is_set():
                    wake = await transport.drive(self.promoting())
                    while not self._closed.is_set():
                        left = wake - time.monotonic()
                        if left <= 0:
                            break
                        msg = await pubsub.get_message(ignore_subscribe_messages=True, timeout=left)
                        if msg is not None:
                            wake = min(wake, self._due_at(msg["data"]))
                    pauses.reset()
            except (redis.RedisError, OSError) as e:
                self._report(e)
                await asyncio.sleep(pauses.next())
            finally:
                await pubsub.aclose()

    def promoting(self) -> Op[float]:
        """Promote what is due (an operation either transport runs); return the monotonic
        time of the next due job or schedule."""
        while True:
            asked = time.monotonic()
            moved, next_due, now, schedule = yield calls.promote(
                self.queue.keys, defaults.SWEEP_LIMIT
            )
            # Server ms <-> local monotonic, for _due_at: Redis read its clock between the
            # call's sending and its answer's coming back, halfway on average.
            self._clock = (now, (asked + time.monotonic()) / 2)
            if 0 <= schedule <= now:  # see kue_core.jobs.schedules
                schedule = yield from schedules.firing(self.queue, now)
            if moved < defaults.SWEEP_LIMIT:
                break
        due = [d for d in (next_due, schedule) if d >= 0]
        if not due:
            return time.monotonic() + defaults.PROMOTE_MAX_WAIT
        wait: float = min(max(0, min(due) - now - _FLOORED_MS) / 1000, defaults.PROMOTE_MAX_WAIT)
        return self._clock[1] + wait

    def _due_at(self, data: str) -> float:
        """Local monotonic time of a due time (server ms) heard on the promote channel."""
        try:
            due = int(data)
        except (TypeError, ValueError):
            return time.monotonic()
        server_now, local_now = self._clock
        return local_now + max(0, due - server_now - _FLOORED_MS) / 1000
