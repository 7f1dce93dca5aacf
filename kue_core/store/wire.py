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


def wait_command(lists: Sequence[tuple[str, bool]], timeout: float) -> bytes:
    """A worker's wait on its wake-up ``lists`` (key, whether its token is left there) for
    ``timeout`` seconds, packed after ``CLIENT ID`` (the first reply, for ``CLIENT UNBLOCK``):
    ``BLMOVE`` of the list onto itself for one list that keeps its token, else ``BLPOP``."""
    seconds = max(timeout, 0.001)  # 0 would block for ever
    if len(lists) == 1 and lists[0][1]:
        key = lists[0][0]
        block = pack("BLMOVE", key, key, "RIGHT", "LEFT", seconds)
    else:
        block = pack("BLPOP", *(key for key, _ in lists), seconds)
    return pack("CLIENT", "ID") + block


def token_to_put_back(lists: Sequence[tuple[str, bool]], reply: Any) -> tuple[str, Any] | None:
    """After the wait of :func:`wait_command` replied ``reply``: the list and token that
    ``BLPOP`` took from a list whose token is left there (not ours to take: claims take
    them), to be pushed back; None when there is none."""
    if not isinstance(reply, list):
        return None
    key = reply[0].decode() if isinstance(reply[0], bytes) else reply[0]
    return (key, reply[1]) if dict(lists).get(key) else None
