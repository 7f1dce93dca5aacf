"""The typed tasks of a ``Queue``: ``@queue.task`` defines one (:mod:`kue_core.clients.tasks`),
``process_tasks()`` serves them in this process and ``run_tasks()`` serves them until a
signal, as ``kue worker`` does."""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Iterable
from typing import TYPE_CHECKING, Any, ParamSpec, Protocol, Self, TypeVar, overload

from ..base.errors import InvalidJob
from ..jobs.schedules import cron_definition, every_definition
from ..worker.isolation import check_handler
from ..worker.slots import Handler
from .tasks import AioAsyncTask, AioTask, AnyTask, AsyncTask, Task, make_task

P = ParamSpec("P")
R = TypeVar("R")


class TaskDecorator(Protocol):
    """What ``queue.task(...)`` returns: it makes the function it decorates a task."""

    @overload
    def __call__(  # type: ignore[overload-overlap]
        self, fn: Callable[P, Coroutine[Any, Any, R]], /
    ) -> AsyncTask[P, R]: ...
    @overload
    def __call__(self, fn: Callable[P, R], /) -> Task[P, R]: ...


class AioTaskDecorator(Protocol):
    """What ``async_queue.task(...)`` returns."""

    @overload
    def __call__(  # type: ignore[overload-overlap]
        self, fn: Callable[P, Coroutine[Any, Any, R]], /
    ) -> AioAsyncTask[P, R]: ...
    @overload
    def __call__(self, fn: Callable[P, R], /) -> AioTask[P, R]: ...


class Tasks:
    """The typed tasks of a queue of either client, by job type."""

    _tasks: dict[str, AnyTask]

    @property
    def tasks(self) -> dict[str, AnyTask]:
        """The tasks defined on this queue, by job type."""
        return dict(self._tasks)

    def _define(
        self,
        job_type: Any,
        concurrency: int,
        isolation: str,
        cron: str | None,
        every: Any,
        tz: str,
        options: dict[str, Any],
    ) -> Any:
        """``task()`` of either client: the task, or the decorator that makes it."""
        if callable(job_type):
            return self._add(make_task(self, job_type, None, {}, 1, "thread"), None)
        if cron is not None and every is not None:
            raise InvalidJob("a task has a cron expression or an interval, not both")
        schedule = None
        if cron is not None:
            schedule = cron_definition(cron, tz)
        elif every is not None:
            schedule = every_definition(every, None)

        def decorate(fn: Callable[..., Any]) -> AnyTask:
            made = make_task(self, fn, job_type, options, concurrency, isolation)
            if schedule is not None:
                made.signature.data((), {})  # a scheduled call gives no arguments
            return self._add(made, schedule)

        return decorate

    def _add(self, task: AnyTask, schedule: dict[str, Any] | None) -> AnyTask:
        known = self._tasks.get(task.type)
        if known is not None and known.fn is not task.fn:
            raise InvalidJob(
                f"a task of type {task.type!r} is defined on this queue already ({known!r})"
            )
        task.schedule = schedule
        self._tasks[task.type] = task
        return task


class TaskMethods(Tasks):
    """Mixed into ``Queue``: its typed tasks, and serving them."""

    if TYPE_CHECKING:  # Queue's

        def process(
            self,
            job_type: str,
            n: int | Handler = 1,
            handler: Handler | None = None,
            *,
            isolation: str = "thread",
        ) -> Self: ...
        def run(
            self,
            shutdown_timeout: float = ...,
            *,
            ready: Callable[[], Any] | None = ...,
            burst: bool = ...,
        ) -> str | None: ...
        def every(
            self, key: str, interval: Any, job_type: str, data: Any = None, **options: Any
        ) -> dict[str, Any]: ...
        def cron(
            self, key: str, expression: str, job_type: str, data: Any = None, **options: Any
        ) -> dict[str, Any]: ...

    @overload
    def task(  # type: ignore[overload-overlap]
        self, fn: Callable[P, Coroutine[Any, Any, R]], /
    ) -> AsyncTask[P, R]: ...
    @overload
    def task(self, fn: Callable[P, R], /) -> Task[P, R]: ...
    @overload
    def task(
        self,
        job_type: str | None = None,
        /,
        *,
        concurrency: int = 1,
        isolation: str = "thread",
        cron: str | None = None,
        every: Any = None,
        tz: str = "UTC",
        **options: Any,
    ) -> TaskDecorator: ...
    def task(
        self,
        job_type: Any = None,
        /,
        *,
        concurrency: int = 1,
        isolation: str = "thread",
        cron: str | None = None,
        every: Any = None,
        tz: str = "UTC",
        **options: Any,
    ) -> Any:
        """Make a function a task of this queue: ``@queue.task`` or ``@queue.task(type,
        **options)``. The job type is ``type``, else the function's qualified name; the
        options are job options (:data:`kue_core.TASK_OPTIONS`), checked now.
        ``concurrency`` and ``isolation`` say how a worker serves the task (as ``process()``
        takes them). ``cron`` (with ``tz``) or ``every`` make a schedule of the task, under
        its type as key, when a worker starts serving it: the function must then take no
        argument without a default."""
        return self._define(job_type, concurrency, isolation, cron, every, tz, options)

    def include_tasks(self, *tasks: AnyTask) -> None:
        """Add tasks defined on another queue to this one's, for its workers to serve them
        (``kue worker MODULE`` does, with the tasks the module defines)."""
        for task in tasks:
            self._add(task, task.schedule)

    def process_tasks(
        self, types: Iterable[str] | None = None, *, concurrency: int | None = None
    ) -> Self:
        """Serve the tasks defined on this queue (or those of ``types``) in this process, in
        the background, each with its concurrency (or ``concurrency`` slots each) and
        isolation; make the schedules of those that have one. Every task is checked before
        any is served."""
        chosen = list(self._tasks) if types is None else list(types)
        unknown = [t for t in chosen if t not in self._tasks]
        if unknown:
            raise InvalidJob(f"no task of type {unknown[0]!r} is defined on this queue")
        if not chosen:
            raise InvalidJob("no task is defined on this queue: define one with @queue.task")
        for job_type in chosen:
            if self._tasks[job_type].isolation == "process":
                check_handler(self._tasks[job_type].handle)
        for job_type in chosen:
            task = self._tasks[job_type]
            n = task.concurrency if concurrency is None else concurrency
            self.process(job_type, n, task.handle, isolation=task.isolation)
        for job_type in chosen:
            self._schedule(self._tasks[job_type])
        return self

    def run_tasks(
        self,
        types: Iterable[str] | None = None,
        *,
        concurrency: int | None = None,
        burst: bool = False,
    ) -> str | None:
        """Serve the tasks (see :meth:`process_tasks`) until SIGINT or SIGTERM, as
        ``queue.run()`` does; returns the signal's name. With ``burst=True``, until their
        work has run out (see ``queue.run``). From the main thread only."""
        self.process_tasks(types, concurrency=concurrency)
        return self.run(burst=burst)

    def _schedule(self, task: AnyTask) -> None:
        definition = task.schedule
        if definition is None:
            return
        data = task.signature.data((), {})
        options = task.job_options
        if definition["kind"] == "cron":
            expression, tz = definition["cron"], definition["tz"]
            self.cron(task.type, expression, task.type, data, tz=tz, **options)
        else:
            self.every(task.type, definition["every"], task.type, data, **options)


class AsyncTaskMethods(Tasks):
    """Mixed into ``AsyncQueue``: its typed tasks, whose calls are awaited. A worker serves
    them on a blocking ``Queue`` (``kue worker``, or ``queue.process_tasks`` of any queue
    on the same Redis: ``queue.process(task.type, task.concurrency, task.handle)``)."""

    @overload
    def task(  # type: ignore[overload-overlap]
        self, fn: Callable[P, Coroutine[Any, Any, R]], /
    ) -> AioAsyncTask[P, R]: ...
    @overload
    def task(self, fn: Callable[P, R], /) -> AioTask[P, R]: ...
    @overload
    def task(
        self,
        job_type: str | None = None,
        /,
        *,
        concurrency: int = 1,
        isolation: str = "thread",
        cron: str | None = None,
        every: Any = None,
        tz: str = "UTC",
        **options: Any,
    ) -> AioTaskDecorator: ...
    def task(
        self,
        job_type: Any = None,
        /,
        *,
        concurrency: int = 1,
        isolation: str = "thread",
        cron: str | None = None,
        every: Any = None,
        tz: str = "UTC",
        **options: Any,
    ) -> Any:
        """As :meth:`Queue.task`: ``await task.enqueue(...)`` here."""
        return self._define(job_type, concurrency, isolation, cron, every, tz, options)
