"""The threads of the loop runtime's ``def`` handlers (``kue_core.worker.loop.Handoff``): a call
that waits ``STALE_S`` behind a blocking one gets a thread of its own, and the loop stops
looking once every waiting call has one."""

from __future__ import annotations

import asyncio
import threading
import time

from kue_core.worker.loop import STALE_S, Handoff


def test_calls_behind_a_blocking_one_get_threads_and_the_looks_then_stop() -> None:
    release = threading.Event()
    names: dict[str, str] = {}

    def call(name: str, block: bool) -> str:
        names[name] = threading.current_thread().name
        if block:
            release.wait(30)
        return name

    async def main() -> tuple[list[str], int, int, int, bool, int, int]:
        handoff = Handoff(asyncio.get_running_loop())
        looks = [0]
        watch = handoff._watch

        def counted() -> None:
            looks[0] += 1
            watch()

        handoff._watch = counted  # type: ignore[method-assign]
        try:
            blocked = handoff.run(call, "a", True)
            deadline = time.monotonic() + 10
            while "a" not in names or handoff._watching:  # its thread runs it, looks ended
                assert time.monotonic() < deadline
                await asyncio.sleep(0.001)
            # Handed while a's thread is awake: only a look at the stale calls wakes another,
            # and one look is enough for a call that has a thread woken for it.
            looks[0] = 0
            one = await asyncio.wait_for(handoff.run(call, "b", False), 10)
            while handoff._watching:
                assert time.monotonic() < deadline
                await asyncio.sleep(0.001)
            first = looks[0]
            behind = [handoff.run(call, name, False) for name in ("c", "d", "e")]
            done = [one, *await asyncio.wait_for(asyncio.gather(*behind), 10)]
            assert not blocked.done()
            while handoff._watching:  # the last look finds no call left without a thread
                assert time.monotonic() < deadline
                await asyncio.sleep(0.001)
            still = looks[0]
            await asyncio.sleep(20 * STALE_S)  # a window: a blocking handler alone costs no look
            after = looks[0]
            waiting = blocked.done()
            release.set()
            await asyncio.wait_for(blocked, 10)
            return done, first, still, after, waiting, handoff._covered, len(handoff._calls)
        finally:
            release.set()
            handoff.close()

    done, first, still, after, waiting, covered, calls = asyncio.run(main())
    assert done == ["b", "c", "d", "e"] and not waiting
    assert names["a"] not in {names[name] for name in done}
    assert first == 1
    assert 1 <= still == after
    assert covered == calls == 0


def test_the_loop_takes_turns_with_the_thread_and_still_keeps_time() -> None:
    """With the loop's selector the loop waits for the calls' end rather than for events, at
    most ``PARK_S`` at a time: quick calls end in order, each thread's wake-up put off until
    the loop would sleep, calls handed over together all end, and a timer on the
    loop fires on time while a call blocks (the loop goes back to its events)."""
    from kue_core.worker.loop import PARK_S, _Selector

    release = threading.Event()

    def call(n: int) -> int:
        if n < 0:
            release.wait(30)
        return n

    async def main() -> tuple[list[int], float, bool, int]:
        loop = asyncio.get_running_loop()
        handoff = Handoff(loop, loop._selector)  # type: ignore[attr-defined]
        try:
            quick = [await asyncio.wait_for(handoff.run(call, n), 10) for n in range(50)]
            together = [handoff.run(call, n) for n in range(8)]  # the loop let go once all ran
            assert await asyncio.wait_for(asyncio.gather(*together), 10) == list(range(8))
            blocked = handoff.run(call, -1)
            began = time.monotonic()
            fired = loop.create_future()
            loop.call_later(4 * PARK_S, fired.set_result, None)
            await asyncio.wait_for(fired, 10)
            late = time.monotonic() - began - 4 * PARK_S
            waiting = blocked.done()
            release.set()
            ended = await asyncio.wait_for(blocked, 10)
            return quick, late, waiting, ended
        finally:
            release.set()
            handoff.close()

    loop = asyncio.SelectorEventLoop(_Selector())
    try:
        quick, late, waiting, ended = loop.run_until_complete(main())
    finally:
        loop.close()
    assert quick == list(range(50)) and ended == -1 and not waiting
    # Not held up by the call, which blocks for 30 s: the timer fired while it still ran.
    # (How late it fires is a benchmark's to say: under CI's load it was 71 ms once.)
    assert late < 5.0
