"""The typed tasks a module defines, for ``kue worker MODULE`` (serve them) and ``kue worker
--list MODULE`` (show them); and the one task ``kue worker MODULE:TASK`` serves."""

from __future__ import annotations

import json
from collections.abc import Sequence
from types import ModuleType
from typing import Any

from kue_core import AsyncTask, Queue, Task
from kue_core.aio import AioAsyncTask, AioTask, AsyncQueue

from .errors import BadUsage

_TASKS = (Task, AsyncTask, AioTask, AioAsyncTask)


def of_module(module: ModuleType, types: Sequence[str]) -> dict[str, Any]:
    """The tasks of ``module`` by type: those defined on the queues it holds (``Queue`` or
    ``AsyncQueue``) and those it names at its top level; only ``types`` when given."""
    found: dict[str, Any] = {}
    for value in list(vars(module).values()):
        if isinstance(value, Queue | AsyncQueue):
            found.update(value.tasks)
        elif isinstance(value, _TASKS):
            found.setdefault(value.type, value)
    if not found:
        raise BadUsage(
            f"{module.__name__} defines no task: define them with @queue.task on a Queue it "
            "holds, or give a handler as MODULE:FUNC"
        )
    unknown = [t for t in types if t not in found]
    if unknown:
        raise BadUsage(
            f"{module.__name__} has no task of type {unknown[0]!r}; it has: {', '.join(found)}"
        )
    return {t: found[t] for t in types} if types else found


def is_task(value: Any) -> bool:
    """Whether ``value`` is a typed task (``@queue.task``), on either client."""
    return isinstance(value, _TASKS)


def of_task(task: Any, spec: str, types: Sequence[str]) -> dict[str, Any]:
    """The task ``spec`` names (``MODULE:TASK``) by its type; ``types`` may name that type
    only."""
    other = [t for t in types if t != task.type]
    if other:
        raise BadUsage(
            f"{spec} is the task of type {task.type!r}: it serves no {other[0]!r} (give a "
            "MODULE to serve several of its tasks)"
        )
    return {task.type: task}


def describe(tasks: dict[str, Any]) -> str:
    """One line a task: its type, function, concurrency, isolation, schedule and options."""
    lines = []
    for job_type, task in sorted(tasks.items()):
        parts = [f"{task.__module__}.{task.__qualname__}", f"concurrency {task.concurrency}"]
        parts.append(f"isolation {task.isolation}")
        schedule = task.schedule
        if schedule is not None:
            when = schedule.get("cron") or f"every {schedule['every']} ms"
            parts.append(f"schedule {when}" + (f" {schedule['tz']}" if "tz" in schedule else ""))
        options = task.job_options
        if options:
            parts.append(json.dumps(options, sort_keys=True, default=str))
        lines.append(f"{job_type}: " + ", ".join(parts))
    return "\n".join(lines)
