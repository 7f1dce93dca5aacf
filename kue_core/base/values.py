"""Checked values of a job: its type, priority, state, times and JSON (pure; no Redis).
``kue_core.jobs.job`` builds on them; ``kue_http`` and ``kue_cli`` use them through ``kue_core``."""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from .. import defaults
from . import checks
from .errors import InvalidJob
from .states import PRIORITIES, PRIORITY_LIMIT, STATES, JobState

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
# One encoder for every call: ``json.dumps`` with options builds a new one each time.
_JSON = json.JSONEncoder(separators=(",", ":"), allow_nan=False)
# Types that passed validation, so the common case (a handful of types) is a set lookup.
_VALID_TYPES: set[str] = set()
_VALID_TYPES_MAX = 1024


# -- validation (pure) -------------------------------------------------------------------
#: Types whose Kue wake-up list (``<prefix>:<type>:jobs``) is another key of the layout.
_RESERVED_TYPES = frozenset({"unique"})


def validate_type(job_type: object) -> str:
    if job_type.__class__ is str and job_type in _VALID_TYPES:
        return job_type
    if not isinstance(job_type, str):
        raise InvalidJob(f"type must be a string, got {type(job_type).__name__}")
    if not job_type.strip():
        raise InvalidJob("type must not be empty")
    if len(job_type) > defaults.MAX_TYPE_LENGTH:
        raise InvalidJob(f"type must be at most {defaults.MAX_TYPE_LENGTH} characters")
    if _CONTROL.search(job_type):
        raise InvalidJob("type must not contain control characters")
    if job_type in _RESERVED_TYPES:
        raise InvalidJob(
            f"type {job_type!r} is reserved: its wake-up list <prefix>:{job_type}:jobs would "
            "be the key of kue-unique's hash"
        )
    utf8(job_type, "type")
    if len(_VALID_TYPES) < _VALID_TYPES_MAX:
        _VALID_TYPES.add(job_type)
    return job_type


def utf8(text: str, field: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidJob(f"{field} is not valid unicode (lone surrogate)") from None


def to_json(value: Any, field: str) -> str:
    """Compact JSON text (ASCII, so any Python string stores safely), or InvalidJob."""
    if value is None:  # most handlers' result: without the encoder's call
        return "null"
    try:
        return _JSON.encode(value)
    except (TypeError, ValueError) as e:
        raise InvalidJob(f"{field} must be JSON-serialisable: {e}") from None
    except RecursionError:
        raise InvalidJob(f"{field} is nested too deeply to be JSON") from None


def parse_priority(level: object) -> int:
    """A priority name (``low`` ... ``critical``) or an integer -> its integer value."""
    if isinstance(level, str):
        if level in PRIORITIES:
            return PRIORITIES[level]
        names = ", ".join(PRIORITIES)
        raise InvalidJob(f"priority must be one of {names} or an integer, got {level!r}")
    return checks.integer(level, "priority", 1 - PRIORITY_LIMIT, PRIORITY_LIMIT - 1)


def parse_state(state: object) -> str:
    value = state.value if isinstance(state, JobState) else state
    if not isinstance(value, str) or value not in STATES:
        raise InvalidJob(f"state must be one of {', '.join(STATES)}, got {state!r}")
    return value


def ms(value: object, field: str, minimum: int) -> int:
    if isinstance(value, timedelta):
        value = value.total_seconds() * 1000
    return int(checks.number(value, field, minimum, defaults.MAX_MS, " ms"))


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_ONE_MS = timedelta(milliseconds=1)


def due_ms(when: datetime) -> int:
    """An aware datetime as ms since the epoch, rounded up (never early); at least 1."""
    if when.utcoffset() is None:
        raise InvalidJob(
            f"delay: a datetime needs a time zone, e.g. datetime.now(timezone.utc) + "
            f"timedelta(hours=1); got {when!r}, which means another time on each machine"
        )
    return max(1, -((_EPOCH - when) // _ONE_MS))


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def text(value: Any) -> str:
    """A value read from Redis as text: bytes (a client that does not decode) as UTF-8."""
    return value.decode() if isinstance(value, bytes) else str(value)


def num(text: str | None) -> int | float | None:
    if text is None:
        return None
    try:
        return int(text)
    except ValueError:
        try:
            f = float(text)
        except ValueError:
            return None
        return f if math.isfinite(f) else None


#: The C scanner ``json.loads`` ends in, called directly: a stored field (a job's data, on
#: every claim) is read in a third of the time, without the decoder's checks of surrounding
#: whitespace.
_SCAN: Callable[[str, int], tuple[Any, int]] = json.JSONDecoder().scan_once  # type: ignore[attr-defined]  # set by its __init__


def json_field(text: str | None, fallback: Any) -> Any:
    if text is None:
        return fallback
    try:
        value, end = _SCAN(text, 0)
        if end == len(text):
            return value
    except (StopIteration, ValueError):
        pass  # not JSON from its first character: as json.loads reads it
    try:
        return json.loads(text)
    except ValueError:
        return text  # stored by another client as plain text: show it as it is
