"""Checks of numeric arguments, with one message format: ``InvalidJob`` before anything is
written. ``True`` and ``False`` are never numbers here, though Python counts them as ints."""

from __future__ import annotations

import math

from .errors import InvalidJob


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
