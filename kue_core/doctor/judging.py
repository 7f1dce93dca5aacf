"""The rules a job's hash sets for the indexes, shared with ``repair.lua``: which sets a job
belongs in and with what score, read as Lua reads numbers; and how findings word them."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from ..base.keys import zid
from ..base.states import STATES


@dataclass(frozen=True)
class JobView:
    """A job hash as the indexes see it."""

    type: str
    state: str  # '' when the hash has none
    priority: float = 0.0
    promote_at: float | None = None
    ttl: float = 0.0


#: A Node Kue 0.11 worker's id, ``kue:<hostname>:<pid>:<type>:<n>`` (a type may hold colons),
#: as ``repair.lua``'s ``kue_worker`` reads it; kue's own are ``<hostname>:<pid>:<8 hex>``.
_KUE_WORKER = re.compile(r"kue:[^:]*:\d+:.*:\d+")


def kue_worker(worker: str | None) -> bool:
    """Whether ``worker`` (a job's ``workerId``) is a Node Kue worker's: its claim writes its
    own id and takes no lease, and leaves the fencing token of an earlier claim of ours."""
    return worker is not None and _KUE_WORKER.fullmatch(worker) is not None


def lua_number(value: str | None) -> float | None:
    """A finite number, read as Lua's ``tonumber`` reads it; None otherwise."""
    if value is None:
        return None
    text = value.strip()
    if "_" in text:
        return None  # Python reads 1_000; Lua does not
    try:
        x = float(text)
    except ValueError:
        try:
            x = float(int(text, 16)) if "x" in text.lower() else math.nan  # Lua reads 0x10
        except ValueError:
            return None
    return x if math.isfinite(x) else None


def belongs(job: JobView | None, name: str) -> tuple[bool, float | None]:
    """Whether ``job`` belongs in the set named ``name`` (a key without ``<p>:``), and its
    score there (None: any). ``belongs`` in ``repair.lua`` is the same rule."""
    if job is None:
        return False, None
    if name == "jobs":
        return True, job.priority
    if name == "leases":
        return job.state == "active", None
    if not job.state:
        return False, None
    if name == f"jobs:{job.state}":
        if job.state not in STATES or job.state == "active":
            return True, None
        if job.state in ("delayed", "suspended"):  # by due time, a wait's deadline
            return True, job.promote_at
        return True, job.priority
    if name == f"jobs:{job.type}:{job.state}":
        return True, (job.priority if job.state in STATES else None)
    return False, None


def job_of_member(member: str) -> int | None:
    """The job id of a zset member (``"01|7" -> 7``), or None when it is not a job's."""
    _, bar, digits = member.partition("|")
    if not bar or not digits.isascii() or not digits.isdigit() or digits.startswith("0"):
        return None
    job_id = int(digits)
    return job_id if zid(job_id) == member else None


def type_of(name: str) -> str | None:
    """The job type of a type's state set ``jobs:<type>:<state>``; None for other names."""
    rest = name.removeprefix("jobs:")
    if rest == name or rest in STATES:
        return None
    for state in STATES:
        if rest.endswith(":" + state) and len(rest) > len(state) + 1:
            return rest[: -len(state) - 1]
    return None


def ago(ms: float) -> str:
    """A duration for people: ``42 s``, ``5 min``, ``3 h 20 min``, ``2 d 4 h``."""
    s = max(0, int(ms // 1000))
    if s < 120:
        return f"{s} s"
    if s < 7200:
        return f"{s // 60} min"
    if s < 172800:
        return f"{s // 3600} h {s % 3600 // 60} min"
    return f"{s // 86400} d {s % 86400 // 3600} h"


def score_text(x: float | None) -> str:
    if x is None:
        return "none"
    return str(int(x)) if x == int(x) else repr(x)


def describe(job: JobView) -> str:
    if not job.state:
        return f"has no state ({job.type})"
    if job.state not in STATES:
        return f"has the unknown state {job.state!r} ({job.type})"
    return f"is {job.state} ({job.type})"
