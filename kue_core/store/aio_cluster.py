"""Redis Cluster for the asyncio client: a ``redis.asyncio`` connection pool whose connections
all go to the primary of one hash slot, as :mod:`kue_core.store.cluster` does for the blocking one.

The owner of the slot is asked of the cluster (``CLUSTER SLOTS``) when a connection opens
and it is not known, and learnt again from a ``MOVED`` reply or a node that stops answering.
A redirect (``MOVED``, ``ASK``, a script stopped at its fence) is raised as
:class:`kue_core.store.cluster.Redirected`: the command did not run, and may be sent again.
"""

from __future__ import annotations

import asyncio
from typing import Any

import redis
import redis.asyncio
from redis.asyncio.connection import Connection, SSLConnection
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff
from redis.crc import key_slot
from redis.exceptions import ResponseError

from .cluster import Redirected, SlotMap, redirected


class AsyncSlotOwner(SlotMap):
    """Where one slot is served: asked of the cluster, remembered until it changes."""

    def __init__(self, nodes: list[tuple[str, int]], slot: int, settings: dict[str, Any]) -> None:
        super().__init__(nodes, slot, settings)
        self._asking: asyncio.Lock | None = None

    async def address(self) -> tuple[str, int]:
        known = self._address
        if known is not None:
            return known
        if self._asking is None:
            self._asking = asyncio.Lock()
        async with self._asking:  # connections opened at once ask once
            if self._address is None:
                found = await self._discover()
                with self._lock:
                    if self._address is None:  # else a MOVED told of a newer owner meanwhile
                        self._address = found
            return self._address

    async def _discover(self) -> tuple[str, int]:
        errors = []
        for host, port in list(self._nodes):
            probe = redis.asyncio.Redis(host=host, port=port, **self._probe_settings())
            try:
                slots = await probe.execute_command("CLUSTER SLOTS")  # type: ignore[no-untyped-call]
            except redis.RedisError as e:
                errors.append(f"{host}:{port}: {e}")
                continue
            finally:
                await probe.aclose()
            owner = self._read(host, slots)
            if owner is not None:
                return owner
            errors.append(f"{host}:{port}: slot {self.slot} has no primary")
        raise self._none_serves(errors)


class _AsyncSlotConnection(Connection):
    """A connection to whichever primary serves the pool's slot now."""

    def __init__(self, *, slot_owner: AsyncSlotOwner, **kwargs: Any) -> None:
        self.slot_owner = slot_owner
        super().__init__(**kwargs)

    def stale(self) -> bool:
        """Whether this connection is open to a node that no longer serves the slot (as far
        as the pool has heard): a command without a key (``WAIT``, ``PUBLISH``) would still go
        there and never be redirected."""
        return (self.host, self.port) != self.slot_owner.known()

    async def _connect(self) -> None:
        self.host, self.port = await self.slot_owner.address()
        try:
            await super()._connect()  # type: ignore[no-untyped-call]
        except (TimeoutError, OSError, redis.ConnectionError):
            self.slot_owner.forget()  # failed over, perhaps: ask the cluster again
            raise

    async def read_response(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return await super().read_response(*args, **kwargs)
        except ResponseError as e:
            redirect = redirected(e, self.slot_owner)
            if redirect is None:
                raise
            raise redirect from None  # one error reply: the connection is still in step


class _AsyncSlotSSLConnection(_AsyncSlotConnection, SSLConnection):
    pass


class AsyncSlotPool(redis.asyncio.ConnectionPool):
    """A pool of connections to the primary serving the slot of ``route`` (a prefix with a
    hash tag), found from the cluster nodes ``nodes``."""

    def __init__(self, nodes: list[tuple[str, int]], route: str, **kwargs: Any) -> None:
        ssl = bool(kwargs.pop("ssl", False))
        self.nodes = list(nodes)
        self.slot_owner = AsyncSlotOwner(nodes, key_slot(route.encode()), {**kwargs, "ssl": ssl})
        kwargs.pop("connection_class", None)
        cls = _AsyncSlotSSLConnection if ssl else _AsyncSlotConnection
        # A redirected command did not run: send it again, to the new owner, a few times.
        retry = Retry(ExponentialBackoff(cap=1.0, base=0.05), 4, supported_errors=(Redirected,))
        super().__init__(connection_class=cls, slot_owner=self.slot_owner, retry=retry, **kwargs)

    async def ensure_connection(self, connection: Any) -> None:
        if connection.is_connected and connection.stale():
            await connection.disconnect()  # pooled while the slot moved
        await super().ensure_connection(connection)

    def __repr__(self) -> str:
        return f"<AsyncSlotPool slot={self.slot_owner.slot} nodes={self.nodes}>"
