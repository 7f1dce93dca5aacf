"""The two transports run plain reads alike: in one round trip, and, when a step asks for it,
as one transaction (``MULTI``/``EXEC``), so that what it reads is one moment's."""

from __future__ import annotations

import asyncio

import redis

from kue_core import Queue
from kue_core.aio import AsyncQueue
from kue_core.store.calls import read


def _transactions(r: redis.Redis) -> int:
    """How many ``MULTI`` the server has run so far."""
    stats = r.info("commandstats")
    return int(stats.get("cmdstat_multi", {}).get("calls", 0))


def test_an_atomic_read_is_one_transaction_in_both_clients(
    queue: Queue, redis_url: str, prefix: str, r: redis.Redis
) -> None:
    key = prefix + ":counter"
    before = _transactions(r)
    plain = queue.scripts.read(read(("INCR", key), ("GET", key)))
    assert plain == [1, "1"] and _transactions(r) == before
    atomic = queue.scripts.read(read(("INCR", key), ("GET", key), atomic=True))
    assert atomic == [2, "2"] and _transactions(r) == before + 1

    async def in_asyncio() -> list[object]:
        async with AsyncQueue(redis_url, prefix=prefix) as aqueue:
            return await aqueue.scripts.read(read(("INCR", key), atomic=True))

    assert asyncio.run(in_asyncio()) == [3]
    assert _transactions(r) == before + 2
