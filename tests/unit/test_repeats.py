"""The worker's log of Redis errors during an outage: the first at once, then a line with the
count every window, not a line a try (kue_core.base.retry.Repeats), on a clock of the test's."""

from __future__ import annotations

import threading

from kue_core.base.retry import Repeats


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_an_error_is_said_once_then_counted_every_window() -> None:
    clock = Clock()
    repeats = Repeats(window=10.0, clock=clock)
    said = []
    for tenth in range(401):  # an outage of 40 s, a try every 0.1 s
        clock.now = 100 + tenth / 10
        line = repeats.note("Redis unreachable (Connection refused); retrying")
        if line is not None:
            said.append(line)
    assert said[0] == "Redis unreachable (Connection refused); retrying"
    assert (
        said[1] == "Redis unreachable (Connection refused); retrying (repeated 100 times in 10 s)"
    )
    assert len(said) == 5


def test_another_error_is_said_at_once_and_a_quiet_one_again_later() -> None:
    clock = Clock()
    repeats = Repeats(window=10.0, clock=clock)
    assert repeats.note("a") == "a"
    assert repeats.note("b") == "b"
    assert repeats.note("a") is None
    clock.now += 60
    assert repeats.note("a") == "a (repeated 2 times in 60 s)"  # the one unsaid, and this
    assert repeats.note("b") == "b"  # said once, then quiet for a minute: said anew
    assert repeats.note("b") is None


def test_texts_of_one_kind_count_together() -> None:
    clock = Clock()
    repeats = Repeats(window=10.0, clock=clock)
    assert repeats.note("down (reset)", "down") == "down (reset)"
    assert repeats.note("down (refused)", "down") is None
    clock.now += 10
    assert repeats.note("down (refused)", "down") == "down (refused) (repeated 2 times in 10 s)"
    assert repeats.note("other") == "other"


def test_threads_share_one_count() -> None:
    clock = Clock()
    repeats = Repeats(window=10.0, clock=clock)
    said: list[str | None] = []
    threads = [
        threading.Thread(target=lambda: said.extend(repeats.note("x") for _ in range(100)))
        for _ in range(8)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    clock.now += 10
    assert [s for s in said if s is not None] == ["x"]
    assert repeats.note("x") == "x (repeated 800 times in 10 s)"


def test_the_end_of_an_outage_is_said_once_with_its_count() -> None:
    clock = Clock()
    repeats = Repeats(window=10.0, clock=clock)
    assert repeats.over("down", "back") is None  # no error noted: nothing to say
    assert repeats.note("down (reset)", "down") == "down (reset)"
    for _ in range(4):
        clock.now += 0.5
        assert repeats.note("down (refused)", "down") is None
    clock.now += 0.5
    assert repeats.over("down", "back") == "back (after 5 errors in 2.5 s)"
    assert repeats.over("down", "back") is None  # said once
    assert repeats.note("down (refused)", "down") == "down (refused)"  # a new outage: at once
    assert repeats.over("down", "back") == "back (after 1 error in 0.0 s)"


def test_the_end_of_one_kind_leaves_the_others_counting() -> None:
    clock = Clock()
    repeats = Repeats(window=10.0, clock=clock)
    assert repeats.note("down", "down") == "down"
    assert repeats.note("other") == "other"
    assert repeats.over("down", "back") == "back (after 1 error in 0.0 s)"
    assert repeats.note("other") is None
