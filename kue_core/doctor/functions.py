"""kue doctor's look at the Redis functions the scripts run as (Redis 7 and later).

``old-function``
    a library of ours (``kue_<script>_<digest>``, see :mod:`kue_core.store.lua_source`) that is
    none of this version's scripts: an earlier kue version loaded it, and Redis keeps
    functions (in its RDB and AOF files too) until they are deleted, so every upgrade
    leaves its predecessor's behind. Repair: delete it (``FUNCTION DELETE``). That is safe
    even while a process of that version still runs, on this queue or another of this Redis:
    its next call finds its function missing and loads it again.

Functions belong to the server, not to one queue's keys: the check reads ``FUNCTION LIST``
for the libraries named ``kue_*`` (nothing on a Redis without functions).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import redis
from redis.exceptions import ResponseError

from ..store.lua_source import LIBRARY_PREFIX, SCRIPT_NAMES, function_library
from .checker import Checker

#: The repair action that deletes a library (run here, not in ``repair.lua``: a script may
#: not call ``FUNCTION``).
UNLOAD = "unload"


def check(c: Checker) -> None:
    """Add the libraries of other kue versions to ``c``'s report."""
    ours = {function_library(name).name for name in SCRIPT_NAMES}
    for name in _libraries(c.client):
        if name not in ours:
            c.add(
                "old-function",
                name,
                f"Redis holds the function library {name}, which no script of this kue "
                "version is: an earlier version loaded it",
                "delete it (FUNCTION DELETE); a process still running that version loads it again",
                action=(UNLOAD, name, "", ""),
            )


def unload(client: redis.Redis, names: Iterable[str]) -> list[bool]:
    """Delete the libraries ``names``; for each, whether it was there."""
    done = []
    for name in names:
        try:
            client.execute_command("FUNCTION", "DELETE", name)  # type: ignore[no-untyped-call]
            done.append(True)
        except ResponseError as e:
            if "not found" not in str(e).lower():
                raise
            done.append(False)
    return done


def _libraries(client: redis.Redis) -> list[str]:
    """The names of the server's libraries named ``kue_*``; none on a server without
    functions, or where this user may not list them."""
    try:
        reply = client.execute_command(  # type: ignore[no-untyped-call]
            "FUNCTION", "LIST", "LIBRARYNAME", LIBRARY_PREFIX + "*"
        )
    except ResponseError:
        return []
    out = []
    for entry in reply:
        fields = _pairs(entry)
        name = str(fields.get("library_name", ""))
        if name.startswith(LIBRARY_PREFIX):
            out.append(name)
    return out


def _pairs(entry: Any) -> dict[str, Any]:
    """A ``FUNCTION LIST`` entry (a flat list of names and values in RESP2, a map in RESP3)
    as a dict."""
    if isinstance(entry, dict):
        return {str(k): v for k, v in entry.items()}
    it = iter(entry)
    return {str(k): v for k, v in zip(it, it, strict=False)}
