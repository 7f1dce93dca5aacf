"""The asyncio transport, for :mod:`kue_core.aio`: runs the script calls
(:mod:`kue_core.store.calls`) and operations (:mod:`kue_core.jobs.ops`) as the blocking one
(:mod:`kue_core.store.transport`) does, with the same shape (``call``, ``batch``, ``read``,
``drive``), the same decisions when a call did not run (:mod:`kue_core.store.recovery`) and the
same errors. Calls share one pipelined connection (:mod:`kue_core.store.aio_pipe`)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar, cast

import redis.asyncio
from redis.exceptions import ConnectionError, ResponseError

from .. import defaults
from ..base.errors import KueError
from ..base.keys import Keys
from .aio_pipe import Pipe, Replies
from .calls import Call, Op, Read
from .cluster import Redirected
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


class AsyncTransport:
    """Runs script calls and operations for one asyncio Redis client and one key prefix, as
    Redis functions where the server has them, else as scripts."""

    def __init__(self, client: redis.asyncio.Redis, keys: Keys, replicas: int = 0) -> None:
        self._client = client
        self._keys = keys
        #: Replicas that must confirm a save before it returns (Redis ``WAIT``).
        self.replicas = replicas
        self._scripts = lua_scripts()
        #: Calls under way at once, at most: each holds a connection (event streams' are
        #: apart), so that a thousand saves at once share ``AIO_CONNECTIONS`` connections.
        self._slots = asyncio.Semaphore(defaults.AIO_CONNECTIONS)
        #: The connection every other script call shares, pipelined (see kue_core.store.aio_pipe).
        self._pipe = Pipe(client)
        #: Held while a lost function or script is loaded; ``_loads`` counts the loads of
        #: each script (each is a library of its own: a load of one does not bring another).
        self._loading = asyncio.Lock()
        self._loads: dict[str, int] = {}
        #: Whether the scripts run as Redis functions: until the server says it has none.
        self.functions = True

    # -- the shape both transports share ---------------------------------------------------
    async def call(self, c: Call[T]) -> T:
        """Run one script call; its reply, read. With ``c.replicated``, only once the
        queue's replicas have its writes (``WAIT``, sent with it)."""
        sent = self._loads.get(c.name, 0)
        try:
            reply = self._replied(await self._sending(c))
        except Unsent as e:
            reply = e
        if isinstance(reply, Exception):  # it did not run (yet): recovery's loop
            loop = recover_call(c.name, reply, self)
            reply = await self._recover(loop, c.name, lambda _: self._again(c), sent)
        return c.parse(reply)

    async def batch(self, calls: Sequence[Call[T]]) -> list[T]:
        """Several calls of one script in one round trip (see ``Transport.batch``)."""
        if not calls:
            return []
        sent = self._loads.get(calls[0].name, 0)
        results = await self._pipelined(calls)
        if settled(results):
            return replies(calls, results)
        # Redo the calls that did not run (see Transport.batch), never the others.
        loop = recover_batch(calls, results, self)
        return await self._recover(loop, calls[0].name, lambda a: self._pipelined(a.calls), sent)

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

    async def wait_for_token(
        self, lists: Sequence[tuple[str, bool]], timeout: float, blocked: Callable[[int], None]
    ) -> bool:
        """Wait until one of the wake-up ``lists`` (key, whether its token is left there) has
        a token or ``timeout`` seconds pass, as ``Transport.wait_for_token`` does, on a
        connection of its own for the wait (not counted among the calls at once):
        ``blocked(client_id)`` as it starts, so that ``CLIENT UNBLOCK`` ends it early. True if
        woken by a token."""
        pool = self._client.connection_pool
        try:
            conn = await pool.get_connection()  # type: ignore[no-untyped-call]
        except ConnectionError as e:
            raise lost(e) from e
        try:
            await conn.send_packed_command(wait_command(lists, timeout))
            take = Replies(conn).take
            blocked(int(await take()))
            reply = await take()
        except BaseException as e:
            await conn.disconnect()  # its replies are unknown: never reused
            if isinstance(e, ConnectionError):
                raise lost(e) from e
            raise
        finally:
            await pool.release(conn)
        back = token_to_put_back(lists, reply)
        if back is not None:
            await self._pipe.exchange(pack("LPUSH", *back), 1)  # not ours to take
        return reply is not None

    async def close(self) -> None:
        """Stop the pipelined connection (calls under way get ``ConnectionError``)."""
        await self._pipe.close()

    # -- the I/O behind them ----------------------------------------------------------------
    def _sending(self, c: Call[Any]) -> Awaitable[list[Any]]:
        """Call ``c`` sent once: its reply (then, with ``c.replicated``, ``WAIT``'s), error
        replies as exceptions; ``Unsent`` when it reached no connection."""
        command = self._scripts.command(c.name, self.functions)
        packed = pack(*command, 1, c.key, self._keys.prefix, *c.args)
        if c.replicated and self.replicas:
            return self._exchange(packed + wait(self.replicas), 2)
        return self._pipe.exchange(packed, 1)

    def _replied(self, got: list[Any]) -> Any:
        """The call's reply of what ``_sending`` got, ``WAIT``'s confirmed."""
        reply = got[0]
        if len(got) > 1 and not isinstance(reply, Exception):
            confirmed(got[1], self.replicas)
        return reply

    async def _again(self, c: Call[Any]) -> Any:
        """Call ``c`` sent again (recovery's ``Resend``): its reply, error reply or Unsent."""
        try:
            return self._replied(await self._sending(c))
        except Unsent as e:
            return e

    async def _recover(
        self, loop: Loop[T], name: str, resend: Callable[[Resend], Awaitable[Any]], sent: int
    ) -> T:
        """Carry out recovery's ``loop`` for a call (or batch) of script ``name`` (see
        ``Transport._recover``); ``sent``: the loads of the script counted when it was first
        sent."""
        got: Any = None
        while True:
            try:
                action = loop.send(got)
            except StopIteration as done:
                return cast(T, done.value)
            if isinstance(action, Resend):
                sent = self._loads.get(name, 0)
                got = await resend(action)
            elif isinstance(action, Pause):
                await asyncio.sleep(action.seconds)
                got = None
            else:
                got = await self._load(name, action, sent)

    async def _load(self, name: str, load: Load, sent: int) -> ResponseError | None:
        """Load script ``name`` or its function, or fall back (``load.what``); ``FUNCTION
        LOAD``'s error reply is returned, for the loop to read. ``sent``: the loads of
        ``name`` counted when the call was sent; calls of it that failed at once load the code
        once, not each (a load of another script is no load of this one)."""
        if load.what == FALL_BACK:
            # Also when another call found out first: this one was sent as FCALL before.
            self.functions = False
            return None
        async with self._loading, self._slots:
            if self._loads.get(name, 0) != sent:
                return None  # loaded since this call was sent
            self._loads[name] = sent + 1
            if load.what == LOAD_SCRIPT:
                await self._client.script_load(self._scripts.sources[name])
                return None
            code = self._scripts.libraries[name].code
            try:
                await self._client.execute_command("FUNCTION", "LOAD", code)  # type: ignore[no-untyped-call]
            except ResponseError as e:
                return e
            return None

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
        packed, waits = pack_batch(
            calls, self._scripts, self.functions, self._keys.prefix, self.replicas
        )
        try:
            results = await self._exchange(packed, len(calls) + waits)
        except Unsent as e:
            raise unreachable(calls[0].name, e) from None
        if waits:
            confirmed(results.pop(), self.replicas)
        return results
