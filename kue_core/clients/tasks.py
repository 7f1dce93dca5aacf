"""Typed tasks: ``@queue.task`` makes a function a task whose calls are enqueued as Kue jobs.

::

    @queue.task("email", attempts=5, priority="high")
    def send_email(to: str, subject: str, body: str = "") -> dict:
        current_job().log("sending to %s", to)
        return {"sent": True}

    job = send_email.enqueue("a@example.com", subject="hi")   # a saved Job
    send_email.options(delay=5_000).enqueue("b@example.com", "later")
    queue.run_tasks()                                         # a worker serving every task

A task's job is an ordinary Kue job of the task's type whose data is the call's arguments by
name (:mod:`kue_core.jobs.arguments`), so the REST API, the dashboard, the ``kue`` command and
Node Kue see nothing new, and a job saved by any of them with those fields runs the function.
A call that does not fit the annotations raises ``InvalidJob`` before anything is written; a
job whose data does not fit fails at once (``NoRetry``) naming the field.

Calling the task (``send_email(...)``) is still an ordinary call of the function. The job
options (those of :data:`TASK_OPTIONS`) are given at the decorator and per call with
``options(...)``; a task's concurrency and isolation are how a worker serves it.
"""

from __future__ import annotations

import importlib
import inspect
import pickle
from collections.abc import Callable, Coroutine, Iterable, Mapping
from typing import Any, Generic, ParamSpec, Protocol, TypeVar, overload

from ..base import checks
from ..base.errors import InvalidJob, NoRetry
from ..jobs import current
from ..jobs.aio_job import AsyncJob
from ..jobs.arguments import Signature
from ..jobs.job import Job, validate_type
from ..jobs.schedules import OPTIONS, apply_options
from ..worker.isolation import ISOLATIONS

P = ParamSpec("P")
R = TypeVar("R")

#: The job options a task takes, at the decorator and in ``options(...)``: the setters of
#: ``Job`` of these names (a list for ``tags`` and ``search_keys``; for ``depends_on``, a
#: saved job, an id, or a list or tuple of them).
TASK_OPTIONS = (*OPTIONS, "group", "depends_on", "prefer")


class Host(Protocol):
    """What a task's calls use of the blocking ``Queue`` they go to."""

    def create_job(self, job_type: str, data: Any = None) -> Job: ...
    def save_many(self, jobs: Iterable[Job]) -> list[Job]: ...
    def every(
        self, key: str, interval: Any, job_type: str, data: Any = None, **options: Any
    ) -> dict[str, Any]: ...
    def cron(
        self, key: str, expression: str, job_type: str, data: Any = None, **options: Any
    ) -> dict[str, Any]: ...


class AsyncHost(Protocol):
    """What a task's calls use of the ``AsyncQueue`` they go to."""

    def create_job(self, job_type: str, data: Any = None) -> AsyncJob: ...
    async def save_many(self, jobs: Iterable[AsyncJob]) -> list[AsyncJob]: ...
    async def every(
        self, key: str, interval: Any, job_type: str, data: Any = None, **options: Any
    ) -> dict[str, Any]: ...
    async def cron(
        self, key: str, expression: str, job_type: str, data: Any = None, **options: Any
    ) -> dict[str, Any]: ...


def task_type(fn: Callable[..., Any], job_type: str | None) -> str:
    """The job type of task ``fn``: ``job_type``, else the function's qualified name."""
    return validate_type(fn.__qualname__ if job_type is None else job_type)


def _is_async_host(queue: object) -> bool:
    return inspect.iscoroutinefunction(getattr(queue, "save_many", None))


class Definition(Generic[P, R]):
    """What a task is, whichever client enqueues its calls: the function, its job type and
    signature, and how a worker serves it."""

    def __init__(
        self,
        fn: Callable[..., Any],
        job_type: str | None,
        concurrency: int = 1,
        isolation: str = "thread",
    ) -> None:
        self.fn = fn
        self.type = task_type(fn, job_type)
        self.signature = Signature(fn, self.type)
        checks.integer(concurrency, "concurrency", 1)
        if isolation not in ISOLATIONS:
            raise InvalidJob(f"isolation must be one of {', '.join(ISOLATIONS)}, got {isolation!r}")
        self.concurrency = concurrency
        self.isolation = isolation
        #: The schedule a worker makes of the task (``@queue.task(cron=...)``), or None.
        self.schedule: dict[str, Any] | None = None
        self.__name__ = getattr(fn, "__name__", self.type)
        self.__qualname__ = getattr(fn, "__qualname__", self.type)
        self.__module__ = getattr(fn, "__module__", __name__)
        self.__doc__ = fn.__doc__
        self.__wrapped__ = fn

    def __repr__(self) -> str:
        return f"<task {self.type!r} of {self.__module__}.{self.__qualname__}>"

    def __reduce__(self) -> tuple[Any, ...]:
        """A child process (``isolation="process"``) finds the task by its module and name,
        as it would a function."""
        if _find(self.__module__, self.__qualname__) is not self:
            raise pickle.PicklingError(
                f"task {self.type} cannot be found as {self.__module__}.{self.__qualname__}: "
                "define it at the top level of an importable module"
            )
        return _find, (self.__module__, self.__qualname__)

    def handle(self, job: Any) -> Any:
        """A worker's handler of the task's jobs (``process_tasks()`` gives it)."""
        raise NotImplementedError

    def _arguments(self, job: Any) -> tuple[list[Any], dict[str, Any]]:
        try:
            return self.signature.call(job.data)
        except InvalidJob as e:
            raise NoRetry(str(e)) from None

    def _result(self, value: Any) -> Any:
        """The return value as the job's result; one that does not fit the annotation fails
        the job without a retry: the function ran, and a retry would do its work again."""
        try:
            return self.signature.result(value)
        except InvalidJob as e:
            raise NoRetry(str(e)) from None


class _Calling(Generic[P, R]):
    """Calls of task ``task`` with a set of job options (the task's own, or those of
    ``options(...)``, which override them), enqueued on ``host``."""

    def __init__(self, task: Definition[P, R], options: Mapping[str, Any], host: Any) -> None:
        self.task = task
        self.host = host
        self._options = dict(options)

    @property
    def job_options(self) -> dict[str, Any]:
        """The job options these calls give their jobs (see :meth:`options`)."""
        return dict(self._options)

    def _checked(self, options: Mapping[str, Any]) -> dict[str, Any]:
        merged = {**self._options, **options}
        apply_options(self.host.create_job(self.task.type, {}), merged, TASK_OPTIONS)
        return merged

    def _job(self, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> Any:
        data = self.task.signature.data(args, kwargs)
        return apply_options(
            self.host.create_job(self.task.type, data), self._options, TASK_OPTIONS
        )

    def _jobs(self, calls: Iterable[tuple[Any, ...] | Mapping[str, Any]]) -> list[Any]:
        jobs = []
        for i, call in enumerate(calls):
            if isinstance(call, tuple):
                args, kwargs = call, {}
            elif isinstance(call, Mapping):
                args, kwargs = (), dict(call)
            else:
                raise InvalidJob(
                    f"task {self.task.type}: call {i} is a tuple of arguments or a mapping of "
                    f"them by name, got {type(call).__name__}"
                )
            jobs.append(self._job(args, kwargs))
        return jobs

    @overload
    def on(self, queue: AsyncHost) -> AsyncCalls[P, R]: ...
    @overload
    def on(self, queue: Host) -> Calls[P, R]: ...
    def on(self, queue: Any) -> Any:
        """These calls enqueued on another queue, of either client: a task is defined on one
        queue and its jobs may go to any (an ``AsyncQueue``'s are awaited)."""
        kind = AsyncCalls if _is_async_host(queue) else Calls
        return kind(self.task, self._options, queue)


class Calls(_Calling[P, R]):
    """Calls of a task enqueued on a blocking ``Queue``."""

    def options(self, **options: Any) -> Calls[P, R]:
        """These calls with more job options (names of :data:`TASK_OPTIONS`), checked now."""
        return Calls(self.task, self._checked(options), self.host)

    def job(self, *args: P.args, **kwargs: P.kwargs) -> Job:
        """The job of this call, not saved yet (checked: raises ``InvalidJob`` naming the
        parameter that does not fit)."""
        job: Job = self._job(args, kwargs)
        return job

    def enqueue(self, *args: P.args, **kwargs: P.kwargs) -> Job:
        """Save a job of this call; returns it (saved)."""
        return self.job(*args, **kwargs).save()

    def enqueue_many(self, calls: Iterable[tuple[Any, ...] | Mapping[str, Any]]) -> list[Job]:
        """Save a job for each call in one round trip (as ``save_many``): a call is a tuple of
        positional arguments or a mapping of arguments by name. Every call is checked
        first: one that does not fit raises, and none is saved."""
        saved: list[Job] = self.host.save_many(self._jobs(calls))
        return saved

    def every(self, interval: Any, *args: P.args, **kwargs: P.kwargs) -> dict[str, Any]:
        """Make a job of this call every ``interval`` (ms or a timedelta), as
        ``queue.every`` does, under the schedule key of the task's type (upserted: an
        unchanged definition keeps its timetable). Returns the schedule."""
        data = self.task.signature.data(args, kwargs)
        made: dict[str, Any] = self.host.every(
            self.task.type, interval, self.task.type, data, **self._options
        )
        return made

    def cron(self, expression: str, *args: P.args, **kwargs: P.kwargs) -> dict[str, Any]:
        """Make a job of this call at each time the cron ``expression`` matches (UTC), as
        ``queue.cron`` does, under the schedule key of the task's type."""
        data = self.task.signature.data(args, kwargs)
        made: dict[str, Any] = self.host.cron(
            self.task.type, expression, self.task.type, data, **self._options
        )
        return made

    def result(self, job: Job, timeout: float | None = None) -> R:
        """Wait for ``job`` (a job of this task) to complete; its result, read back as the
        function's return annotation (``JobFailed``, ``WaitTimeout`` as ``job.wait``)."""
        value: R = self.task.signature.typed_result(job.wait(timeout))
        return value


class AsyncCalls(_Calling[P, R]):
    """Calls of a task enqueued on an ``AsyncQueue``: the same methods as :class:`Calls`,
    awaited."""

    def options(self, **options: Any) -> AsyncCalls[P, R]:
        """These calls with more job options (names of :data:`TASK_OPTIONS`), checked now."""
        return AsyncCalls(self.task, self._checked(options), self.host)

    def job(self, *args: P.args, **kwargs: P.kwargs) -> AsyncJob:
        """The job of this call, not saved yet (checked now)."""
        job: AsyncJob = self._job(args, kwargs)
        return job

    async def enqueue(self, *args: P.args, **kwargs: P.kwargs) -> AsyncJob:
        """Save a job of this call; returns it (saved)."""
        return await self.job(*args, **kwargs).save()

    async def enqueue_many(
        self, calls: Iterable[tuple[Any, ...] | Mapping[str, Any]]
    ) -> list[AsyncJob]:
        """Save a job for each call in one round trip (see :meth:`Calls.enqueue_many`)."""
        saved: list[AsyncJob] = await self.host.save_many(self._jobs(calls))
        return saved

    async def every(self, interval: Any, *args: P.args, **kwargs: P.kwargs) -> dict[str, Any]:
        """See :meth:`Calls.every`."""
        data = self.task.signature.data(args, kwargs)
        made: dict[str, Any] = await self.host.every(
            self.task.type, interval, self.task.type, data, **self._options
        )
        return made

    async def cron(self, expression: str, *args: P.args, **kwargs: P.kwargs) -> dict[str, Any]:
        """See :meth:`Calls.cron`."""
        data = self.task.signature.data(args, kwargs)
        made: dict[str, Any] = await self.host.cron(
            self.task.type, expression, self.task.type, data, **self._options
        )
        return made

    async def result(self, job: AsyncJob, timeout: float | None = None) -> R:
        """See :meth:`Calls.result`."""
        value: R = self.task.signature.typed_result(await job.wait(timeout))
        return value


class _Def(Definition[P, R]):
    """A task of a ``def`` function."""

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        """The function itself, called here: no queue involved."""
        value: R = self.fn(*args, **kwargs)
        return value

    def handle(self, job: Any) -> Any:
        """A worker's handler of the task's jobs: the function called with the job's data."""
        args, kwargs = self._arguments(job)
        token = current.running(job)
        try:
            value = self.fn(*args, **kwargs)
        finally:
            current.done(token)
        return self._result(value)


class _AsyncDef(Definition[P, R]):
    """A task of an ``async def`` function: run on the worker's event loop."""

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> Coroutine[Any, Any, R]:
        """The coroutine function itself, called here: no queue involved."""
        coro: Coroutine[Any, Any, R] = self.fn(*args, **kwargs)
        return coro

    async def handle(self, job: Any) -> Any:
        """A worker's handler of the task's jobs: the function awaited on the job's data."""
        args, kwargs = self._arguments(job)
        token = current.running(job)
        try:
            value = await self.fn(*args, **kwargs)
        finally:
            current.done(token)
        return self._result(value)


class Task(_Def[P, R], Calls[P, R]):
    """A ``def`` function made a task of a ``Queue`` (see the module docstring)."""

    def __init__(
        self, fn: Callable[..., Any], job_type: str | None, host: Host, **how: Any
    ) -> None:
        _Def.__init__(self, fn, job_type, **how)
        Calls.__init__(self, self, {}, host)


class AsyncTask(_AsyncDef[P, R], Calls[P, R]):
    """An ``async def`` function made a task of a ``Queue``."""

    def __init__(
        self, fn: Callable[..., Any], job_type: str | None, host: Host, **how: Any
    ) -> None:
        _AsyncDef.__init__(self, fn, job_type, **how)
        Calls.__init__(self, self, {}, host)


class AioTask(_Def[P, R], AsyncCalls[P, R]):
    """A ``def`` function made a task of an ``AsyncQueue``: its calls are awaited."""

    def __init__(
        self, fn: Callable[..., Any], job_type: str | None, host: AsyncHost, **how: Any
    ) -> None:
        _Def.__init__(self, fn, job_type, **how)
        AsyncCalls.__init__(self, self, {}, host)


class AioAsyncTask(_AsyncDef[P, R], AsyncCalls[P, R]):
    """An ``async def`` function made a task of an ``AsyncQueue``."""

    def __init__(
        self, fn: Callable[..., Any], job_type: str | None, host: AsyncHost, **how: Any
    ) -> None:
        _AsyncDef.__init__(self, fn, job_type, **how)
        AsyncCalls.__init__(self, self, {}, host)


#: A task of either kind, on either client.
AnyTask = Task[Any, Any] | AsyncTask[Any, Any] | AioTask[Any, Any] | AioAsyncTask[Any, Any]


def make_task(
    host: Any,
    fn: Callable[..., Any],
    job_type: str | None,
    options: Mapping[str, Any],
    concurrency: int,
    isolation: str,
) -> AnyTask:
    """Task ``fn`` of ``host`` (a ``Queue`` or an ``AsyncQueue``), its options checked."""
    if not callable(fn):
        raise InvalidJob(f"a task is made of a function, got {fn!r:.100}")
    coroutine = inspect.iscoroutinefunction(fn)
    kind: type[AnyTask]
    if _is_async_host(host):
        kind = AioAsyncTask if coroutine else AioTask
    else:
        kind = AsyncTask if coroutine else Task
    made = kind(fn, job_type, host, concurrency=concurrency, isolation=isolation)
    made._options = made._checked(options)
    return made


def _find(module: str, qualname: str) -> Any:
    """The object named ``qualname`` in ``module`` (None when there is none)."""
    try:
        found: Any = importlib.import_module(module)
        for part in qualname.split("."):
            found = getattr(found, part)
    except (ImportError, AttributeError):
        return None
    return found
