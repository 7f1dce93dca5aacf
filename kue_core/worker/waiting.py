"""The idle slots' waits for work, on the worker's event loop: the slots that wait on the
same wake-up lists share one blocking wait (one connection, one ``BLPOP``/``BLMOVE``), and all
of them go back to claiming when it ends, together (their claims then go in one call, see
:mod:`kue_core.worker.dispatch`). Sixteen idle slots of a type cost Redis one blocked client,
and a job saved wakes one wait, not sixteen."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

from ..store.aio_transport import AsyncTransport

Lists = tuple[tuple[str, bool], ...]


class _Wait:
    """One blocking wait on some lists, and the slots' callbacks told its client id."""

    def __init__(self) -> None:
        self.client_id: int | None = None
        self.told: list[Callable[[int | None], None]] = []
        self.ended: asyncio.Future[None] | None = None


class Waiting:
    """The shared waits of one worker process's slots (see the module doc)."""

    def __init__(self, transport: AsyncTransport) -> None:
        self._redis = transport
        self._waits: dict[Lists, _Wait] = {}

    async def wait(
        self,
        lists: Sequence[tuple[str, bool]],
        timeout: float,
        blocked: Callable[[int | None], None],
    ) -> None:
        """Until one of ``lists`` has a token (see ``AsyncTransport.wait_for_token``), or
        ``timeout`` seconds pass, or the shared wait is ended (``CLIENT UNBLOCK`` of the id
        given to ``blocked``; ``blocked(None)`` once this slot's wait is over)."""
        key = tuple(lists)
        shared = self._waits.get(key)
        mine = shared is None
        if shared is None:
            shared = self._waits[key] = _Wait()
            shared.ended = asyncio.get_running_loop().create_task(self._block(key, shared, timeout))
        elif shared.client_id is not None:
            blocked(shared.client_id)
        shared.told.append(blocked)
        assert shared.ended is not None
        try:
            if mine:  # the wait ends by itself at this slot's timeout (Redis's BLMOVE)
                await asyncio.shield(shared.ended)
            else:  # a slot that waits less (its type's limits hold it less) stops first
                await asyncio.wait_for(asyncio.shield(shared.ended), timeout)
        except TimeoutError:
            pass
        finally:
            if blocked in shared.told:
                shared.told.remove(blocked)
            blocked(None)

    async def _block(self, key: Lists, shared: _Wait, timeout: float) -> None:
        def started(client_id: int) -> None:
            shared.client_id = client_id
            for each in list(shared.told):
                each(client_id)

        try:
            await self._redis.wait_for_token(key, timeout, started)
        finally:
            if self._waits.get(key) is shared:
                del self._waits[key]
