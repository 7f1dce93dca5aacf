"""Retry delay policy (pure: no Redis).

A job's ``backoff`` is stored as JSON data, never as code:
``true`` (retry after the job's own ``delay``), ``{"type": "fixed", "delay": ms}`` or
``{"type": "exponential", "delay": ms, "maxDelay": ms, "jitter": 0..1}``.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any, TypeAlias

from .. import defaults
from ..base import checks
from ..base.errors import InvalidJob

Backoff: TypeAlias = bool | dict[str, Any] | None

KINDS = ("fixed", "exponential")


def _ms(value: object, name: str) -> int:
    return int(checks.number(value, f"backoff.{name}", 0, defaults.MAX_MS, " ms"))


def normalize(value: object) -> Backoff:
    """Validate a backoff option; return it in the stored form (or None for no backoff)."""
    if value is None or value is False:
        return None
    if value is True:
        return True
    if not isinstance(value, dict):
        raise InvalidJob(f"backoff must be true or an object with a type, got {value!r}")
    kind = value.get("type")
    if kind not in KINDS:
        raise InvalidJob(f"backoff.type must be one of {', '.join(KINDS)}, got {kind!r}")
    unknown = set(value) - {"type", "delay", "maxDelay", "max_delay", "jitter"}
    if unknown:
        raise InvalidJob(f"backoff has unknown option(s): {', '.join(sorted(map(str, unknown)))}")
    if value.get("maxDelay") is not None and value.get("max_delay") is not None:
        raise InvalidJob("backoff takes maxDelay or max_delay (its former name), not both")
    out: dict[str, Any] = {"type": kind}
    if value.get("delay") is not None:
        out["delay"] = _ms(value["delay"], "delay")
    cap = value.get("maxDelay", value.get("max_delay"))
    if cap is not None:
        out["maxDelay"] = _ms(cap, "maxDelay")
    jitter = value.get("jitter")
    if jitter is not None:
        out["jitter"] = float(checks.number(jitter, "backoff.jitter", 0, 1))
    return out


def retry_delay(
    backoff: Backoff,
    attempts_made: int,
    job_delay: int = 0,
    rand: Callable[[], float] = random.random,
) -> int | None:
    """Milliseconds to wait before the next attempt, or None to retry at once.

    ``attempts_made`` counts the failed attempts so far (1 after the first failure).
    Exponential is Kue's formula ``delay/2 * (2^n - 1)``, capped at ``maxDelay``.
    """
    if backoff is None or backoff is False:
        return None
    if backoff is True:
        return job_delay
    delay = int(backoff.get("delay", job_delay) or 0)
    if backoff["type"] == "fixed":
        out = float(delay)
    else:
        out = delay / 2 * (2 ** min(attempts_made, 62) - 1)
        cap = backoff.get("maxDelay")
        if cap:
            out = min(out, cap - delay / 2)
    jitter = float(backoff.get("jitter", 0))
    if jitter:
        out = out * (1 - jitter) + out * jitter * rand()
    return max(0, min(round(out), defaults.MAX_MS))
