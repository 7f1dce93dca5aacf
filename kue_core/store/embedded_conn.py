"""Connections to the embedded server that start it again when it is gone.

A connection to the folder's socket that finds nothing listening (the server was killed,
crashed, or shut down by its watchdog while this process was idle) starts the server again,
from its append-only file, and connects to it: every pool of the process reconnects this way,
the blocking and the asyncio ones, so a worker, the dashboard or a producer goes on. Of several
processes sharing the folder, one starts it (under the folder's lock, see
:func:`kue_core.store.embedded.start`) and the others find it answering.
"""

from __future__ import annotations

import asyncio
import socket
from typing import Any

import redis
import redis.asyncio

from . import embedded

#: What connecting to a unix socket with no server behind it raises.
_NO_SERVER = (FileNotFoundError, ConnectionRefusedError)


class EmbeddedConnection(redis.UnixDomainSocketConnection):
    """A connection to the embedded server in ``data_dir``."""

    def __init__(self, *, data_dir: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)  # type: ignore[no-untyped-call]
        self.data_dir = data_dir

    def _connect(self) -> socket.socket:
        try:
            return super()._connect()  # type: ignore[no-untyped-call,no-any-return]
        except _NO_SERVER:
            embedded.start(self.data_dir)
            return super()._connect()  # type: ignore[no-untyped-call,no-any-return]


class AsyncEmbeddedConnection(redis.asyncio.UnixDomainSocketConnection):
    """An asyncio connection to the embedded server in ``data_dir``."""

    def __init__(self, *, data_dir: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.data_dir = data_dir

    async def _connect(self) -> None:
        try:
            await super()._connect()  # type: ignore[no-untyped-call]
        except _NO_SERVER:
            await asyncio.to_thread(embedded.start, self.data_dir)
            await super()._connect()  # type: ignore[no-untyped-call]


def pool(sock: str, data_dir: str, **options: Any) -> redis.ConnectionPool:
    """A pool of connections to the embedded server in ``data_dir`` on ``sock``."""
    return redis.ConnectionPool(
        connection_class=EmbeddedConnection, path=sock, data_dir=data_dir, **options
    )


def async_pool(sock: str, data_dir: str, **options: Any) -> redis.asyncio.ConnectionPool:
    """An asyncio pool of connections to the embedded server in ``data_dir`` on ``sock``."""
    return redis.asyncio.ConnectionPool(
        connection_class=AsyncEmbeddedConnection, path=sock, data_dir=data_dir, **options
    )
