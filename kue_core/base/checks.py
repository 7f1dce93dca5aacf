"""Checks of numeric arguments, with one message format: ``InvalidJob`` before anything is
written. ``True`` and ``False`` are never numbers here, though Python counts them as ints.
``refused_as`` gives the checks of one capability its own subclass of ``InvalidJob``."""

from __future__ import annotations

import contextlib
import functools
import inspect
import math
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from .errors import InvalidJob

_F = TypeVar("_F", bound=Callable[..., Any])


@contextlib.contextmanager
def _raised_as(kind: type[InvalidJob]) -> Iterator[None]:
    try:
        yield
    except InvalidJob as e:
        if isinstance(e, kind):
            raise
        raise kind(str(e)) from None


def refused_as(kind: type[InvalidJob]) -> Callable[[_F], _F]:
    """A decorator: the ``InvalidJob`` a function raises (a generator operation too, in any
    of its steps) is raised as ``kind``, a subclass, with the same message."""

    def wrap(fn: _F) -> _F:
        if inspect.isgeneratorfunction(fn):

            @functools.wraps(fn)
            def op(*args: Any, **kwargs: Any) -> Any:
                with _raised_as(kind):
                    return (yield from fn(*args, **kwargs))

            return op  # type: ignore[return-value]

        @functools.wraps(fn)
        def call(*args: Any, **kwargs: Any) -> Any:
            with _raised_as(kind):
                return fn(*args, **kwargs)

        return call  # type: ignore[return-value]

    return wrap


def integer(
    value: object, name: str, minimum: int | None = None, maximum: int | None = None
) -> int:
    """``value`` if it is an integer within ``minimum..maximum`` (either may be open)."""
    if (
        isinstance(value, bool)
        or not isinstance(value, int)
        or (minimum is not None and value < minimum)
        or (maximum is not None and value > maximum)
    ):
        raise InvalidJob(f"{name} must be {_kind('an integer', minimum, maximum)}, got {value!r}")
    return value


def number(
    value: object,
    name: str,
    minimum: float | None = None,
    maximum: float | None = None,
    unit: str = "",
) -> float:
    """``value`` if it is a finite int or float within ``minimum..maximum`` (either may be
    open); ``unit`` follows the bounds in the message (" ms")."""
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or (minimum is not None and value < minimum)
        or (maximum is not None and value > maximum)
    ):
        kind = _kind("a number", minimum, maximum)
        raise InvalidJob(f"{name} must be {kind}{unit}, got {value!r}")
    return value


def _kind(kind: str, minimum: float | None, maximum: float | None) -> str:
    if minimum is not None and maximum is not None:
        return f"{kind} from {minimum} to {maximum}"
    if minimum is not None:
        return f"{kind} of at least {minimum}"
    if maximum is not None:
        return f"{kind} of at most {maximum}"
    return kind


def job_id(value: object, name: str = "a job id") -> int:
    """A job id given as an int or a string of digits."""
    if isinstance(value, str) and value.isascii() and value.isdigit():
        value = int(value)
    return integer(value, name, 1, 2**63 - 1)
