"""Builders of the calls that only read: finding jobs (``search``, ``finished``), and the
server's clock (an operation of one plain read)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...base.keys import Keys
from .call import Call, Op, flag, ints, read


def _found(reply: Any) -> tuple[int, bool, list[int]]:
    total, exact, *ids = reply
    return int(total), exact == 1, [int(i) for i in ids]


def search(
    keys: Keys,
    offset: int,
    count: int,
    scan: int,
    state: str,
    job_type: str,
    terms: Sequence[Any],
) -> Call[tuple[int, bool, list[int]]]:
    """See ``search.lua``: (total, exact, ids of the page)."""
    return Call("search", keys.words, (offset, count, scan, state, job_type, *terms), _found)


def finished(
    keys: Keys, state: str, job_type: str, offset: int, count: int, newest: bool
) -> Call[list[int]]:
    """See ``finished.lua``: the ids of a page of complete or failed jobs by finish time."""
    args = (state, job_type, offset, count, flag(newest))
    return Call("finished", keys.finished(state), args, ints)


def server_now() -> Op[int]:
    """Now on the Redis server's clock, in ms: the clock of every due time, window and age
    (see ``connection.server_ms``)."""
    ((seconds, micros),) = yield read(("TIME",))
    return int(seconds) * 1000 + int(micros) // 1000
