"""The asyncio client, for producers and readers: ``AsyncQueue`` on ``redis.asyncio``.

It runs the blocking client's operations (:mod:`kue_core.ops`) and script calls
(:mod:`kue_core.calls`) on an asyncio connection: the same checks, keys, script arguments,
replies and errors as :class:`kue_core.Queue`, written once. Workers stay on ``Queue``
(``async def`` handlers run on its event loop already)::

    async with AsyncQueue("redis://localhost") as queue:
        job = await queue.create_job("email", {"to": "ada@example.com"}).attempts(3).save()
        result = await job.wait(timeout=30)
"""

from __future__ import annotations

import asyncio
import hashlib
import os
from collections.abc import Iterable, Sequence
from typing import Any, TypeVar, cast

import redis.asyncio
from redis.exceptions import NoScriptError, ResponseError

from . import calls, checks, connection, control, defaults, ops, search, waiting
from .aio_events import AsyncEvents
from .calls import Call, Op, Read
from .errors import ConnectionFailed, InvalidJob, JobNotFound, KueError
from .events import wanted_events
from .job import Job
from .keys import Keys
from .lua_source import SCRIPT_NAMES, function_library, script_source
from .scripts import _no_functions, _unrun, confirmed, translate
from .search import Found
from .values import validate_type

T = TypeVar("T")


class AsyncScripts:
    """The transition scripts on an asyncio client: runs :mod:`kue_core.calls` and
    :mod:`kue_core.ops` as :class:`kue_core.scripts.Scripts` does, as Redis functions where the
    server has them, else as scripts."""

    def __init__(self, client: redis.asyncio.Redis, keys: Keys, replicas: int = 0) -> None:
        self._client = client
        self._keys = keys
        self.replicas = replicas
        self._libraries = {name: function_library(name) for name in SCRIPT_NAMES}
        self._sources = {name: script_source(name) for name in SCRIPT_NAMES}
        self._shas = {
            name: hashlib.sha1(source.encode()).hexdigest()
            for name, source in self._sources.items()
        }
        #: Whether the scripts run as Redis functions: until the server says it has none.
        self.functions = True

    def _command(self, c: Call[Any]) -> tuple[Any, ...]:
        how = (
            ("FCALL", self._libraries[c.name].name)
            if self.functions
            else ("EVALSHA", self._shas[c.name])
        )
        return (*how, 1, c.key, self._keys.prefix, *c.args)

    async def _recovered(self, name: str, error: ResponseError) -> bool:
        """Whether ``error`` says script ``name`` did not run for want of its function or
        script, made right (see ``Scripts._recovered``)."""
        if isinstance(error, NoScriptError):
            await self._client.script_load(self._sources[name])
            return True
        if not self.functions:
            return False
        if _no_functions(error):
            self.functions = False
            return True
        if not str(error).startswith("Function not found"):
            return False
        try:
            await self._client.execute_command("FUNCTION", "LOAD", self._libraries[name].code)  # type: ignore[no-untyped-call]
        except ResponseError as e:
            if _no_functions(e):
                self.functions = False
            elif "already exists" not in str(e):
                raise
        return True

    async def call(self, c: Call[T]) -> T:
        """Run one script call; its reply, read."""
        for _ in range(3):
            try:
                if c.replicated and self.replicas:
                    # WAIT counts the replicas that have this connection's writes: one pipeline.
                    pipe = self._client.pipeline(transaction=False)
                    pipe.execute_command(*self._command(c))
                    pipe.execute_command("WAIT", self.replicas, defaults.REPLICA_TIMEOUT_MS)
                    reply, replicas = await pipe.execute()
                    confirmed(replicas, self.replicas)
                else:
                    reply = await self._client.execute_command(*self._command(c))  # type: ignore[no-untyped-call]
            except ResponseError as e:
                if not await self._recovered(c.name, e):
                    raise translate(e) from None
                continue
            return c.parse(reply)
        raise ConnectionFailed(f"could not run the {c.name} script")

    async def batch(self, batch: Sequence[Call[T]]) -> list[T]:
        """Several calls of one script in one round trip (see ``Scripts.batch``)."""
        if not batch:
            return []
        results = await self._pipelined(batch)
        for _ in range(2):
            missing = [r for r in results if _unrun(r)]
            if not missing or not await self._recovered(batch[0].name, missing[0]):
                break
            redo = [c for c, r in zip(batch, results, strict=True) if _unrun(r)]
            again = iter(await self._pipelined(redo))
            results = [next(again) if _unrun(r) else r for r in results]
        for r in results:
            if isinstance(r, ResponseError):
                raise translate(r)
            if isinstance(r, Exception):
                raise r
        return [c.parse(r) for c, r in zip(batch, results, strict=True)]

    async def _pipelined(self, batch: Sequence[Call[Any]]) -> list[Any]:
        pipe = self._client.pipeline(transaction=False)
        for c in batch:
            pipe.execute_command(*self._command(c))
        waits = bool(self.replicas) and any(c.replicated for c in batch)
        if waits:
            pipe.execute_command("WAIT", self.replicas, defaults.REPLICA_TIMEOUT_MS)
        results = list(await pipe.execute(raise_on_error=False))
        if waits:
            replicas = results.pop()
            if isinstance(replicas, Exception):
                raise replicas
            confirmed(replicas, self.replicas)
        return results

    async def read(self, step: Read) -> list[Any]:
        """Plain commands in one round trip; their replies."""
        if not step.commands:
            return []
        if len(step.commands) == 1:
            return [await self._client.execute_command(*step.commands[0])]  # type: ignore[no-untyped-call]
        pipe = self._client.pipeline(transaction=False)
        for command in step.commands:
            pipe.execute_command(*command)
        return list(await pipe.execute())

    async def drive(self, op: Op[T]) -> T:
        """Run an operation to its end (see ``Scripts.drive``)."""
        reply: Any = None
        error: KueError | None = None
        while True:
            try:
                step = op.send(reply) if error is None else op.throw(error)
            except StopIteration as done:
                return cast(T, done.value)
            reply, error = None, None
            try:
                if isinstance(step, list):
                    reply = await self.batch(step)
                elif isinstance(step, Read):
                    reply = await self.read(step)
                else:
                    reply = await self.call(step)
            except KueError as e:
                error = e


def _client(url: str | None, data_dir: str | os.PathLike[str] | None) -> redis.asyncio.Redis:
    """An asyncio client for ``url`` (one server: ``redis://``, ``rediss://``, ``unix://``),
    or for the embedded Redis (started if need be) when there is none. Its pool holds at most
    ``defaults.AIO_CONNECTIONS`` connections: calls beyond wait for one to be free."""
    options = dict(connection.CLIENT_OPTIONS)
    url = connection.base_url(url) if url else connection.embedded_url(data_dir)
    scheme = url.partition("://")[0].lower()
    if scheme not in ("redis", "rediss", "unix"):
        raise ConnectionFailed(
            f"AsyncQueue connects to one Redis server (redis://, rediss://, unix://), not "
            f"{scheme}://; use Queue for Redis Cluster and Sentinel"
        )
    if scheme == "unix":
        options.pop("socket_keepalive", None)  # a TCP option; unix sockets refuse it
    try:
        pool = redis.asyncio.BlockingConnectionPool.from_url(
            url,
            max_connections=defaults.AIO_CONNECTIONS,
            timeout=defaults.SOCKET_TIMEOUT,
            **options,
        )
    except ValueError as e:
        raise ConnectionFailed(f"invalid Redis URL {connection.redact(url)!r}: {e}") from None
    return redis.asyncio.Redis.from_pool(pool)


class AsyncQueue:
    """A Kue-compatible queue for asyncio code: producing, reading, control and events.

    Arguments as :class:`kue_core.Queue`'s (``redis_url`` and ``prefix`` default to
    ``$KUE_REDIS_URL`` and ``$KUE_PREFIX``; without a URL, the embedded Redis under
    ``data_dir``). ``client``: a ``redis.asyncio.Redis`` of your own, with
    ``decode_responses=True``. Use it as ``async with``, or ``await queue.close()``.
    """

    def __init__(
        self,
        redis_url: str | None = None,
        prefix: str | None = None,
        *,
        data_dir: str | os.PathLike[str] | None = None,
        client: redis.asyncio.Redis | None = None,
        replicas: int | None = None,
    ) -> None:
        self.prefix = connection.queue_prefix(prefix)
        url = redis_url or os.environ.get(defaults.REDIS_URL_ENV)
        self._owns_client = client is None
        self.client = client if client is not None else _client(url, data_dir)
        if replicas is None:
            replicas = connection.url_options(url).get("replicas", 0) if url and not client else 0
        else:
            checks.integer(replicas, "replicas", 0)
        self.keys = Keys(self.prefix)
        self.scripts = AsyncScripts(self.client, self.keys, replicas)

    def __repr__(self) -> str:
        return f"<AsyncQueue prefix={self.prefix!r}>"

    async def close(self) -> None:
        """Release the connections (of a client made here)."""
        if self._owns_client:
            await self.client.aclose()

    async def __aenter__(self) -> AsyncQueue:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def _loaded(self, job_id: int, h: dict[str, str], runs: dict[str, str] | None) -> AsyncJob:
        return AsyncJob.from_hash(self, job_id, h, runs)  # type: ignore[arg-type, return-value]

    # -- producing --------------------------------------------------------------------------
    def create_job(self, job_type: str, data: Any = None) -> AsyncJob:
        """A new, unsaved job; set options on it (as on ``Queue.create_job``), then ``await
        job.save()``."""
        return AsyncJob(self, job_type, data)  # type: ignore[arg-type]

    async def save_many(self, jobs: Iterable[AsyncJob]) -> list[AsyncJob]:
        """Save new jobs in one round trip (see ``Queue.save_many``)."""
        return await self.scripts.drive(ops.save_many(self, jobs))  # type: ignore[arg-type]

    async def flow(self, parent: AsyncJob, children: Iterable[Any] = ()) -> AsyncJob:
        """Save ``parent`` and ``children`` in one call, all or nothing (see ``Queue.flow``)."""
        saved = await self.scripts.drive(ops.flow(self, parent, children))
        return cast(AsyncJob, saved[-1])

    # -- reading ----------------------------------------------------------------------------
    async def get_job(self, job_id: int | str) -> AsyncJob:
        """One job; ``JobNotFound`` when there is none with this id."""
        return cast(AsyncJob, await self.scripts.drive(ops.get_job(self, job_id)))

    async def get_jobs(self, ids: Sequence[int]) -> list[AsyncJob]:
        """Several jobs in one round trip; ids without a job are left out."""
        return cast(list[AsyncJob], await self.scripts.drive(ops.get_jobs(self, ids)))

    async def range(
        self, start: int, stop: int, order: str = "asc", *, limit: int | None = None
    ) -> list[AsyncJob]:
        """Jobs of every state, by Kue's rules (see ``Queue.range_by_state``)."""
        return await self._range(self.keys.jobs, start, stop, order, limit)

    async def range_by_state(
        self, state: str, start: int, stop: int, order: str = "asc", *, limit: int | None = None
    ) -> list[AsyncJob]:
        """Kue's range of one state (see ``Queue.range_by_state``)."""
        key = ops.state_key(self.keys, state)
        return await self._range(key, start, stop, order, limit)

    async def range_by_type(
        self,
        job_type: str,
        state: str,
        start: int,
        stop: int,
        order: str = "asc",
        *,
        limit: int | None = None,
    ) -> list[AsyncJob]:
        """Kue's range of one type's state (see ``Queue.range_by_type``)."""
        key = ops.state_key(self.keys, state, job_type)
        return await self._range(key, start, stop, order, limit)

    async def _range(
        self, key: str, start: int, stop: int, order: str, limit: int | None
    ) -> list[AsyncJob]:
        op = ops.kue_range(self, key, start, stop, order, limit)
        return cast(list[AsyncJob], await self.scripts.drive(op))

    async def page(
        self,
        state: str,
        job_type: str | None = None,
        *,
        offset: int = 0,
        count: int = 25,
        desc: bool = False,
    ) -> list[AsyncJob]:
        """``count`` jobs of a state from rank ``offset`` (see ``Queue.page``)."""
        op = ops.page(self, state, job_type, offset, count, desc)
        return cast(list[AsyncJob], await self.scripts.drive(op))

    async def count(self, state: str, job_type: str | None = None) -> int:
        """Number of jobs in a state, for all types or one."""
        key = ops.state_key(self.keys, state, job_type)
        return int(await self.client.zcard(key))

    async def counts(self, job_type: str | None = None) -> dict[str, int]:
        """``{state: count}`` for every state, for all types or one (one round trip)."""
        return await self.scripts.drive(ops.counts(self, job_type))

    async def ids(self, state: str, job_type: str | None = None) -> list[int]:
        """Every job id in a state (optionally of one type), in score order."""
        return await self.scripts.drive(ops.ids(self, state, job_type))

    async def work_time(self) -> int:
        """Total milliseconds spent on completed jobs."""
        return await self.scripts.drive(ops.work_time(self))

    async def types(self) -> list[str]:
        """Every job type ever saved, sorted."""
        return await self.scripts.drive(ops.types(self))

    async def search(
        self,
        text: str,
        *,
        state: str | None = None,
        job_type: str | None = None,
        offset: int = 0,
        count: int = 25,
    ) -> Found:
        """Ids of the jobs found by every word of ``text`` (see ``Queue.search``)."""
        op = search.query(self.keys, text, state, job_type, offset, count)
        return await self.scripts.drive(op)

    async def history(self, job_id: int | str) -> list[dict[str, Any]]:
        """The job's recent transitions, oldest first (see ``Queue.history``)."""
        return await self.scripts.drive(ops.history(self, job_id))

    async def get_log(self, job_id: int | str) -> list[str]:
        """The job's log lines (empty for an unknown job, as Kue)."""
        return cast(
            list[str], await self.client.lrange(self.keys.log(checks.job_id(job_id)), 0, -1)
        )

    async def ping(self) -> bool:
        """Whether Redis answers."""
        try:
            return bool(await self.client.ping())
        except (redis.RedisError, OSError):
            return False

    # -- control ----------------------------------------------------------------------------
    async def cancel(self, job_id: int | str, reason: str = "") -> AsyncJob:
        """End a job in any state but complete (see ``Queue.cancel``); the job as it is now."""
        return cast(AsyncJob, await self.scripts.drive(ops.cancel(self, job_id, reason)))

    async def move(self, job_id: int | str, to_type: str, *, force: bool = False) -> AsyncJob:
        """Put a job under another type (see ``Queue.move``); the job as it is now."""
        return cast(AsyncJob, await self.scripts.drive(ops.move(self, job_id, to_type, force)))

    async def update_data(self, job_id: int | str, data: Any) -> AsyncJob:
        """Replace a waiting or failed job's data (see ``Queue.update_data``)."""
        return cast(AsyncJob, await self.scripts.drive(ops.update_data(self, job_id, data)))

    async def remove(self, job_id: int | str, *, cascade: bool = False) -> list[int]:
        """Delete a job, its log and its history (see ``Queue.remove``): the ids removed."""
        return await self.scripts.drive(ops.remove(self, job_id, cascade))

    async def pause(self, job_type: str) -> bool:
        """Stop every worker from claiming jobs of ``job_type``; False when it was paused."""
        return await self.scripts.call(calls.pause(self.keys, validate_type(job_type)))

    async def resume(self, job_type: str) -> bool:
        """Let workers claim jobs of a paused type again; False when it was not paused."""
        return await self.scripts.call(calls.resume(self.keys, validate_type(job_type)))

    async def workers(self) -> list[dict[str, Any]]:
        """The live worker processes of any host on this queue (see ``Queue.workers``)."""
        return await self.scripts.drive(control.workers(self.keys))

    async def stop_worker(self, worker_id: str, timeout: float = defaults.SHUTDOWN_TIMEOUT) -> None:
        """Ask a live worker process to shut down gracefully (see ``Queue.stop_worker``)."""
        await self.scripts.drive(control.stop_worker(self.keys, worker_id, timeout))

    # -- events -----------------------------------------------------------------------------
    def events(
        self, *names: str, job_type: str | None = None, job_id: int | str | None = None
    ) -> AsyncEvents:
        """The queue's events as they happen, from every process (see
        :mod:`kue_core.events`): ``async for event in queue.events("complete")``, each an
        :class:`kue_core.events.Event`. Only the events named (none: every one), of one type,
        of one job. Subscribed at the first iteration, or on entering ``async with``: use
        that to be sure to hear what follows it. Closed when the loop ends."""
        wanted = wanted_events(names)
        if job_type is not None:
            validate_type(job_type)
        jid = None if job_id is None else checks.job_id(job_id)
        return AsyncEvents(self.client, self.keys.events, wanted, job_type, jid)


class AsyncJob(Job):
    """A job of an :class:`AsyncQueue`: the options and fields of :class:`kue_core.Job`, its
    reads and writes awaited. Progress and log lines are a worker's to write, on its own
    ``Job``."""

    queue: AsyncQueue  # type: ignore[assignment]

    async def save(self) -> AsyncJob:  # type: ignore[override]
        """Store the job (or, once saved, its changes); the job, with ``id`` set. With a
        unique key that a job holds, ``deduplicated`` tells (see ``Job.unique``)."""
        if self.id is not None:
            return await self.update()
        await self.queue.scripts.drive(ops.save(self.queue, self))
        return self

    async def update(self) -> AsyncJob:  # type: ignore[override]
        """Write changed data and options of a saved job; its state is kept."""
        await self.queue.scripts.drive(ops.update(self.queue, self))
        return self

    async def remove(self, *, cascade: bool = False) -> list[int]:  # type: ignore[override]
        """Delete the job, its log and its history (see ``Queue.remove``)."""
        return await self.queue.remove(self._saved_id(), cascade=cascade)

    async def cancel(self, reason: str = "") -> AsyncJob:  # type: ignore[override]
        """Fail the job at once, wherever it is, with no retry (see ``Queue.cancel``)."""
        self._reload(await self.queue.cancel(self._saved_id(), reason))
        return self

    async def move(self, to_type: str, *, force: bool = False) -> AsyncJob:  # type: ignore[override]
        """Put the job under another type (see ``Queue.move``)."""
        self._reload(await self.queue.move(self._saved_id(), to_type, force=force))
        return self

    async def update_data(self, data: Any) -> AsyncJob:  # type: ignore[override]
        """Replace the data of a waiting or failed job (see ``Queue.update_data``)."""
        self._reload(await self.queue.update_data(self._saved_id(), data))
        return self

    async def set_state(self, state: str) -> AsyncJob:  # type: ignore[override]
        """Move the job to another state (``active`` is a worker's to give)."""
        await self.queue.scripts.drive(ops.set_state(self.queue, self, state))
        return self

    async def set_priority(self, level: str | int) -> AsyncJob:  # type: ignore[override]
        """Change the priority of a saved job and re-order it in its lists."""
        await self.queue.scripts.drive(ops.set_priority(self.queue, self, level))
        return self

    async def history(self) -> list[dict[str, Any]]:  # type: ignore[override]
        """The job's recent transitions, oldest first."""
        return await self.queue.history(self._saved_id())

    async def refresh(self) -> AsyncJob:  # type: ignore[override]
        """Read the job again: its state, progress, result... as they are now."""
        self._reload(await self.queue.get_job(self._saved_id()))
        return self

    async def wait(self, timeout: float | None = None) -> Any:
        """Wait until the job ends: its result once it completes; raises ``JobFailed`` (with
        its error) once it fails for good, ``JobNotFound`` if it is removed, ``WaitTimeout``
        after ``timeout`` seconds (None: no bound)."""
        job_id = self._saved_id()
        limit = waiting.seconds(timeout)
        loop = asyncio.get_running_loop()
        deadline = None if limit is None else loop.time() + limit
        async with self.queue.events(*waiting.FINAL, job_id=job_id) as stream:
            try:
                ended = waiting.by_job(await self.queue.get_job(job_id), job_id)
            except JobNotFound:
                ended = waiting.by_job(None, job_id)
            while ended is None:
                left = None if deadline is None else deadline - loop.time()
                if left is not None and left <= 0:
                    raise waiting.timed_out(job_id, limit)
                event = await stream.get(left)
                if event is not None:
                    ended = waiting.by_event(event)
        return ended.value()

    def on(self, event: str, fn: Any) -> AsyncJob:
        raise InvalidJob("an AsyncJob has no listeners: use job.wait() or queue.events()")

    def _not_here(self, *args: Any, **kwargs: Any) -> Any:
        raise InvalidJob("an AsyncJob cannot do this; use a Queue's Job")

    # Writes that only a worker makes, or that have no asyncio form yet: a clear error, not a
    # blocking call on the wrong client.
    log = tag = untag = track = untrack = set_only = _not_here
    dependencies = dependents = children_results = runs = _not_here
