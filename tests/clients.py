"""Both clients behind one face, for the contract tests that run against each: the blocking
``Queue`` as it is, and ``AsyncQueue`` through :class:`Blocking`, which runs each coroutine
it is given to its end on an event loop of its own thread (:class:`Loop`). A test written once
then checks that both clients follow the same rules, keys and errors.

The loops run in threads of their own because the test process's main thread may already run
one: Playwright's sync API (the browser tests' session-wide fixture) keeps its loop running
there, and no other loop may run in that thread meanwhile."""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import Coroutine, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from kue_core.aio import AsyncJob, AsyncQueue

T = TypeVar("T")


class Loop:
    """An event loop running in a thread of its own; ``run(coro)`` waits for its result (a
    coroutine's context is the caller's, as ``asyncio`` copies it across)."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._thread.start()

    def run(self, coro: Coroutine[Any, Any, T], timeout: float = 120) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
        self.loop.close()


@contextmanager
def blocking_queue(
    redis_url: str | None = None, prefix: str | None = None, **options: Any
) -> Iterator[Any]:
    """An ``AsyncQueue`` seen through blocking calls, on a loop of its own; closed after.
    ``options``: the queue's keyword arguments (``encryption_keys``, say)."""
    loop = Loop()
    queue = AsyncQueue(redis_url, prefix=prefix, **options)
    try:
        yield Blocking(queue, loop)
    finally:
        loop.run(queue.close())
        loop.close()


def run(coro: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(coro)``, on a loop in a thread of its own (see the module's doc)."""
    loop = Loop()
    try:
        return loop.run(coro)
    finally:
        loop.close()


class Blocking:
    """An ``AsyncQueue`` or ``AsyncJob`` whose coroutine methods return their result."""

    def __init__(self, target: Any, loop: Loop) -> None:
        object.__setattr__(self, "_target", target)
        object.__setattr__(self, "_loop", loop)

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._target, name)
        if not callable(value):
            return self._wrap(value)

        def call(*args: Any, **kwargs: Any) -> Any:
            result = value(*_unwrap(args), **{k: _unwrap(v) for k, v in kwargs.items()})
            if inspect.isawaitable(result):
                result = self._loop.run(_awaited(result))
            return self._wrap(result)

        return call

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._target, name, _unwrap(value))

    def __repr__(self) -> str:
        return f"Blocking({self._target!r})"

    def _wrap(self, value: Any) -> Any:
        if isinstance(value, AsyncJob | AsyncQueue):
            return Blocking(value, self._loop)
        if type(value) is list:
            return [self._wrap(v) for v in value]
        return value


async def _awaited(awaitable: Any) -> Any:
    return await awaitable


def _unwrap(value: Any) -> Any:
    if isinstance(value, Blocking):
        return value._target
    if isinstance(value, list | tuple):
        return type(value)(_unwrap(v) for v in value)
    if inspect.isgenerator(value):
        return (_unwrap(v) for v in value)
    return value


def target(value: Any) -> Any:
    """The client or job behind a :class:`Blocking` (or the value itself)."""
    return _unwrap(value)
