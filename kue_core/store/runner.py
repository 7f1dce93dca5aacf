"""Running Lua on Redis, for every caller: a script as a Redis function (``FCALL``, loaded when
first missing) or, before Redis 7 or where functions are not allowed, as a script
(``EVALSHA``); on one connection per thread, pipelined in batches, resent after a Cluster
redirect or a lost script, with ``WAIT`` for replicas when asked. Error replies starting with
a ``KUE_*`` code become the matching :mod:`kue_core.base.errors` exception. The wrappers of each
script are :class:`kue_core.store.scripts.Scripts`; the asyncio twin is
:mod:`kue_core.store.aio_scripts`, which shares the helpers here. How each thread's connection
is kept and checked is :mod:`kue_core.store.connections`."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import Any, TypeVar, cast

import hiredis
import redis
from redis.commands.core import Script
from redis.connection import AbstractConnection
from redis.exceptions import ConnectionError, NoScriptError, ResponseError

from ..base.errors import SCRIPT_ERRORS, HasDependents, JobNotFound, KueError, NotReplicated
from ..base.keys import Keys
from ..base.retry import Pauses
from ..defaults import REDIRECT_PATIENCE, REPLICA_TIMEOUT_MS
from . import calls
from .calls import Call, Op, Read
from .cluster import Redirected
from .connections import Held, read_reply, send, stale
from .lua_source import SCRIPT_NAMES, Library, function_library, script_source

T = TypeVar("T")


def translate(error: ResponseError) -> Exception:
    """Map a script's ``KUE_*`` error reply to its exception; other errors pass through."""
    code, _, detail = str(error).partition(" ")
    cls = SCRIPT_ERRORS.get(code)
    if cls is None:
        return error
    if cls is JobNotFound:
        return JobNotFound(int(detail) if detail.isdigit() else detail)
    if cls is HasDependents:
        job_id, _, waiting = detail.partition(" ")
        return HasDependents(int(job_id), [int(d) for d in waiting.split(",") if d])
    return cls(detail)


def no_functions(error: ResponseError) -> bool:
    """Whether ``error`` says the server has no Redis functions (before Redis 7: "unknown
    command `FCALL`") or this user may not call or load them (ACL: "no permissions to run the
    'fcall' command", or 'function|load'); never an error raised inside a function."""
    text = str(error).lower()
    if text.startswith("unknown command"):
        return text.startswith(("unknown command `fcall`", "unknown command `function`"))
    return "no permissions to run the 'fcall' command" in text or (
        "no permissions to run the 'function|load' command" in text
    )


def unsent(result: Any) -> bool:
    """Whether a batched call did not run and may be sent again: its script or function was
    missing (:func:`unrun`), or Redis Cluster redirected it."""
    return isinstance(result, Redirected) or unrun(result)


def unrun(result: Any) -> bool:
    """Whether a pipelined script's result says it did not run for want of its script or
    function (:meth:`Runner._recovered` tells which)."""
    return isinstance(result, NoScriptError) or (
        isinstance(result, ResponseError)
        and (str(result).startswith("Function not found") or no_functions(result))
    )


def pack(*args: Any) -> bytes:
    """One command in Redis's protocol, packed in C."""
    packed: bytes = hiredis.pack_command(args)
    return packed


def confirmed(replicas: Any, wanted: int) -> None:
    """Raise ``NotReplicated`` unless ``WAIT``'s reply counts ``wanted`` replicas."""
    if int(replicas) < wanted:
        raise NotReplicated(
            f"only {replicas} of {wanted} replicas confirmed the save within "
            f"{REPLICA_TIMEOUT_MS} ms: the jobs are not acknowledged"
        )


class Redirects:
    """Pacing for resending a script Redis Cluster redirected: at once (a moved slot is
    served at once by its new owner), then backing off while a migration goes on, for at
    most ``REDIRECT_PATIENCE`` seconds."""

    def __init__(self) -> None:
        self.count = 0
        self.pauses = Pauses(0.005, 0.25)
        self.deadline = time.monotonic() + REDIRECT_PATIENCE

    def pause(self, error: Redirected) -> float:
        """How long to wait before sending again; ``error`` itself once out of patience."""
        if time.monotonic() >= self.deadline:
            raise error
        self.count += 1
        return self.pauses.next() if self.count > 1 else 0.0


class Runner:
    """Runs the transition scripts for one Redis client and one key prefix.

    Transitions are the hot path (one per save, claim, complete...), so each thread keeps one
    pooled connection and talks to it directly, skipping the pool's per-command checkout:
    this is a third of the cost of a ``save()`` on loopback.
    """

    def __init__(self, client: redis.Redis, keys: Keys, replicas: int = 0) -> None:
        self._client = client
        self._keys = keys
        #: Replicas that must confirm a save before it returns (Redis ``WAIT``).
        self.replicas = replicas
        self._local = threading.local()
        self._scripts: dict[str, Script] = {
            name: client.register_script(script_source(name)) for name in SCRIPT_NAMES
        }
        self._libraries: dict[str, Library] = {
            name: function_library(name) for name in SCRIPT_NAMES
        }
        #: Whether the scripts run as Redis functions: until the server says it has none.
        self.functions = True

    def _command(self, name: str) -> tuple[str, str]:
        """How script ``name`` is called: ``FCALL`` and its function, or ``EVALSHA`` and its
        digest."""
        if self.functions:
            return "FCALL", self._libraries[name].name
        return "EVALSHA", self._scripts[name].sha

    def _recovered(self, name: str, error: ResponseError) -> bool:
        """Whether ``error`` says that script ``name`` did not run for want of its function,
        made right: the library is loaded (the server lost it: a restart without persistence,
        ``FUNCTION FLUSH``, a cluster node that never had it), or, on a server without
        functions (before Redis 7, or one whose users may not call or load them), the scripts
        go back to ``EVALSHA`` for good."""
        if no_functions(error):
            # Also when another thread found out first: this call was sent as FCALL before.
            self.functions = False
            return True
        if not self.functions:
            return False
        text = str(error)
        if not text.startswith("Function not found"):
            return False
        try:
            self._client.execute_command("FUNCTION", "LOAD", self._libraries[name].code)  # type: ignore[no-untyped-call]
        except ResponseError as e:
            if no_functions(e):
                self.functions = False
            elif "already exists" not in str(e):
                raise  # another process loaded it meanwhile, or the code is wrong
        return True

    def _connection(self) -> AbstractConnection:
        held: Held | None = getattr(self._local, "held", None)
        if held is None:
            held = self._local.held = Held(self._client.connection_pool)
        conn = held.conn
        if stale(conn):
            conn.disconnect()  # type: ignore[no-untyped-call]
        return conn

    _send = staticmethod(send)

    def _run(self, name: str, key: str, *args: Any, replicated: bool = False) -> Any:
        """Run script ``name``; with ``replicated``, return only once ``self.replicas``
        replicas have its writes."""
        conn = self._connection()
        failures = 0
        redirected: Redirects | None = None
        while True:
            # Every argument is an int or a valid str (validated or ASCII JSON): hiredis packs
            # them in C, which is most of the client-side cost of a call.
            packed = pack(*self._command(name), 1, key, self._keys.prefix, *args)
            try:
                self._send(conn, packed)
            except ConnectionError:
                # Nothing reached Redis: safe to send again on a fresh connection.
                conn.disconnect()  # type: ignore[no-untyped-call]
                failures += 1
                if failures == 3:
                    raise
                continue
            try:
                reply = read_reply(conn)
                if replicated and self.replicas:
                    # WAIT counts the replicas that have this connection's writes so far.
                    self._send(conn, pack("WAIT", self.replicas, REPLICA_TIMEOUT_MS))
                    confirmed(read_reply(conn), self.replicas)
                return reply
            except NoScriptError:
                # The server lost its script cache (restart, SCRIPT FLUSH): load and resend.
                failures += 1
                if failures == 3:
                    raise ConnectionError(f"could not run the {name} script") from None
                self._client.script_load(self._scripts[name].script)
            except Redirected as e:
                # It did not run: the cluster moved the slot, or is moving it. Resend (to the
                # new owner) for as long as a move may take.
                if e.elsewhere:
                    conn.disconnect()  # type: ignore[no-untyped-call]
                redirected = redirected or Redirects()
                time.sleep(redirected.pause(e))
            except ResponseError as e:
                if not self._recovered(name, e):
                    raise translate(e) from None
                failures += 1
                if failures == 3:
                    raise ConnectionError(f"could not run the {name} function") from None
            except BaseException:
                # The reply is unknown (and may still arrive): never reuse this connection.
                conn.disconnect()  # type: ignore[no-untyped-call]
                raise

    def call(self, c: Call[T]) -> T:
        """Run one script call (see :mod:`kue_core.store.calls`); its reply, read."""
        return c.parse(self._run(c.name, c.key, *c.args, replicated=c.replicated))

    def drive(self, op: Op[T]) -> T:
        """Run an operation of several steps (see :mod:`kue_core.jobs.ops`) to its end. A
        ``KueError`` of a step is raised inside the operation, which may answer it."""
        reply: Any = None
        error: KueError | None = None
        try:
            while True:
                try:
                    step = op.send(reply) if error is None else op.throw(error)
                except StopIteration as done:
                    return cast(T, done.value)
                reply, error = None, None
                try:
                    if step.__class__ is Call:  # the common step first
                        reply = self.call(step)
                    else:
                        reply = self.batch(step) if isinstance(step, list) else self._step(step)
                except KueError as e:
                    error = e
        finally:
            op.close()  # a step that raised past it: its spans and clean-ups end now

    def _step(self, step: Call[Any] | Read) -> Any:
        if isinstance(step, Read):
            if not step.commands:
                return []
            if len(step.commands) == 1:
                return [self._client.execute_command(*step.commands[0])]  # type: ignore[no-untyped-call]
            pipe = self._client.pipeline(transaction=False)
            for command in step.commands:
                pipe.execute_command(*command)  # type: ignore[no-untyped-call]
            return pipe.execute()
        return self.call(step)

    def save(self, rows: Sequence[Sequence[Any]]) -> list[int]:
        """Store jobs given as rows of ``SAVE_WIDTH`` values in one call; returns their ids."""
        return self.call(calls.save(self._keys, rows))

    def batch(self, batch: Sequence[Call[T]]) -> list[T]:
        """Several calls of one script (``save``), pipelined in one round trip; each one's
        reply, read. The first error raises, once every call that could run has."""
        if not batch:
            return []
        name = batch[0].name
        results = self._pipelined(batch)
        loads = 0
        redirects: Redirects | None = None
        while missing := [r for r in results if unsent(r)]:
            # Redo the calls that did not run; the others are stored already, and are never
            # sent twice.
            if isinstance(missing[0], Redirected):
                # The cluster moved the slot, or is moving it: to the new owner, paced.
                redirects = redirects or Redirects()
                time.sleep(redirects.pause(missing[0]))
            elif loads == 2:
                break
            else:
                # The server lost the script or function (restart, flush) or has no
                # functions: load it (or fall back to EVALSHA).
                loads += 1
                if isinstance(missing[0], NoScriptError):
                    self._client.script_load(self._scripts[name].script)
                elif not self._recovered(name, missing[0]):
                    break
            redo = [c for c, r in zip(batch, results, strict=True) if unsent(r)]
            again = iter(self._pipelined(redo))
            results = [next(again) if unsent(r) else r for r in results]
        for r in results:
            if isinstance(r, ResponseError):
                raise translate(r)
            if isinstance(r, Exception):
                raise r
        return [c.parse(r) for c, r in zip(batch, results, strict=True)]

    def _pipelined(self, batch: Sequence[Call[Any]]) -> list[Any]:
        """Send ``batch`` in one write on this thread's connection and read each reply (an
        error reply, or a redirect, as the exception in its place). Sent once: a redis-py
        pipeline would send it all again after a lost connection or a redirect, and the
        calls that had run would run twice."""
        waits = bool(self.replicas) and any(c.replicated for c in batch)
        packed = b"".join(
            pack(*self._command(c.name), 1, c.key, self._keys.prefix, *c.args) for c in batch
        )
        if waits:
            packed += pack("WAIT", self.replicas, REPLICA_TIMEOUT_MS)
        conn = self._connection()
        results: list[Any] = []
        try:
            self._send(conn, packed)
            for _ in range(len(batch) + waits):
                try:
                    results.append(read_reply(conn))
                except (ResponseError, Redirected) as e:  # one error reply: still in step
                    results.append(e)
        except BaseException:
            conn.disconnect()  # type: ignore[no-untyped-call]
            raise
        if any(isinstance(r, Redirected) and r.elsewhere for r in results):
            conn.disconnect()  # type: ignore[no-untyped-call]  # to the new owner next time
        if waits:
            replicas = results.pop()
            if isinstance(replicas, Exception):
                raise replicas
            confirmed(replicas, self.replicas)
        return results
