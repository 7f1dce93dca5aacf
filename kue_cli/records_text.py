"""How ``kue stats`` and ``kue retention`` write retention policies, ages and memory sizes
(and read ages: ``7d``, ``12h``, ``90s``)."""

from __future__ import annotations

import re
from typing import Any

from kue_http.dashboard.records import age_text, bytes_text

from .errors import BadUsage

_AGE = re.compile(r"(\d+)(ms|s|m|h|d)?")
_UNIT_MS = {"d": 86_400_000, "h": 3_600_000, "m": 60_000, "s": 1000, "ms": 1}
__all__ = ["age_ms", "age_text", "bytes_text", "policy_text", "stats_lines"]


def age_ms(text: str) -> int:
    """``90s``, ``15m``, ``7d``, ``250ms`` or plain milliseconds -> ms."""
    m = _AGE.fullmatch(text.strip())
    if not m or int(m.group(1)) < 1:
        raise BadUsage(f"an age is a positive number with ms, s, m, h or d, got {text!r}")
    return int(m.group(1)) * _UNIT_MS[m.group(2) or "ms"]


def policy_text(kept: dict[str, Any]) -> str:
    """``newest 100000, at most 7d old (default)``; ``every job`` when nothing bounds it."""
    parts = []
    if kept["count"] is not None:
        parts.append(f"newest {kept['count']}")
    if kept["age"] is not None:
        parts.append(f"at most {age_text(kept['age'])} old")
    text = ", ".join(parts) or "every job"
    return f"{text} ({kept['source']})"


def stats_lines(retention: dict[str, Any], memory: dict[str, Any]) -> list[str]:
    """``kue stats``'s retention and memory lines."""
    limit = bytes_text(memory["maxmemory"]) if memory["maxmemory"] else "no limit"
    return [
        f"kept: complete {policy_text(retention['complete'])}; "
        f"failed {policy_text(retention['failed'])}",
        f"redis memory: {bytes_text(memory['used'])} used (peak {bytes_text(memory['peak'])}, "
        f"{limit}, {memory['policy'] or 'no policy'})",
    ]
