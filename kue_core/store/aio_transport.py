"""The asyncio transport, for :mod:`kue_core.aio`: runs the script calls
(:mod:`kue_core.store.calls`) and operations (:mod:`kue_core.jobs.ops`) as the blocking one
(:mod:`kue_core.store.transport`) does, with the same shape (``call``, ``batch``, ``read``,
``drive``), the same decisions when a call did not run (:mod:`kue_core.store.recovery`) and the
same errors. Calls share one pipelined connection (:mod:`kue_core.store.aio_pipe`)."""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Sequence
from typing import Any, TypeVar, cast

import redis.asyncio
from redis.exceptions import ConnectionError, ResponseError

from .. import defaults
from ..base.errors import KueError
from ..base.keys import Keys
from .aio_pipe import Pipe, Unsent
from .calls import Call, Op, Read
from .cluster import Redirected
from .lua_source import SCRIPT_NAMES, function_library, script_source
from .recovery import (
    FALL_BACK,
    LOAD_SCRIPT,
    RAISE,
    REDIRECT,
    TRIES,
    Redirects,
    batch_remedy,
    confirmed,
    load_failed,
    lost,
    merged,
    redo,
    remedy,
    replies,
    translate,
    unreachable,
    unrecoverable,
)
from .transport import pack

T = TypeVar("T")


class AsyncTransport:
    """Runs script calls and operations for one asyncio Redis client and one key prefix, as
    Redis functions where the server has them, else as scripts."""

    def __init__(self, client: redis.asyncio.Redis, keys: Keys, replicas: int = 0) -> None:
        self._client = client
        self._keys = keys
        #: Replicas that must confirm a save before it returns (Redis ``WAIT``).
        self.replicas = replicas
        self._sources = {name: script_source(name) for name in SCRIPT_NAMES}
        self._shas = {
            name: hashlib.sha1(source.encode()).hexdigest()
            for name, source in self._sources.items()
        }
        self._libraries = {name: function_library(name) for name in SCRIPT_NAMES}
        #: Calls under way at once, at most: each holds a connection (event streams' are
        #: apart), so that a thousand saves at once share ``AIO_CONNECTIONS`` connections.
        self._slots = asyncio.Semaphore(defaults.AIO_CONNECTIONS)
        #: The connection every other script call shares, pipelined (see kue_core.store.aio_pipe).
        self._pipe = Pipe(client)
        #: Held while a lost function or script is loaded; ``_loads`` counts the loads.
        self._loading = asyncio.Lock()
        self._loads = 0
        #: Whether the scripts run as Redis functions: until the server says it has none.
        self.functions = True

    # -- the shape both transports share ---------------------------------------------------
    async def call(self, c: Call[T]) -> T:
        """Run one script call; its reply, read. With ``c.replicated``, only once the
        queue's replicas have its writes (``WAIT``, sent with it)."""
        waits = c.replicated and self.replicas
        tries = 0
        redirects: Redirects | None = None
        while True:
            sent = self._loads
            packed = pack(*self._command(c))
            if waits:
                packed += pack("WAIT", self.replicas, defaults.REPLICA_TIMEOUT_MS)
            try:
                if waits:
                    got = await self._exchange(packed, 2)
                else:
                    got = await self._pipe.exchange(packed, 1)
            except Unsent as e:
                # Nothing reached Redis: safe to send again, on a new connection.
                tries += 1
                if tries == TRIES:
                    raise unreachable(c.name, e) from None
                continue
            reply = got[0]
            if isinstance(reply, (ResponseError, Redirected)):  # one error reply
                what = remedy(reply, self.functions)
                if what == RAISE:
                    raise translate(reply) from None
                if what == REDIRECT:
                    # It did not run: the cluster moved the slot, or is moving it. Send it
                    # again (to the new owner) for as long as a move may take.
                    redirects = redirects or Redirects()
                    await asyncio.sleep(redirects.pause(cast(Redirected, reply)))
                    continue
                tries += 1
                if tries == TRIES:
                    raise unrecoverable(c.name)
                await self._load(c.name, what, sent)
                continue
            if waits:
                if isinstance(got[1], Exception):
                    raise got[1]
                confirmed(got[1], self.replicas)
            return c.parse(reply)

    async def batch(self, calls: Sequence[Call[T]]) -> list[T]:
        """Several calls of one script in one round trip (see ``Transport.batch``)."""
        if not calls:
            return []
        name = calls[0].name
        sent = self._loads
        results = await self._pipelined(calls)
        loads = 0
        redirects: Redirects | None = None
        while (todo := batch_remedy(results, loads, self.functions)) is not None:
            # Redo the calls that did not run (see Transport.batch), never the others.
            what, first = todo
            if what == REDIRECT:
                redirects = redirects or Redirects()
                await asyncio.sleep(redirects.pause(first))
            elif what == RAISE:
                break
            else:
                loads += 1
                await self._load(name, what, sent)
            sent = self._loads
            results = merged(results, await self._pipelined(redo(calls, results)))
        return replies(calls, results)

    async def read(self, step: Read) -> list[Any]:
        """Plain commands in one round trip; their replies."""
        if not step.commands:
            return []
        try:
            if len(step.commands) == 1 and not step.atomic:
                async with self._slots:
                    return [await self._client.execute_command(*step.commands[0])]  # type: ignore[no-untyped-call]
            pipe = self._client.pipeline(transaction=step.atomic)
            for command in step.commands:
                pipe.execute_command(*command)
            async with self._slots:
                return list(await pipe.execute())
        except ConnectionError as e:
            raise lost(e) from e

    async def drive(self, op: Op[T]) -> T:
        """Run an operation to its end (see ``Transport.drive``)."""
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
                    if isinstance(step, list):
                        reply = await self.batch(step)
                    elif isinstance(step, Read):
                        reply = await self.read(step)
                    else:
                        reply = await self.call(step)
                except KueError as e:
                    error = e
        finally:
            op.close()  # a step that raised past it (or a cancel): its spans end now

    async def close(self) -> None:
        """Stop the pipelined connection (calls under way get ``ConnectionError``)."""
        await self._pipe.close()

    # -- the I/O behind them ----------------------------------------------------------------
    def _command(self, c: Call[Any]) -> tuple[Any, ...]:
        how = (
            ("FCALL", self._libraries[c.name].name)
            if self.functions
            else ("EVALSHA", self._shas[c.name])
        )
        return (*how, 1, c.key, self._keys.prefix, *c.args)

    async def _load(self, name: str, what: str, sent: int) -> None:
        """Carry out the remedy ``what`` (see :mod:`kue_core.store.recovery`) for script
        ``name``, which did not run for want of its function or script. ``sent``: the loads
        counted when the call was sent; calls that failed at once load the code once, not
        each."""
        if what == FALL_BACK:
            # Also when another call found out first: this one was sent as FCALL before.
            self.functions = False
            return
        async with self._loading, self._slots:
            if self._loads != sent:
                return  # loaded since this call was sent
            self._loads += 1
            if what == LOAD_SCRIPT:
                await self._client.script_load(self._sources[name])
                return
            try:
                code = self._libraries[name].code
                await self._client.execute_command("FUNCTION", "LOAD", code)  # type: ignore[no-untyped-call]
            except ResponseError as e:
                after = load_failed(e)
                if after == FALL_BACK:
                    self.functions = False
                elif after == RAISE:
                    raise

    async def _exchange(self, packed: bytes, replies: int) -> list[Any]:
        """Send ``packed`` (commands packed by hiredis, in C: most of a call's client-side
        cost) on a pooled connection of its own and read ``replies`` replies, error replies
        as exceptions in the list. ``Unsent`` when no connection could be had: nothing was
        sent.
        For a call followed by ``WAIT``, which holds its connection's replies back until the
        replicas confirm: the pipe's other calls do not wait behind it."""
        pool = self._client.connection_pool
        async with self._slots:
            return await self._exchanged(pool, packed, replies)

    async def _exchanged(self, pool: Any, packed: bytes, replies: int) -> list[Any]:
        try:
            conn = await pool.get_connection()
        except ConnectionError as e:
            raise Unsent(str(e)) from e  # nothing was sent
        try:
            # A send that fails may have delivered a command: it is not sent again.
            await conn.send_packed_command(packed)
            out: list[Any] = []
            for _ in range(replies):
                try:
                    out.append(await conn.read_response())
                except (ResponseError, Redirected) as e:  # one error reply: still in step
                    out.append(e)
            if any(isinstance(r, Redirected) and r.elsewhere for r in out):
                await conn.disconnect()  # to the new owner next time
            return out
        except BaseException:
            # The replies are unknown (and may still arrive): never reuse this connection.
            await conn.disconnect()
            raise
        finally:
            await pool.release(conn)

    async def _pipelined(self, calls: Sequence[Call[Any]]) -> list[Any]:
        """Send ``calls`` in one write and read each reply (see ``Transport._pipelined``: sent
        once, never again whole)."""
        waits = bool(self.replicas) and any(c.replicated for c in calls)
        packed = b"".join(pack(*self._command(c)) for c in calls)
        if waits:
            packed += pack("WAIT", self.replicas, defaults.REPLICA_TIMEOUT_MS)
        try:
            results = await self._exchange(packed, len(calls) + waits)
        except Unsent as e:
            raise unreachable(calls[0].name, e) from None
        if waits:
            replicas = results.pop()
            if isinstance(replicas, Exception):
                raise replicas
            confirmed(replicas, self.replicas)
        return results
