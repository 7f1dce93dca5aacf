"""The transition scripts on an asyncio connection, for :mod:`kue_core.aio`: runs the script
calls (:mod:`kue_core.store.calls`) and operations (:mod:`kue_core.jobs.ops`) that
:class:`kue_core.store.scripts.Scripts` runs on a blocking one, with the same recovery (a server
that lost its functions or scripts, or has none) and the same errors."""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Sequence
from typing import Any, TypeVar, cast

import redis.asyncio
from redis.exceptions import ConnectionError, NoScriptError, ResponseError

from .. import defaults
from ..base.errors import ConnectionFailed, KueError
from ..base.keys import Keys
from .aio_pipe import Pipe, Unsent
from .calls import Call, Op, Read
from .cluster import Redirected
from .lua_source import SCRIPT_NAMES, function_library, script_source
from .runner import Redirects, confirmed, no_functions, pack, translate, unsent

T = TypeVar("T")


class AsyncScripts:
    """The transition scripts on an asyncio client: runs :mod:`kue_core.store.calls` and
    :mod:`kue_core.jobs.ops` as :class:`kue_core.store.scripts.Scripts` does, as Redis functions
    where the
    server has them, else as scripts."""

    def __init__(self, client: redis.asyncio.Redis, keys: Keys, replicas: int = 0) -> None:
        self._client = client
        self._keys = keys
        self.replicas = replicas
        self._libraries = {name: function_library(name) for name in SCRIPT_NAMES}
        self._sources = {name: script_source(name) for name in SCRIPT_NAMES}
        self._shas = {
            name: hashlib.sha1(source.encode()).hexdigest()
            for name, source in self._sources.items()
        }
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

    def _command(self, c: Call[Any]) -> tuple[Any, ...]:
        how = (
            ("FCALL", self._libraries[c.name].name)
            if self.functions
            else ("EVALSHA", self._shas[c.name])
        )
        return (*how, 1, c.key, self._keys.prefix, *c.args)

    async def _recovered(self, name: str, error: ResponseError, sent: int) -> bool:
        """Whether ``error`` says script ``name`` did not run for want of its function or
        script, made right (see ``Scripts._recovered``). ``sent``: the loads counted when
        the call was sent; calls that failed at once load the code once, not each."""
        if no_functions(error):
            # Also when another call found out first: this one was sent as FCALL before.
            self.functions = False
            return True
        missing = isinstance(error, NoScriptError) or (
            self.functions and str(error).startswith("Function not found")
        )
        if not missing:
            return False
        async with self._loading, self._slots:
            if self._loads != sent:
                return True  # loaded since this call was sent
            self._loads += 1
            if isinstance(error, NoScriptError):
                await self._client.script_load(self._sources[name])
                return True
            try:
                code = self._libraries[name].code
                await self._client.execute_command("FUNCTION", "LOAD", code)  # type: ignore[no-untyped-call]
            except ResponseError as e:
                if no_functions(e):
                    self.functions = False
                elif "already exists" not in str(e):
                    raise
        return True

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

    async def call(self, c: Call[T]) -> T:
        """Run one script call; its reply, read. With ``c.replicated``, only once the
        queue's replicas have its writes (``WAIT``, sent with it)."""
        waits = c.replicated and self.replicas
        failures = 0
        redirects: Redirects | None = None
        while failures < 3:
            sent = self._loads
            packed = pack(*self._command(c))
            if waits:
                packed += pack("WAIT", self.replicas, defaults.REPLICA_TIMEOUT_MS)
            try:
                if waits:
                    replies = await self._exchange(packed, 2)
                else:
                    replies = await self._pipe.exchange(packed, 1)
            except Unsent as unsent:
                failures += 1
                if failures == 3:
                    raise ConnectionFailed(
                        f"could not send the {c.name} script: {unsent}"
                    ) from None
                continue  # safe to send again, on a fresh connection
            reply = replies[0]
            if isinstance(reply, Redirected):
                # It did not run: the cluster moved the slot, or is moving it. Send it again
                # (to the new owner) for as long as a move may take.
                redirects = redirects or Redirects()
                await asyncio.sleep(redirects.pause(reply))
                continue
            if isinstance(reply, ResponseError):
                if not await self._recovered(c.name, reply, sent):
                    raise translate(reply) from None
                failures += 1
                continue
            if waits:
                confirmed(replies[1], self.replicas)
            return c.parse(reply)
        raise ConnectionFailed(f"could not run the {c.name} script")

    async def batch(self, batch: Sequence[Call[T]]) -> list[T]:
        """Several calls of one script in one round trip (see ``Scripts.batch``)."""
        if not batch:
            return []
        sent = self._loads
        results = await self._pipelined(batch)
        loads = 0
        redirects: Redirects | None = None
        while missing := [r for r in results if unsent(r)]:
            # Redo the calls that did not run (see Scripts.batch), never the others.
            if isinstance(missing[0], Redirected):
                redirects = redirects or Redirects()
                await asyncio.sleep(redirects.pause(missing[0]))
            elif loads == 2 or not await self._recovered(batch[0].name, missing[0], sent):
                break
            else:
                loads += 1
            redo = [c for c, r in zip(batch, results, strict=True) if unsent(r)]
            sent = self._loads
            again = iter(await self._pipelined(redo))
            results = [next(again) if unsent(r) else r for r in results]
        for r in results:
            if isinstance(r, ResponseError):
                raise translate(r)
            if isinstance(r, Exception):
                raise r
        return [c.parse(r) for c, r in zip(batch, results, strict=True)]

    async def _pipelined(self, batch: Sequence[Call[Any]]) -> list[Any]:
        """Send ``batch`` in one write and read each reply (see ``Scripts._pipelined``: sent
        once, never again whole)."""
        waits = bool(self.replicas) and any(c.replicated for c in batch)
        packed = b"".join(pack(*self._command(c)) for c in batch)
        if waits:
            packed += pack("WAIT", self.replicas, defaults.REPLICA_TIMEOUT_MS)
        try:
            results = await self._exchange(packed, len(batch) + waits)
        except Unsent as e:
            raise ConnectionFailed(f"could not send the {batch[0].name} script: {e}") from None
        if waits:
            replicas = results.pop()
            if isinstance(replicas, Exception):
                raise replicas
            confirmed(replicas, self.replicas)
        return results

    async def read(self, step: Read) -> list[Any]:
        """Plain commands in one round trip; their replies."""
        if not step.commands:
            return []
        if len(step.commands) == 1:
            async with self._slots:
                return [await self._client.execute_command(*step.commands[0])]  # type: ignore[no-untyped-call]
        pipe = self._client.pipeline(transaction=False)
        for command in step.commands:
            pipe.execute_command(*command)
        async with self._slots:
            return list(await pipe.execute())

    async def close(self) -> None:
        """Stop the pipelined connection (calls under way get ``ConnectionError``)."""
        await self._pipe.close()

    async def drive(self, op: Op[T]) -> T:
        """Run an operation to its end (see ``Scripts.drive``)."""
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
