"""The only place that runs Lua: one wrapper per transition script in ``scripts/``.

Each script is ``lib.lua`` (shared helpers) followed by the script's own file, registered once
per client with ``register_script``. Error replies starting with a ``KUE_*`` code become the
matching :mod:`kue_core.errors` exception.
"""

from __future__ import annotations

import select
import threading
import weakref
from collections.abc import Sequence
from importlib import resources
from typing import Any

import hiredis
import redis
from redis.commands.core import Script
from redis.connection import AbstractConnection
from redis.exceptions import ConnectionError, NoScriptError, ResponseError

from .errors import SCRIPT_ERRORS, JobNotFound
from .keys import Keys

#: Every transition script; ``tests/scripts/test_contract.py`` checks this against the files.
SCRIPT_NAMES = ("save", "update", "set_state", "set_priority", "progress", "log", "remove")

#: Values per job in a ``save`` call (see the header of ``save.lua``).
SAVE_WIDTH = 8


def script_source(name: str) -> str:
    """The Lua text run for ``name``: the shared helpers, then the script itself."""
    folder = resources.files("kue_core") / "scripts"
    lib = (folder / "lib.lua").read_text("utf-8")
    return lib + "\n" + (folder / f"{name}.lua").read_text("utf-8")


def translate(error: ResponseError) -> Exception:
    """Map a script's ``KUE_*`` error reply to its exception; other errors pass through."""
    code, _, detail = str(error).partition(" ")
    cls = SCRIPT_ERRORS.get(code)
    if cls is None:
        return error
    if cls is JobNotFound:
        return JobNotFound(int(detail) if detail.isdigit() else detail)
    return cls(detail)


def _flat(rows: Sequence[Sequence[Any]]) -> list[Any]:
    """``save.lua``'s ARGV tail: the rows' values one after another."""
    return [v for row in rows for v in row]


def _stale(conn: AbstractConnection) -> bool:
    """Whether the connection is readable before we asked anything: the server closed it
    (restart, timeout, CLIENT KILL) or left a stray reply. Either way, it must not be used."""
    sock = getattr(conn, "_sock", None)
    if sock is not None:
        try:
            # One syscall: the usual answer, "nothing to read", costs a microsecond.
            if not select.select([sock], [], [], 0)[0]:
                return False
        except ValueError:
            pass  # a descriptor select() cannot watch (above FD_SETSIZE): ask redis-py
        except OSError:
            return True
    try:
        return bool(conn.can_read(timeout=0))
    except ConnectionError:
        return True


class _Held:
    """A connection held by one thread; given back to the pool when the thread ends."""

    def __init__(self, pool: redis.ConnectionPool) -> None:
        self.conn: AbstractConnection = pool.get_connection()
        weakref.finalize(self, pool.release, self.conn)


class Scripts:
    """The transition scripts, bound to one Redis client and one key prefix.

    Transitions are the hot path (one per save, claim, complete...), so each thread keeps one
    pooled connection and talks to it directly, skipping the pool's per-command checkout:
    this is a third of the cost of a ``save()`` on loopback.
    """

    def __init__(self, client: redis.Redis, keys: Keys) -> None:
        self._client = client
        self._keys = keys
        self._local = threading.local()
        self._scripts: dict[str, Script] = {
            name: client.register_script(script_source(name)) for name in SCRIPT_NAMES
        }

    def _connection(self) -> AbstractConnection:
        held: _Held | None = getattr(self._local, "held", None)
        if held is None:
            held = self._local.held = _Held(self._client.connection_pool)
        conn = held.conn
        if _stale(conn):
            conn.disconnect()  # type: ignore[no-untyped-call]
        return conn

    def _run(self, name: str, key: str, *args: Any) -> Any:
        script = self._scripts[name]
        conn = self._connection()
        # Every argument is an int or a valid str (validated or ASCII JSON): hiredis packs
        # them in C, which is most of the client-side cost of a call.
        packed = hiredis.pack_command(("EVALSHA", script.sha, 1, key, self._keys.prefix, *args))
        for attempt in range(3):
            try:
                conn.send_packed_command([packed])  # type: ignore[no-untyped-call]
            except ConnectionError:
                # Nothing reached Redis: safe to send again on a fresh connection.
                conn.disconnect()  # type: ignore[no-untyped-call]
                if attempt == 2:
                    raise
                continue
            try:
                return conn.read_response()
            except NoScriptError:
                # The server lost its script cache (restart, SCRIPT FLUSH): load and resend.
                self._client.script_load(script.script)
            except ResponseError as e:
                raise translate(e) from None
            except BaseException:
                # The reply is unknown (and may still arrive): never reuse this connection.
                conn.disconnect()  # type: ignore[no-untyped-call]
                raise
        raise ConnectionError(f"could not run the {name} script")

    def save(self, rows: Sequence[Sequence[Any]]) -> list[int]:
        """Store jobs given as rows of ``SAVE_WIDTH`` values in one call; returns their ids."""
        ids: list[int] = self._run("save", self._keys.ids, len(rows), *_flat(rows))
        return ids

    def save_chunks(self, chunks: Sequence[Sequence[Sequence[Any]]]) -> list[int]:
        """Like :meth:`save` for several chunks, pipelined in one round trip."""
        script = self._scripts["save"]
        results = self._pipelined(script, chunks)
        if any(isinstance(r, NoScriptError) for r in results):
            # The server lost its script cache (restart, SCRIPT FLUSH): load it and redo the
            # chunks that did not run; the others are stored already.
            self._client.script_load(script.script)
            redo = [c for c, r in zip(chunks, results, strict=True) if isinstance(r, NoScriptError)]
            again = iter(self._pipelined(script, redo))
            results = [next(again) if isinstance(r, NoScriptError) else r for r in results]
        ids: list[int] = []
        for r in results:
            if isinstance(r, ResponseError):
                raise translate(r)
            if isinstance(r, Exception):
                raise r
            ids.extend(r)
        return ids

    def _pipelined(self, script: Script, chunks: Sequence[Sequence[Sequence[Any]]]) -> list[Any]:
        pipe = self._client.pipeline(transaction=False)
        for rows in chunks:
            pipe.evalsha(script.sha, 1, self._keys.ids, self._keys.prefix, len(rows), *_flat(rows))
        return pipe.execute(raise_on_error=False)

    def update(self, job_id: int, fields: Sequence[Any]) -> str:
        state: str = self._run("update", self._keys.job(job_id), job_id, *fields)
        return state

    def set_state(self, job_id: int, state: str) -> str:
        previous: str = self._run("set_state", self._keys.job(job_id), job_id, state)
        return previous

    def set_priority(self, job_id: int, priority: int) -> None:
        self._run("set_priority", self._keys.job(job_id), job_id, priority)

    def progress(self, job_id: int, percent: int, data_json: str) -> None:
        self._run("progress", self._keys.job(job_id), job_id, percent, data_json)

    def log(self, job_id: int, line: str) -> int:
        count: int = self._run("log", self._keys.job(job_id), job_id, line)
        return count

    def remove(self, job_id: int) -> None:
        self._run("remove", self._keys.job(job_id), job_id)
