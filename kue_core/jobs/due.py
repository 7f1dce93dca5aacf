"""A type's delayed jobs in the order they fall due, soonest first.

Kue 0.11 scores a type's sets (``q:jobs:<type>:<state>``) by priority, its delayed set too;
only the all-types ``q:jobs:delayed`` is scored by due time (``promote_at``), which is what
promotion reads. Node Kue writes and reads both sets that way, so they keep their scores, and
a type's delayed list is read from the two: the type's set says which jobs, the all-types set
when each falls due.

A type of a few thousand delayed jobs is read whole and sorted (two round trips); a larger one
is found by walking the all-types set in due order, a batch at a time, until the window is
filled (each batch: its members, then which of them are of the type).
"""

from __future__ import annotations

import math

from .. import defaults
from ..base.keys import Keys
from ..store.calls import Op, read


def window(keys: Keys, job_type: str, start: int, stop: int, desc: bool) -> Op[list[str]]:
    """The members of ``job_type``'s delayed set ranked ``start..stop`` (inclusive; from 0,
    negative ranks counting from the end, as ``ZRANGE``) by due time, soonest first (latest
    first with ``desc``); jobs due at the same time in the all-types set's order."""
    typed, every = keys.type_state(job_type, "delayed"), keys.state("delayed")
    (n,) = yield read(("ZCARD", typed))
    n = int(n)
    start, stop = start + n if start < 0 else start, stop + n if stop < 0 else stop
    start, stop = max(start, 0), min(stop, n - 1)
    if start > stop:
        return []
    if n <= defaults.DUE_SORT_LIMIT:
        (members,) = yield read(("ZRANGE", typed, 0, -1))
        members = [str(m) for m in members]
        (due,) = yield read(("ZMSCORE", every, *members))
        at = [math.inf if d is None else float(d) for d in due]  # not in it: last
        ranked = [m for _, m in sorted(zip(at, members, strict=True), reverse=desc)]
        return ranked[start : stop + 1]
    found: list[str] = []
    rank, batch = 0, defaults.DUE_WALK_BATCH
    command = "ZREVRANGE" if desc else "ZRANGE"
    while len(found) <= stop:
        (chunk,) = yield read((command, every, rank, rank + batch - 1))
        if not chunk:
            break
        chunk = [str(m) for m in chunk]
        (mine,) = yield read(("ZMSCORE", typed, *chunk))
        found += [m for m, score in zip(chunk, mine, strict=True) if score is not None]
        rank += batch
    return found[start : stop + 1]
