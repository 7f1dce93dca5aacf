"""Running Lua on Redis, for every caller: a script as a Redis function (``FCALL``, loaded when
first missing) or, before Redis 7 or where functions are not allowed, as a script
(``EVALSHA``); on one connection per thread, pipelined in batches, resent after a Cluster
redirect or a lost script, with ``WAIT`` for replicas when asked. Error replies starting with
a ``KUE_*`` code become the matching :mod:`kue_core.base.errors` exception. The wrappers of each
script are :class:`kue_core.store.scripts.Scripts`; the asyncio twin is
:mod:`kue_core.store.aio_scripts`, which shares the helpers here."""

from __future__ import annotations

import select
import socket
import struct
import sys
import threading
import time
import weakref
from collections.abc import Sequence
from typing import Any, TypeVar, cast

import hiredis
import redis
from redis.commands.core import Script
from redis.connection import AbstractConnection, Connection
from redis.exceptions import ConnectionError, NoScriptError, ResponseError, TimeoutError

from ..base.errors import SCRIPT_ERRORS, HasDependents, JobNotFound, KueError, NotReplicated
from ..base.keys import Keys
from ..base.retry import Pauses
from ..defaults import REDIRECT_PATIENCE, REPLICA_TIMEOUT_MS
from . import calls
from .calls import Call, Op, Read
from .cluster import Redirected
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


#: TCP's state of a connection both ends keep open (``tcpi_state`` of Linux's TCP_INFO).
_ESTABLISHED = 1
#: Where the kernel tells a TCP connection's state (Linux); elsewhere select() is asked.
_TCP_INFO: int | None = getattr(socket, "TCP_INFO", None)


def _stale(conn: AbstractConnection) -> bool:
    """Whether the connection must not be used: the server closed it (restart, timeout,
    CLIENT KILL), or it is readable before we asked anything (a stray reply). A TCP connection
    without TLS, on Linux, is asked its TCP state, which a close changes: a call that keeps the
    interpreter's lock, where select() lets it go and, with many slots' threads, costs each
    call a wait to take it back (a tenth of a worker's CPU per job with 16 slots). A stray
    reply cannot be left there: a call that fails before it read its reply disconnects."""
    sock = getattr(conn, "_sock", None)
    if _TCP_INFO is not None and type(sock) is socket.socket and isinstance(conn, Connection):
        try:
            return sock.getsockopt(socket.IPPROTO_TCP, _TCP_INFO, 1)[0] != _ESTABLISHED
        except OSError:
            return True
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


def _kernel_timeouts(conn: AbstractConnection) -> None:
    """Have the kernel keep the socket timeout of a thread's own connection (Linux; TCP or a
    Unix socket, not TLS): the socket blocks, with SO_RCVTIMEO and SO_SNDTIMEO set to the
    timeout. Python keeps a timeout by a poll() before each send and each receive, and each
    lets the interpreter's lock go: with 16 slots' threads, taking it back cost a worker about
    a fifth of its CPU per job. A timeout then ends a read or a write with EAGAIN, which
    ``Runner`` reports as the TimeoutError it was."""
    sock = getattr(conn, "_sock", None)
    if type(sock) is not socket.socket or not sys.platform.startswith("linux"):
        return
    timeout = sock.gettimeout()
    if not timeout:  # None: blocking already (done, or no timeout asked); 0: non-blocking
        return
    seconds = int(timeout)
    value = struct.pack("ll", seconds, int((timeout - seconds) * 1_000_000))
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, value)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, value)
    sock.settimeout(None)


def read_reply(conn: AbstractConnection) -> Any:
    """The next reply on a thread's connection. A read the kernel's timeout ended (see
    :func:`_kernel_timeouts`) raises the TimeoutError Python's own timeout raises."""
    try:
        return conn.read_response()
    except ConnectionError as e:
        if isinstance(e.__context__, BlockingIOError):
            raise TimeoutError("Timeout reading from socket") from e
        raise


def _give_back(pool: redis.ConnectionPool, conn: Connection) -> None:
    """Return a thread's connection to the pool with Python's own socket timeout again, as
    the pool's other users expect it (see :func:`_kernel_timeouts`)."""
    sock = getattr(conn, "_sock", None)
    timeout = getattr(conn, "socket_timeout", None)
    if type(sock) is socket.socket and timeout:
        try:
            sock.settimeout(timeout)
        except OSError:  # closed meanwhile: the pool connects it again
            conn.disconnect()  # type: ignore[no-untyped-call]
    pool.release(conn)


class _Held:
    """A connection held by one thread; given back to the pool when the thread ends."""

    def __init__(self, pool: redis.ConnectionPool) -> None:
        conn = pool.get_connection()
        self.conn: AbstractConnection = conn
        weakref.finalize(self, _give_back, pool, conn)


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
        held: _Held | None = getattr(self._local, "held", None)
        if held is None:
            held = self._local.held = _Held(self._client.connection_pool)
        conn = held.conn
        if _stale(conn):
            conn.disconnect()  # type: ignore[no-untyped-call]
        return conn

    @staticmethod
    def _send(conn: AbstractConnection, packed: bytes) -> None:
        if getattr(conn, "_sock", None) is None:
            # Connect through connect(), not send's shortcut to the last address: Sentinel
            # finds the current primary there.
            conn.connect()  # type: ignore[no-untyped-call]
        _kernel_timeouts(conn)
        try:
            conn.send_packed_command([packed])  # type: ignore[no-untyped-call]
        except ConnectionError as e:
            if isinstance(e.__context__, BlockingIOError):  # as read_reply's
                raise TimeoutError("Timeout writing to socket") from e
            raise

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
