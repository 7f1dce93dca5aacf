"""Both clients behind one face, for the contract tests that run against each: the blocking
``Queue`` as it is, and ``AsyncQueue`` through :class:`Blocking`, which runs each coroutine
it is given to its end on the test's event loop. A test written once then checks that both
clients follow the same rules, keys and errors."""

from __future__ import annotations

import asyncio
import inspect
from typing import Any

from kue_core.aio import AsyncJob, AsyncQueue


class Blocking:
    """An ``AsyncQueue`` or ``AsyncJob`` whose coroutine methods return their result."""

    def __init__(self, target: Any, loop: asyncio.AbstractEventLoop) -> None:
        object.__setattr__(self, "_target", target)
        object.__setattr__(self, "_loop", loop)

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._target, name)
        if not callable(value):
            return self._wrap(value)

        def call(*args: Any, **kwargs: Any) -> Any:
            result = value(*_unwrap(args), **{k: _unwrap(v) for k, v in kwargs.items()})
            if inspect.isawaitable(result):
                result = self._loop.run_until_complete(_awaited(result))
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
