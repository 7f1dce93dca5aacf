"""One connection that carries every script call of an ``AsyncQueue`` at once, pipelined.

Calls made while others are under way go out together in one write, and their replies come
back in order on the same connection: a thousand saves at once cost Redis one read of many
commands rather than a read on each of fifty sockets, and the client one send and one
receive per batch rather than per call (ioredis does the same for BullMQ). Replies are read
by one task and handed to their callers in order; a caller that gives up (cancelled) leaves
its reply to be read and dropped, so the connection stays in step.

A call whose write failed gets :class:`Unsent` (nothing reached Redis: safe to send again);
a call whose reply was lost with its connection gets the connection's error (it may have
run). The next call opens a new connection.
"""

from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import redis.asyncio
from redis.exceptions import ResponseError


class Unsent(Exception):
    """A call whose write failed: nothing reached Redis, so it may be sent again."""


@dataclass
class _Call:
    packed: bytes
    replies: int
    future: asyncio.Future[list[Any]]
    got: list[Any] = field(default_factory=list)


class Pipe:
    """The pipelined connection of one client (see the module's doc)."""

    def __init__(self, client: redis.asyncio.Redis) -> None:
        self._client = client
        self._conn: Any = None
        self._queued: deque[_Call] = deque()  # to write, in order
        self._sent: deque[_Call] = deque()  # written, their replies to read, in order
        self._writer: asyncio.Task[None] | None = None
        self._reader: asyncio.Task[None] | None = None

    async def exchange(self, packed: bytes, replies: int) -> list[Any]:
        """Send ``packed`` (commands packed by hiredis) and read its ``replies`` replies,
        error replies as exceptions in the list."""
        loop = asyncio.get_running_loop()
        call = _Call(packed, replies, loop.create_future())
        self._queued.append(call)
        if self._writer is None:
            self._writer = loop.create_task(self._write())
        return await call.future

    async def _write(self) -> None:
        try:
            while self._queued:
                batch = list(self._queued)
                self._queued.clear()
                try:
                    if self._conn is None:
                        self._conn = await self._client.connection_pool.get_connection()  # type: ignore[no-untyped-call]
                    # No health check: its PING's reply would come amid the calls'.
                    await self._conn.send_packed_command(
                        b"".join(c.packed for c in batch), check_health=False
                    )
                except Exception as e:
                    # Not written (or not wholly: the connection goes, and what it had with it).
                    self._fail(batch, Unsent(str(e)))
                    await self._drop(e)
                    continue
                self._sent.extend(batch)
                if self._reader is None:
                    self._reader = asyncio.get_running_loop().create_task(self._read())
        finally:
            self._writer = None

    async def _read(self) -> None:
        try:
            while self._sent:
                call = self._sent[0]
                try:
                    reply = await self._conn.read_response()
                except ResponseError as e:
                    reply = e
                call.got.append(reply)
                if len(call.got) == call.replies:
                    self._sent.popleft()
                    if not call.future.done():  # else its caller gave up: dropped
                        call.future.set_result(call.got)
        except BaseException as e:
            await self._drop(e)
            if isinstance(e, asyncio.CancelledError):
                raise
        finally:
            self._reader = None

    async def _drop(self, error: BaseException) -> None:
        """The connection failed (or the pipe closes): the calls whose replies it owed get
        the error, and the next call opens a new connection."""
        owed = list(self._sent)
        self._sent.clear()
        self._fail(owed, error if isinstance(error, Exception) else ConnectionError(str(error)))
        conn, self._conn = self._conn, None
        if conn is not None:
            await conn.disconnect()
            await self._client.connection_pool.release(conn)

    @staticmethod
    def _fail(calls: list[_Call], error: Exception) -> None:
        for call in calls:
            if not call.future.done():
                call.future.set_exception(error)

    async def close(self) -> None:
        """Stop reading and writing; calls under way get ``ConnectionError``."""
        for task in (self._writer, self._reader):
            if task is not None:
                task.cancel()
        queued = list(self._queued)
        self._queued.clear()
        self._fail(queued, Unsent("the queue is closed"))
        await self._drop(ConnectionError("the queue is closed"))
