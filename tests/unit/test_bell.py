"""The keeper's bell, awaited on an event loop (runtime="loop") and rung from any thread."""

from __future__ import annotations

import asyncio
import threading
import time

from kue_core.worker.state import Bell


def test_a_ring_from_another_thread_wakes_the_loop_keeper() -> None:
    bell = Bell()

    async def keeper() -> tuple[float, bool, bool]:
        bell.on(asyncio.get_running_loop())
        assert bell.beat_asked()  # the first round registers at once
        bell.clear()
        start = time.monotonic()
        threading.Timer(0.05, bell.ring, kwargs={"beat": True}).start()
        await bell.wait_async(10)
        woken = time.monotonic() - start
        asked = bell.beat_asked()
        bell.clear()
        start = time.monotonic()
        await bell.wait_async(0.05)  # no ring since the clear: it waits its timeout
        return woken, asked, time.monotonic() - start >= 0.04

    woken, asked, waited = asyncio.run(keeper())
    assert woken < 5 and asked and waited


def test_a_ring_on_the_loop_before_the_wait_is_not_lost() -> None:
    bell = Bell()

    async def keeper() -> float:
        bell.on(asyncio.get_running_loop())
        bell.clear()
        bell.ring()  # from the loop itself, between the round's start and its wait
        start = time.monotonic()
        await bell.wait_async(10)
        return time.monotonic() - start

    assert asyncio.run(keeper()) < 1


def test_a_ring_after_the_loop_closed_is_harmless() -> None:
    bell = Bell()
    loop = asyncio.new_event_loop()
    bell.on(loop)
    loop.close()
    bell.ring(beat=True)  # a def handler's thread returning after shutdown
    assert bell.beat_asked()
