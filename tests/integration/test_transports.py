"""The two transports run plain reads alike: in one round trip, and, when a step asks for it,
as one transaction (``MULTI``/``EXEC``), so that what it reads is one moment's."""

from __future__ import annotations

import asyncio
import contextlib

import redis

from kue_core import Queue
from kue_core.aio import AsyncQueue
from kue_core.store import calls
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


def _lose_scripts(r: redis.Redis) -> None:
    """Drop every script and function the server has loaded, as a restart without them."""
    r.script_flush()
    with contextlib.suppress(redis.ResponseError):  # before Redis 7: no functions
        r.execute_command("FUNCTION", "FLUSH")


def test_posted_calls_are_read_in_turn_beside_other_calls(queue: Queue, r: redis.Redis) -> None:
    """Two calls posted one behind the other are read in turn, while calls of the same
    thread go on meanwhile (on its other connection); a call posted once its script is lost
    has it loaded again when it is read."""
    first, second = (queue.create_job("t", {"i": i}).save() for i in range(2))
    claim = calls.claim(queue.keys, ["t"], "w", 5000)
    one = queue.scripts.post(claim)
    two = queue.scripts.post(claim, behind=one)
    third = queue.create_job("t", {"i": 2}).save()  # a call between: its own connection
    assert one.conn is two.conn
    claimed = [queue.scripts.take(one), queue.scripts.take(two)]
    assert [c[0] for c in claimed if isinstance(c, tuple)] == [first.id, second.id]
    # Both lost their script: each is sent again on its own, and read as its own.
    fourth = queue.create_job("t", {"i": 3}).save()
    _lose_scripts(r)
    one = queue.scripts.post(claim)
    two = queue.scripts.post(calls.release(queue.keys, first.id, claimed[0][1]["lease"]), one)
    got = queue.scripts.take(one)
    assert isinstance(got, tuple) and got[0] == third.id
    queue.scripts.take(two)
    assert queue.get_job(first.id).state == "inactive"
    assert queue.count("active") == 2 and queue.get_job(fourth.id).state == "inactive"
