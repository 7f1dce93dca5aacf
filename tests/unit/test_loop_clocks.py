"""The worker loop's timing: its selector waits until a timer to the microsecond (epoll's own
wait counts whole milliseconds, rounded up), and the promoter maps Redis's clock to its own
from halfway through the promotion call."""

from __future__ import annotations

import select
import time
from typing import Any

import pytest

from kue_core.store import calls
from kue_core.worker import loop, promoter


def test_a_wait_until_a_timer_is_kept_to_the_microsecond(monkeypatch: pytest.MonkeyPatch) -> None:
    waits: list[Any] = []
    real = select.select

    def spy(r: Any, w: Any, x: Any, timeout: float) -> Any:
        waits.append((r, timeout))
        return real(r, w, x, timeout)

    monkeypatch.setattr(select, "select", spy)
    selector = loop._Selector()
    fd = selector.fileno()
    try:
        assert selector.select(0.0123) == []  # nothing registered: the wait runs out
        assert selector.select(0) == []  # a look with no wait waits for nothing
    finally:
        selector.close()
    if loop._EPOLL:
        assert waits == [([fd], 0.0123)]
    else:
        assert waits == []


class _Queue:
    keys: Any = None


def test_the_promoters_clock_is_read_halfway_through_its_call(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Sent at 10.000 s and answered at 10.004 s (local), Redis's 5,000 ms stands for 10.002:
    a job due at 5,050 ms is due at 10.002 + 0.050 - 0.0005 (Redis's floored millisecond)."""
    ticks = iter([10.000, 10.004])
    monkeypatch.setattr(time, "monotonic", lambda: next(ticks, 10.004))
    monkeypatch.setattr(calls, "promote", lambda keys, limit: "the call")
    timer = promoter.Promoter(_Queue(), None, print)  # type: ignore[arg-type]
    op = timer.promoting()
    assert next(op) == "the call"  # type: ignore[comparison-overlap]
    with pytest.raises(StopIteration) as ended:
        op.send((0, 5_050, 5_000, -1))  # nothing moved, a job due at 5,050, no schedule
    assert timer._clock[0] == 5_000 and timer._clock[1] == pytest.approx(10.002)
    assert ended.value.value == pytest.approx(10.002 + 0.0495)
    assert timer._due_at("5050") == pytest.approx(10.002 + 0.0495)
