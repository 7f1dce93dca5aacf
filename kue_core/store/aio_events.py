"""The queue's events for asyncio code (``AsyncQueue.events``): one subscription to the
events channel on a connection of its own, read as an async iterator of
:class:`kue_core.store.events.Event`."""

from __future__ import annotations

import asyncio
from typing import Any

import redis.asyncio

from .. import defaults
from ..base.errors import ConnectionFailed
from .events import Event, parse_event


class AsyncEvents:
    """``async for event in stream``; ``async with stream`` subscribes on entering (what
    follows is heard) and closes on leaving. Without it, the first iteration subscribes and
    the stream closes when the loop runs out; a loop left early should ``await
    stream.aclose()``."""

    def __init__(
        self,
        client: redis.asyncio.Redis,
        channel: str,
        names: frozenset[str] | None,
        job_type: str | None,
        job_id: int | None,
    ) -> None:
        self._client = client
        self._channel = channel
        self._names = names
        self._type = job_type
        self._id = job_id
        self._pubsub: Any = None
        self._closed = False

    async def open(self) -> None:
        """Subscribe, once; returns when Redis confirmed it: every event after is heard."""
        if self._pubsub is not None:
            return
        if self._closed:
            raise ConnectionFailed("the event stream is closed")
        pubsub = self._client.pubsub()
        self._pubsub = pubsub
        try:
            await pubsub.subscribe(self._channel)
            confirm = await pubsub.get_message(timeout=defaults.SUBSCRIBE_TIMEOUT)
            if confirm is None or confirm["type"] != "subscribe":
                raise ConnectionFailed(f"no confirmation of the subscription to {self._channel}")
        except BaseException:
            await self.aclose()
            raise

    async def aclose(self) -> None:
        """Unsubscribe and give the connection back."""
        self._closed = True
        pubsub, self._pubsub = self._pubsub, None
        if pubsub is not None:
            await pubsub.aclose()

    async def __aenter__(self) -> AsyncEvents:
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def __aiter__(self) -> AsyncEvents:
        return self

    async def __anext__(self) -> Event:
        event = await self.get(None)
        assert event is not None  # no timeout: it waits for one
        return event

    def _wanted(self, event: Event) -> bool:
        return (
            (self._names is None or event.name in self._names)
            and (self._type is None or event.type == self._type)
            and (self._id is None or event.id == self._id)
        )

    async def get(self, timeout: float | None) -> Event | None:
        """The next event wanted, or None when none came within ``timeout`` seconds (None: no
        bound)."""
        await self.open()
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        while True:
            left = None if deadline is None else max(0.0, deadline - loop.time())
            if self._pubsub is None:
                raise StopAsyncIteration
            msg = await self._pubsub.get_message(timeout=left)
            if msg is not None and msg["type"] == "message":
                event = parse_event(msg["data"])
                if event is not None and self._wanted(event):
                    return event
            if deadline is not None and loop.time() >= deadline:
                return None
