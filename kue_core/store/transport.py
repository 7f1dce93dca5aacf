"""The blocking transport: script calls (:mod:`kue_core.store.calls`) and operations
(:mod:`kue_core.jobs.ops`) run on Redis for ``Queue`` and the worker. A script runs as a Redis
function (``FCALL``) or, before Redis 7 or where functions are not allowed, as a script
(``EVALSHA``); on one connection per thread, with calls of one round trip pipelined. What it does
when a call did not run (a function or script missing, a Cluster redirect, a connection lost) is
decided by :mod:`kue_core.store.recovery`, shared with the asyncio twin,
:mod:`kue_core.store.aio_transport`. How each thread's connection is kept and checked is
:mod:`kue_core.store.connections`."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, Generic, NamedTuple, TypeVar, cast

import redis
from redis.connection import AbstractConnection
from redis.exceptions import ConnectionError, ResponseError

from ..base.errors import KueError
from ..base.keys import Keys
from .calls import Call, Op, Read
from .cluster import Redirected
from .connections import ThreadConnection, read_reply, send, stale
from .lua_source import lua_scripts
from .recovery import (
    FALL_BACK,
    LOAD_SCRIPT,
    Load,
    Loop,
    Pause,
    Resend,
    Unsent,
    confirmed,
    lost,
    recover_batch,
    recover_call,
    replies,
    settled,
    unreachable,
)
from .wire import pack, pack_batch, token_to_put_back, wait, wait_command

T = TypeVar("T")


class Posted(NamedTuple, Generic[T]):
    """A call :meth:`Transport.post` sent: the connection its reply comes on, and
    :class:`Unsent` when the send failed (taking it sends it again)."""

    call: Call[T]
    conn: AbstractConnection
    unsent: Unsent | None


class Transport:
    """Runs script calls and operations for one Redis client and one key prefix.

    Calls are the hot path (one per save, claim, complete...), so each thread keeps one
    pooled connection and talks to it directly, skipping the pool's per-command checkout:
    this is a third of the cost of a ``save()`` on loopback.
    """

    def __init__(self, client: redis.Redis, keys: Keys, replicas: int = 0) -> None:
        self._client = client
        self._keys = keys
        #: Replicas that must confirm a save before it returns (Redis ``WAIT``).
        self.replicas = replicas
        self._local = threading.local()
        self._scripts = lua_scripts()
        #: Whether the scripts run as Redis functions: until the server says it has none.
        self.functions = True

    # -- the shape both transports share ---------------------------------------------------
    def call(self, c: Call[T]) -> T:
        """Run one script call; its reply, read. With ``c.replicated``, only once the queue's
        replicas have its writes (``WAIT``)."""
        conn = self._connection()
        reply = self._exchange(conn, c)
        if isinstance(reply, Exception):  # it did not run (yet): recovery's loop
            loop = recover_call(c.name, reply, self)
            reply = self._recover(loop, c.name, lambda _: self._exchange(conn, c))
        return c.parse(reply)

    def post(self, c: Call[T], behind: Posted[Any] | None = None) -> Posted[T]:
        """Send one script call and return at once; :meth:`take` reads its reply, which Redis
        works out meanwhile. Posted on a connection this thread keeps for posted calls, not
        the one :meth:`call` uses, so that the thread may make other calls before it takes
        the reply (a handler's own, say); ``behind`` a call posted before it and not yet
        taken, on the same connection (their replies are taken in turn)."""
        conn = self._connection("posting") if behind is None else behind.conn
        return Posted(c, conn, self._send_call(conn, c))

    def take(self, posted: Posted[T]) -> T:
        """The reply of a call :meth:`post` sent, read (as :meth:`call`'s). A call that did
        not run is sent again on the thread's own connection: a call posted behind it waits
        for its reply on the other."""
        c = posted.call
        reply = posted.unsent or self._read_call(posted.conn, c)
        if isinstance(reply, Exception):  # it did not run (yet): recovery's loop
            loop = recover_call(c.name, reply, self)
            reply = self._recover(loop, c.name, lambda _: self._exchange(self._connection(), c))
        return c.parse(reply)

    def batch(self, calls: Sequence[Call[T]]) -> list[T]:
        """Several calls of one script (``save``), pipelined in one round trip; each one's
        reply, read. The first error raises, once every call that could run has."""
        if not calls:
            return []
        results = self._pipelined(calls)
        if settled(results):
            return replies(calls, results)
        # Redo the calls that did not run; the others are stored already, and are never sent
        # twice.
        loop = recover_batch(calls, results, self)
        return self._recover(loop, calls[0].name, lambda again: self._pipelined(again.calls))

    def read(self, step: Read) -> list[Any]:
        """Plain commands in one round trip; their replies."""
        if not step.commands:
            return []
        try:
            if len(step.commands) == 1 and not step.atomic:
                return [self._client.execute_command(*step.commands[0])]  # type: ignore[no-untyped-call]
            pipe = self._client.pipeline(transaction=step.atomic)
            for command in step.commands:
                pipe.execute_command(*command)  # type: ignore[no-untyped-call]
            return pipe.execute()
        except ConnectionError as e:
            raise lost(e) from e

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
                    elif isinstance(step, list):
                        reply = self.batch(step)
                    elif isinstance(step, Read):
                        reply = self.read(step)
                    else:
                        reply = self.call(step)
                except KueError as e:
                    error = e
        finally:
            op.close()  # a step that raised past it: its spans and clean-ups end now

    # -- a worker's wait --------------------------------------------------------------------
    def wait_for_token(
        self, lists: Sequence[tuple[str, bool]], timeout: float, blocked: Callable[[int], None]
    ) -> bool:
        """Block until one of the wake-up ``lists`` (key, whether its token is left there)
        has a token or ``timeout`` seconds pass; a token left is put back (claims take them).
        ``blocked(client_id)`` is called as the wait starts, so that another connection can
        end it early with ``CLIENT UNBLOCK``. True if woken by a token."""
        conn = self._connection()
        try:
            self._send(conn, wait_command(lists, timeout))
            blocked(int(read_reply(conn)))
            reply = read_reply(conn)
        except BaseException:
            conn.disconnect()  # type: ignore[no-untyped-call]
            raise
        back = token_to_put_back(lists, reply)
        if back is not None:
            self._client.lpush(*back)  # not ours to take
        return reply is not None

    # -- the I/O behind them ----------------------------------------------------------------
    def _recover(self, loop: Loop[T], name: str, resend: Callable[[Resend], Any]) -> T:
        """Carry out recovery's ``loop`` for a call (or batch) of script ``name``: send again
        with ``resend``, pause, load (see :mod:`kue_core.store.recovery`)."""
        got: Any = None
        while True:
            try:
                action = loop.send(got)
            except StopIteration as done:
                return cast(T, done.value)
            if isinstance(action, Resend):
                got = resend(action)
            elif isinstance(action, Pause):
                time.sleep(action.seconds)
                got = None
            else:
                got = self._load(name, action)

    def _load(self, name: str, load: Load) -> ResponseError | None:
        """Load script ``name`` or its function, or fall back (``load.what``); ``FUNCTION
        LOAD``'s error reply is returned, for the loop to read."""
        if load.what == FALL_BACK:
            # Also when another thread found out first: this call was sent as FCALL before.
            self.functions = False
        elif load.what == LOAD_SCRIPT:
            self._client.script_load(self._scripts.sources[name])
        else:
            code = self._scripts.libraries[name].code
            try:
                self._client.execute_command("FUNCTION", "LOAD", code)  # type: ignore[no-untyped-call]
            except ResponseError as e:
                return e
        return None

    def _connection(self, which: str = "own") -> AbstractConnection:
        """This thread's own connection (or the one it posts calls on: ``"posting"``), made
        again if the server closed it."""
        own: ThreadConnection | None = getattr(self._local, which, None)
        if own is None:
            try:  # the pool connects it: nothing is sent yet
                own = ThreadConnection(self._client.connection_pool)
            except ConnectionError as e:
                raise lost(e) from e
            setattr(self._local, which, own)
        conn = own.conn
        if stale(conn):
            conn.disconnect()  # type: ignore[no-untyped-call]
        return conn

    _send = staticmethod(send)

    def _exchange(self, conn: AbstractConnection, c: Call[Any]) -> Any:
        """Send call ``c`` once on this thread's connection ``conn`` and read its reply (then,
        with ``c.replicated``, ``WAIT``'s): the reply, the error reply (or redirect) as the
        exception, or :class:`Unsent` when the send failed (nothing reached Redis)."""
        unsent = self._send_call(conn, c)
        return unsent if unsent is not None else self._read_call(conn, c)

    def _send_call(self, conn: AbstractConnection, c: Call[Any]) -> Unsent | None:
        """Send call ``c`` once on ``conn``: :class:`Unsent` when the send failed."""
        command = self._scripts.command(c.name, self.functions)
        packed = pack(*command, 1, c.key, self._keys.prefix, *c.args)
        try:
            self._send(conn, packed)
        except ConnectionError as e:
            # Nothing reached Redis (a command is run whole or not at all): sent again (if at
            # all) on a new connection.
            conn.disconnect()  # type: ignore[no-untyped-call]
            return Unsent(str(e))
        except BaseException:
            conn.disconnect()  # type: ignore[no-untyped-call]  # part of it may be sent
            raise
        return None

    def _read_call(self, conn: AbstractConnection, c: Call[Any]) -> Any:
        """The reply of call ``c`` sent on ``conn`` (see :meth:`_exchange`)."""
        try:
            reply = read_reply(conn)
            if c.replicated and self.replicas:
                # WAIT counts the replicas that have this connection's writes so far.
                self._send(conn, wait(self.replicas))
                confirmed(read_reply(conn), self.replicas)
            return reply
        except (ResponseError, Redirected) as e:  # one error reply: still in step
            if isinstance(e, Redirected) and e.elsewhere:
                conn.disconnect()  # type: ignore[no-untyped-call]  # to the new owner next
            return e
        except BaseException:
            # The reply is unknown (and may still arrive): never reuse this connection.
            conn.disconnect()  # type: ignore[no-untyped-call]
            raise

    def _pipelined(self, calls: Sequence[Call[Any]]) -> list[Any]:
        """Send ``calls`` in one write on this thread's connection and read each reply (an
        error reply, or a redirect, as the exception in its place). Sent once: a redis-py
        pipeline would send it all again after a lost connection or a redirect, and the
        calls that had run would run twice."""
        packed, waits = pack_batch(
            calls, self._scripts, self.functions, self._keys.prefix, self.replicas
        )
        conn = self._connection()
        results: list[Any] = []
        try:
            if getattr(conn, "_sock", None) is None:
                try:
                    conn.connect()  # type: ignore[no-untyped-call]
                except ConnectionError as e:  # nothing was sent
                    raise unreachable(calls[0].name, e) from e
            self._send(conn, packed)
            for _ in range(len(calls) + waits):
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
            confirmed(results.pop(), self.replicas)
        return results
