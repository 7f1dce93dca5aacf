"""The two clients offer the same producer and admin API: every public method of ``Queue``
but the worker's is on ``AsyncQueue`` (awaited there), with the same parameters, so that
the two cannot drift apart again (#41). Both run the same operations (:mod:`kue_core.jobs.ops`
and the modules it names); the behaviour is tested on both in tests/integration."""

from __future__ import annotations

import inspect

from kue_core import Queue
from kue_core.aio import AsyncQueue

#: The worker's side, in the blocking client only (an asyncio program runs ``kue worker``
#: processes, or a Queue in a thread).
WORKER_ONLY = {
    "process",
    "run",
    "shutdown",
    "use",
    "middleware",
    "worker_id",
    "process_tasks",
    "run_tasks",
    "include_tasks",
}
#: Listening to events: callbacks on the blocking client, an async iterator on the other.
LISTENING = {"on", "off", "event_stream"}
#: Parameters about this process's workers, which the async client has none of.
WORKER_PARAMETERS = {("pause", "local"), ("resume", "local")}
#: Not awaited on either client: a new job, the iterators of events and of a job's stream,
#: and defining a task.
PLAIN = {"create_job", "events", "stream_parts", "task"}


def _public(cls: type) -> set[str]:
    return {name for name in dir(cls) if not name.startswith("_")}


def test_every_producer_and_admin_method_is_on_both_clients() -> None:
    blocking = _public(Queue) - WORKER_ONLY - LISTENING
    asyncio_side = _public(AsyncQueue) - {"events"}
    assert sorted(blocking - asyncio_side) == [], "missing from AsyncQueue"
    assert sorted(asyncio_side - blocking) == [], "missing from Queue"


def test_the_same_parameters_and_awaited_on_the_async_client() -> None:
    differ = []
    for name in sorted(_public(Queue) - WORKER_ONLY - LISTENING):
        blocking, asyncio_side = getattr(Queue, name), getattr(AsyncQueue, name)
        if isinstance(blocking, property):
            continue
        ours = {
            key: p
            for key, p in inspect.signature(blocking).parameters.items()
            if (name, key) not in WORKER_PARAMETERS
        }
        theirs = inspect.signature(asyncio_side).parameters
        shape = [(p.name, p.kind, p.default) for p in ours.values()]
        if shape != [(p.name, p.kind, p.default) for p in theirs.values()]:
            differ.append(f"{name}: {list(ours)} against {list(theirs)}")
        if name not in PLAIN and not inspect.iscoroutinefunction(asyncio_side):
            differ.append(f"{name} is not awaited on AsyncQueue")
    assert differ == []
