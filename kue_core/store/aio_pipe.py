"""One connection that carries every script call of an ``AsyncQueue`` at once, pipelined.

Calls made while others are under way go out together in one write, and their replies come
back in order on the same connection: a thousand saves at once cost Redis one read of many
commands rather than a read on each of fifty sockets, and the client one send and one
receive per batch rather than per call (ioredis does the same for BullMQ).

Each connection has the calls it owes replies to, in the order they were written, and one
task reading them; a caller that gives up (cancelled) leaves its reply to be read and dropped,
so the connection stays in step. When a connection fails, the calls it owed get
``ConnectionError`` (they may have run: their replies are lost) and the next call opens a new
connection; a call that never reached a connection (none could be opened) gets
:class:`Unsent`, and may be sent again. An idle connection is checked before it is written
to, so one closed by the server meanwhile (a restart, a timeout) is replaced, not failed on.
"""

from __future__ import annotations

import asyncio
import select
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import redis.asyncio
import redis.asyncio.connection
from redis.exceptions import ConnectionError, ResponseError

from ..base.errors import ConnectionFailed
from .cluster import Redirected
from .recovery import Unsent

_MORE: Any
try:  # what redis-py's hiredis parser gives for a reply not all read yet
    from redis._parsers.hiredis import NOT_ENOUGH_DATA as _MORE
except ImportError:  # pragma: no cover - another layout: read_response for every reply
    _MORE = None
_STOCK_READ = redis.asyncio.connection.AbstractConnection.read_response


@dataclass
class _Call:
    packed: bytes
    replies: int
    future: asyncio.Future[list[Any]]
    got: list[Any] = field(default_factory=list)


@dataclass(eq=False)
class _Line:
    """One connection: the calls written to it whose replies are owed, and their reader."""

    conn: Any
    owed: deque[_Call] = field(default_factory=deque)
    reader: asyncio.Task[None] | None = None
    dropped: bool = False
    #: Written to no more (its node no longer serves the queue): dropped once it owes nothing.
    retired: bool = False
    #: How its replies are read, by one reader task after another (one timer for them all).
    replies: Replies | None = None


def _fail(calls: list[_Call], error: Exception) -> None:
    for call in calls:
        if not call.future.done():
            call.future.set_exception(error)


class Pipe:
    """The pipelined connection of one client (see the module's doc)."""

    def __init__(self, client: redis.asyncio.Redis) -> None:
        self._client = client
        self._line: _Line | None = None  # where writes go
        self._queued: deque[_Call] = deque()  # to write, in order
        self._writing: list[_Call] = []  # taken off the queue, not yet owed by a line
        self._writer: asyncio.Task[None] | None = None
        self._closed = False
        #: Lines to a node that no longer serves the queue, still owed replies.
        self._retired: set[_Line] = set()

    async def exchange(self, packed: bytes, replies: int) -> list[Any]:
        """Send ``packed`` (commands packed by hiredis) and read its ``replies`` replies,
        error replies as exceptions in the list."""
        if self._closed:
            raise ConnectionFailed("the queue is closed")
        loop = asyncio.get_running_loop()
        call = _Call(packed, replies, loop.create_future())
        line = self._line
        if self._writer is None and line is not None and self._ready(line):
            # Nothing else is being written and the line is good: write here and now, which
            # spares a call made alone (one at a time, say) a task and its turns of the loop.
            line.owed.append(call)
            if line.reader is None:
                line.reader = loop.create_task(self._read(line))
            try:
                await _put(line.conn, packed)
            except Exception as e:
                await self._drop(line, e)
            return await call.future
        self._queued.append(call)
        if self._writer is None:
            self._writer = loop.create_task(self._write())
        return await call.future

    def _ready(self, line: _Line) -> bool:
        """Whether ``line`` can be written to at once, without a check that waits."""
        if self._queued or line.dropped or _stale(line.conn):
            return False
        return bool(line.owed) or _sound_now(line.conn) is True

    async def _write(self) -> None:
        try:
            while self._queued and not self._closed:
                self._writing = list(self._queued)
                self._queued.clear()
                try:
                    line = await self._open()
                except Exception as e:  # nothing was sent
                    _fail(self._writing, Unsent(str(e)))
                    self._writing = []
                    continue
                batch, self._writing = self._writing, []
                line.owed.extend(batch)  # from here the line answers for them
                try:
                    # No health check: its PING's reply would come amid the calls'.
                    await _put(line.conn, b"".join(c.packed for c in batch))
                except Exception as e:
                    await self._drop(line, e)  # a part may have gone: they may have run
                    continue
                if line.reader is None and not line.dropped:
                    line.reader = asyncio.get_running_loop().create_task(self._read(line))
        except BaseException as e:  # cancelled by close()
            _fail(self._writing, ConnectionFailed(f"the queue is closed ({e!r})"))
            self._writing = []
            raise
        finally:
            self._writer = None

    async def _open(self) -> _Line:
        """The line to write to: the current one if it is still good, else a new one."""
        line = self._line
        if line is not None and _stale(line.conn):
            if line.owed:
                line.retired, self._line = True, None  # its reader drops it when done
                self._retired.add(line)
            else:
                await self._drop(line, ConnectionError("its node no longer serves the queue"))
            line = None
        elif line is not None and not line.owed and not await _sound(line.conn):
            await self._drop(line, ConnectionError("closed by the server while idle"))
            line = None
        if line is None:
            conn = await self._client.connection_pool.get_connection()  # type: ignore[no-untyped-call]
            line = self._line = _Line(conn)
        return line

    async def _read(self, line: _Line) -> None:
        if line.replies is None:
            line.replies = Replies(line.conn)
        line.replies.task = line.reader
        take = line.replies.take
        try:
            while line.owed:
                call = line.owed[0]
                try:
                    reply = await take()
                except (ResponseError, Redirected) as e:  # an error reply: still in step
                    reply = e
                call.got.append(reply)
                if len(call.got) == call.replies:
                    line.owed.popleft()
                    if not call.future.done():  # else its caller gave up: dropped
                        call.future.set_result(call.got)
        except BaseException as e:
            line.reader = None  # this task: _drop must not cancel it
            await self._drop(line, e)
            if isinstance(e, asyncio.CancelledError):
                raise
        finally:
            line.reader = None
        if line.retired:
            await self._drop(line, ConnectionError("retired"))  # it owes nothing now

    async def _drop(self, line: _Line, error: BaseException) -> None:
        """``line`` failed (or the pipe closes): the calls it owed get a ``ConnectionError``,
        and the next call opens a new line. Once per line."""
        if line.dropped:
            return
        line.dropped = True
        self._retired.discard(line)
        if self._line is line:
            self._line = None
        owed = list(line.owed)
        line.owed.clear()
        _fail(owed, ConnectionError(f"the connection to Redis was lost: {error!r}"))
        reader, line.reader = line.reader, None
        if reader is not None and reader is not asyncio.current_task():
            reader.cancel()
        try:
            await line.conn.disconnect()
        finally:
            await self._client.connection_pool.release(line.conn)

    async def close(self) -> None:
        """Stop writing and reading; calls under way get ``ConnectionFailed`` (not sent) or
        ``ConnectionError`` (sent)."""
        self._closed = True
        queued = list(self._queued)
        self._queued.clear()
        _fail(queued, ConnectionFailed("the queue is closed"))
        writer = self._writer
        if writer is not None:
            writer.cancel()
        lines = [*self._retired, *([self._line] if self._line is not None else [])]
        readers = [line.reader for line in lines if line.reader is not None]
        for line in lines:
            await self._drop(line, ConnectionFailed("the queue is closed"))
        await asyncio.gather(
            *(t for t in (writer, *readers) if t is not None), return_exceptions=True
        )


class Replies:
    """The replies of one connection, read by one task at a time (``task``: the one that
    makes this, or the one set since): the pipe's readers, or a worker's blocking wait.

    With redis-py's hiredis parser, a reply already in its buffer is taken at once, and a
    socket read sets no timer of its own: redis-py's ``read_response`` sets up a timeout for
    every reply (and asks for the running loop four times, each a ``getpid()`` on Python
    3.11), which was a tenth of a worker's Python per job. Reads owed replies still fail
    when no byte comes for the connection's ``socket_timeout``: one timer watches them, set
    again while bytes come (so a silent server is found within one to two timeouts). With
    any other parser, ``read_response``.
    """

    def __init__(self, conn: Any) -> None:
        self._conn = conn
        parser = getattr(conn, "_parser", None)
        reader = getattr(parser, "_reader", None)
        stream = getattr(parser, "_stream", None)
        size = getattr(parser, "_read_size", None)
        # Only for redis-py's own reading: a connection that reads replies its own way (a
        # cluster slot's, which turns MOVED into Redirected) goes by read_response.
        stock = getattr(type(conn), "read_response", None) is _STOCK_READ
        quick = stock and _MORE is not None and None not in (reader, stream, size)
        self._reader: Any = reader if quick else None  # None: read_response for each reply
        self._stream: Any = stream
        self._size: Any = size
        self._timeout: float | None = getattr(conn, "socket_timeout", None)
        self._loop = asyncio.get_running_loop()
        self.task = asyncio.current_task()
        self._reads = 0  # socket reads that brought bytes
        self._waiting = False  # a read is under way
        self._watched = False  # the timer is set
        self._silent = False  # the timer found the reads silent: the task was cancelled

    async def take(self) -> Any:
        """The next reply (an error reply raised)."""
        reader = self._reader
        if reader is None:
            return await self._conn.read_response()
        reply = reader.gets()
        while reply is _MORE:
            reader.feed(await self._read())
            reply = reader.gets()
        if isinstance(reply, (ResponseError, ConnectionError)):
            raise reply
        return reply

    async def _read(self) -> bytes:
        if self._timeout is not None and not self._watched:
            self._watched = True
            self._loop.call_later(self._timeout, self._watch, self._reads)
        self._waiting = True
        try:
            data = await self._stream.read(self._size)
        except OSError as e:  # reset by the server, say: as redis-py says it
            raise ConnectionError(f"Error while reading from Redis: {e!r}") from e
        except asyncio.CancelledError:
            if self._silent and self.task is not None:
                self.task.uncancel()
                raise ConnectionError(f"no reply from Redis in {self._timeout} s") from None
            raise
        finally:
            self._waiting = False
        if not data:
            raise ConnectionError("the connection was closed by the server")
        self._reads += 1
        return bytes(data)

    def _watch(self, reads: int) -> None:
        """The timer: a read under way with no byte since the last look fails."""
        self._watched = False
        if not self._waiting:
            return  # set again by the next read
        if self._reads != reads:
            self._watched = True
            self._loop.call_later(self._timeout or 0, self._watch, self._reads)
        elif self.task is not None:
            self._silent = True
            self.task.cancel()


def _stale(conn: Any) -> bool:
    """Whether ``conn`` is open to a cluster node that no longer serves the queue's slot
    (see :mod:`kue_core.store.aio_cluster`)."""
    stale = getattr(conn, "stale", None)
    return bool(stale is not None and stale())


#: Bytes waiting in a connection's send buffer past which a writer waits for them to go.
_HIGH_WATER = 1 << 20


async def _put(conn: Any, data: bytes) -> None:
    """Write ``data`` to ``conn``, an open connection: into its transport's buffer at once
    (the way redis-py sends adds a task per write, for its timeout), waiting for the buffer
    to drain only past ``_HIGH_WATER``."""
    writer = getattr(conn, "_writer", None)
    if writer is None or writer.transport.is_closing():
        # Never connect again here: the calls this line owes were sent on the old socket.
        raise ConnectionError("the connection to Redis is closed")
    writer.write(data)
    if writer.transport.get_write_buffer_size() > _HIGH_WATER:
        try:
            await asyncio.wait_for(writer.drain(), conn.socket_timeout)
        except TimeoutError:
            raise ConnectionError("timeout writing to Redis") from None


def _sound_now(conn: Any) -> bool | None:
    """Whether an idle connection is still open with nothing unread: its socket has nothing
    to read (a server that closed it makes it readable, at once, whatever the event loop has
    seen of it yet), as the blocking client checks before each call. None when ``select()``
    cannot tell."""
    reader, writer = getattr(conn, "_reader", None), getattr(conn, "_writer", None)
    if reader is None or writer is None or reader.at_eof() or writer.transport.is_closing():
        return False
    sock = writer.transport.get_extra_info("socket")
    if sock is None:
        return False
    try:
        return not select.select([sock], [], [], 0)[0]
    except (ValueError, OSError):  # a descriptor select() cannot watch, or a closed one
        return None


async def _sound(conn: Any) -> bool:
    """:func:`_sound_now`, asking redis-py when ``select()`` cannot tell."""
    sound = _sound_now(conn)
    if sound is None:
        return bool(not await conn.can_read_destructive())
    return sound
