"""The kinds of bad input: each capability's own subclass of ``InvalidJob`` (so that a caller
catching ``InvalidJob`` still catches it), given by ``checks.refused_as`` to a function or to
an operation in any of its steps, with the message unchanged."""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import pytest

from kue_core import (
    InvalidJob,
    InvalidLimit,
    InvalidSchedule,
    InvalidTransition,
    InvalidWorkerConfig,
)
from kue_core.base import checks


@pytest.mark.parametrize("kind", [InvalidSchedule, InvalidLimit, InvalidWorkerConfig])
def test_each_kind_is_an_invalid_job(kind: type[InvalidJob]) -> None:
    assert issubclass(kind, InvalidJob) and issubclass(kind, ValueError)


def test_a_function_raises_its_kind_with_the_same_message() -> None:
    @checks.refused_as(InvalidSchedule)
    def define(n: object) -> int:
        return checks.integer(n, "limit", 1)

    assert define(3) == 3
    with pytest.raises(InvalidSchedule, match=r"^limit must be an integer of at least 1, got 0$"):
        define(0)


def test_an_operation_raises_its_kind_in_any_step() -> None:
    """Before its first step, and from a reply thrown into it (a script's KUE_INVALID)."""

    @checks.refused_as(InvalidLimit)
    def op(n: object) -> Generator[str, Any, int]:
        checks.integer(n, "concurrency", 1)
        reply = yield "call"
        return int(reply)

    with pytest.raises(InvalidLimit, match="concurrency"):
        next(op(0))
    step = op(1)
    assert next(step) == "call"
    with pytest.raises(StopIteration) as done:
        step.send("7")
    assert done.value.value == 7
    step = op(1)
    next(step)
    with pytest.raises(InvalidLimit, match=r"^from the script$"):
        step.throw(InvalidJob("from the script"))


def test_other_errors_and_the_kind_itself_pass_unchanged() -> None:
    @checks.refused_as(InvalidSchedule)
    def fail(error: Exception) -> None:
        raise error

    own = InvalidSchedule("own")
    with pytest.raises(InvalidSchedule) as caught:
        fail(own)
    assert caught.value is own
    with pytest.raises(InvalidTransition):
        fail(InvalidTransition("a state"))
    with pytest.raises(KeyError):
        fail(KeyError("x"))
