"""Commands as both transports write them: packed in Redis's protocol by hiredis, in C (most
of the client-side cost of a call), script calls by the name their scripts run under now."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import hiredis

from ..defaults import REPLICA_TIMEOUT_MS
from .calls import Call
from .lua_source import LuaScripts


def pack(*args: Any) -> bytes:
    """One command (every argument is an int or a valid str: validated, or ASCII JSON)."""
    packed: bytes = hiredis.pack_command(args)
    return packed


def wait(replicas: int) -> bytes:
    """``WAIT`` for ``replicas`` replicas to have the connection's writes so far, packed: it
    follows the calls whose writes they must confirm (:func:`kue_core.store.recovery.confirmed`
    reads its reply)."""
    return pack("WAIT", replicas, REPLICA_TIMEOUT_MS)


def pack_batch(
    calls: Sequence[Call[Any]], scripts: LuaScripts, functions: bool, prefix: str, replicas: int
) -> tuple[bytes, bool]:
    """``calls`` packed for one write, followed by ``WAIT`` when ``replicas`` must confirm
    one's writes; and whether it is (its reply comes last)."""
    packed = b"".join(
        pack(*scripts.command(c.name, functions), 1, c.key, prefix, *c.args) for c in calls
    )
    waits = bool(replicas) and any(c.replicated for c in calls)
    if waits:
        packed += wait(replicas)
    return packed, waits
