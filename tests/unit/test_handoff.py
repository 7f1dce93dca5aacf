"""The threads of the loop runtime's ``def`` handlers (``kue_core.worker.loop.Handoff``): a call
that waits ``STALE_S`` behind a blocking one gets a thread of its own, and the loop stops
looking once every waiting call has one."""

from __future__ import annotations

import asyncio
import os
import threading
import time

import pytest

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


def test_the_thread_of_a_turn_runs_on_the_loops_cpu_and_is_let_go_when_it_runs_long() -> None:
    """The thread woken for the loop's turn is kept on the CPU the loop ran on when it woke
    it; a call that is not brief, or one that runs longer than the loop waits (``PARK_S``),
    runs where the kernel likes again (see kue_core.worker.cpus)."""
    from kue_core.worker.cpus import Cpus
    from kue_core.worker.loop import PARK_S, _Selector

    every = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else set()
    if not Cpus().on or len(every) < 2:
        pytest.skip("a thread is kept on a CPU only on Linux with two CPUs or more")

    async def main() -> list[tuple[set[int], set[int]]]:
        loop = asyncio.get_running_loop()
        handoff = Handoff(loop, loop._selector)  # type: ignore[attr-defined]

        def where(long: bool = False) -> tuple[set[int], set[int]]:
            before = os.sched_getaffinity(0)
            deadline = time.monotonic() + 10
            while long and handoff._turn is not None:  # runs on until the loop let it go
                assert time.monotonic() < deadline
                time.sleep(PARK_S / 5)
            return before, os.sched_getaffinity(0)

        async def woken(*args: bool, brief: bool = True) -> tuple[set[int], set[int]]:
            deadline = time.monotonic() + 10
            while handoff._threads and not handoff._idle:  # the thread is back, waiting
                assert time.monotonic() < deadline
                await asyncio.sleep(0.001)
            return await asyncio.wait_for(handoff.run(where, *args, brief=brief), 10)

        try:
            seen = [await woken() for _ in range(3)]
            seen.append(await woken(True))
            seen.append(await woken())
            seen.append(await woken(brief=False))
            return seen
        finally:
            handoff.close()

    loop = asyncio.SelectorEventLoop(_Selector())
    try:
        seen = loop.run_until_complete(main())
    finally:
        loop.close()
    # The first call makes the thread (on any CPU); the next ones wake it for a turn.
    assert seen[0][0] == every
    assert all(len(kept) == 1 and kept <= every for kept, _ in seen[1:3])
    long_before, long_after = seen[3]
    assert len(long_before) == 1 and long_after == every  # let go while it ran
    assert len(seen[4][0]) == 1  # kept again at its next turn
    assert seen[5][0] == every  # woken for a call that is not brief


def test_a_cpu_that_is_not_the_processes_turns_the_keeping_off() -> None:
    """Keeping a thread on a CPU the process may not use fails once, quietly, and nothing is
    kept anywhere from then on (the kernel chooses)."""
    from kue_core.worker.cpus import Cpus

    cpus = Cpus()
    if not cpus.on:
        pytest.skip("a thread is kept on a CPU only on Linux")
    me = threading.get_native_id()
    before = os.sched_getaffinity(0)
    assert cpus.current() in before
    assert not cpus.keep(me, 1 << 20) and not cpus.on
    assert os.sched_getaffinity(0) == before and cpus.current() == -1
    assert not cpus.keep(me, min(before))  # off: nothing kept
    assert os.sched_getaffinity(0) == before
