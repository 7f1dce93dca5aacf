"""A thread's own connection to Redis, as :class:`kue_core.store.transport.Transport` keeps
one per thread: taken from the pool once and given back when the thread ends, checked before
each call for a close by the server, and sent to and read from with the socket's timeout kept
by the kernel, so that a call lets the interpreter's lock go only for its send and its
receive."""

from __future__ import annotations

import select
import socket
import struct
import sys
import weakref
from typing import Any

import redis
from redis.connection import AbstractConnection, Connection
from redis.exceptions import ConnectionError, TimeoutError

#: TCP's state of a connection both ends keep open (``tcpi_state`` of Linux's TCP_INFO).
_ESTABLISHED = 1
#: Where the kernel tells a TCP connection's state (Linux); elsewhere select() is asked.
_TCP_INFO: int | None = getattr(socket, "TCP_INFO", None)


def stale(conn: AbstractConnection) -> bool:
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
    ``Transport`` reports as the TimeoutError it was."""
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


class ThreadConnection:
    """A connection of the pool held by one thread; given back to the pool when the thread
    ends."""

    def __init__(self, pool: redis.ConnectionPool) -> None:
        conn = pool.get_connection()
        self.conn: AbstractConnection = conn
        weakref.finalize(self, _give_back, pool, conn)


def send(conn: AbstractConnection, packed: bytes) -> None:
    """Send one packed command on a thread's connection, connecting it first if need be. A
    write the kernel's timeout ended raises the TimeoutError Python's own timeout raises."""
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
