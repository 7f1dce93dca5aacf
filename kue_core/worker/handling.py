"""How a slot's handler runs on the worker's event loop (:mod:`kue_core.worker.tasks`): an
``async def`` one with no plain middleware awaited in the slot's own task, which an attempt
ended from outside cancels while the handler runs (and only then); any other (a ``def``
handler, a process-isolated one's child, an ``async def`` one wrapped in a plain middleware)
handed to the loop's threads (:class:`kue_core.worker.loop.Handoff`)."""

from __future__ import annotations

import asyncio
import time

from ..jobs.job import to_json
from . import middleware as mw
from .attempt import Attempt
from .loop import EventLoop
from .outcome import Done, Outcome, failure
from .slots import BRIEF_S, HandlerRunner, Slot


async def handle(
    loop: EventLoop,
    runner: HandlerRunner,
    slot: Slot,
    attempt: Attempt,
    fields: dict[str, str],
    middleware: tuple[mw.Middleware, ...],
) -> Outcome:
    """Run ``slot``'s handler on the attempt's job, wrapped in ``middleware``."""
    if not slot.is_async or slot.child is not None or not all(map(mw.is_async, middleware)):
        # A brief call takes turns with the loop; one whose slot's last call took long has
        # a thread to itself, beside the others.
        began = time.monotonic()
        try:
            call = runner.call  # which times a def handler itself, in its thread
            return await loop.handoff.run(call, slot, attempt, fields, middleware, brief=slot.brief)
        finally:
            if slot.child is not None:
                slot.brief = time.monotonic() - began < BRIEF_S
    handler = runner.async_handler(slot, middleware)
    aio = loop.loop
    me = asyncio.current_task(aio)  # (given the loop: no getpid() to find it)
    assert me is not None
    # Both on the loop, so a stop cannot land once the handler has returned.
    running, stopped = True, False

    def stop() -> None:
        nonlocal stopped
        if running:
            stopped = True
            me.cancel()

    attempt.stop_with(lambda: aio.call_soon_threadsafe(stop))
    try:
        return Done(to_json(await handler(attempt.job), "result"))
    except asyncio.CancelledError as e:
        if not stopped:  # not ours: the loop is closing
            raise
        return failure(e)  # the attempt was ended from outside: reported by whoever did
    except BaseException as e:  # the handler's failure, whatever it is, fails the attempt
        return failure(e)
    finally:
        running = False
        if stopped:  # the cancel is spent (or the handler swallowed it): the slot goes on
            me.uncancel()
