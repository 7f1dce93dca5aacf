"""The job of an ``AsyncQueue`` (:mod:`kue_core.aio`): ``kue_core.Job``'s options and fields,
its reads and writes awaited."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterable
from typing import Any, Protocol

from ..base.errors import InvalidJob, JobNotFound
from ..base.keys import Keys
from ..base.payloads import Offload
from ..base.sealing import Keyring
from ..features.streams import Part
from ..store.aio_events import AsyncEvents
from ..store.aio_transport import AsyncTransport
from . import ops, waiting
from .spec import JobSpec


class Host(Protocol):
    """What an ``AsyncJob`` uses of its ``AsyncQueue``."""

    @property
    def keys(self) -> Keys: ...
    @property
    def scripts(self) -> AsyncTransport: ...
    @property
    def keyring(self) -> Keyring | None: ...
    @property
    def offload(self) -> Offload | None: ...

    def _loaded(self, job_id: int, h: dict[str, str], runs: dict[str, str] | None) -> AsyncJob: ...
    def events(
        self, *names: str, job_type: str | None = None, job_id: int | str | None = None
    ) -> AsyncEvents: ...
    async def get_job(self, job_id: int | str) -> AsyncJob: ...
    def stream_parts(
        self, job_id: int | str, *, after: str | None = None, timeout: float | None = None
    ) -> AsyncIterator[Part]: ...
    async def remove(self, job_id: int | str, *, cascade: bool = False) -> list[int]: ...
    async def cancel(self, job_id: int | str, reason: str = "") -> AsyncJob: ...
    async def retry(self, job_id: int | str) -> AsyncJob: ...
    async def promote(self, job_id: int | str) -> AsyncJob: ...
    async def move(self, job_id: int | str, to_type: str, *, force: bool = False) -> AsyncJob: ...
    async def update_data(self, job_id: int | str, data: Any) -> AsyncJob: ...
    async def set_only(self, job_id: int | str, workers: Iterable[str] | None) -> AsyncJob: ...
    async def history(self, job_id: int | str) -> list[dict[str, Any]]: ...
    async def runs(self, job_id: int | str) -> list[dict[str, Any]]: ...
    async def dependencies(self, job_id: int | str) -> list[dict[str, Any]]: ...
    async def dependents(self, job_id: int | str) -> list[dict[str, Any]]: ...
    async def children_results(self, job_id: int | str) -> dict[int, Any]: ...


class AsyncJob(JobSpec):
    """A job of an :class:`kue_core.aio.AsyncQueue`: the options and fields of
    :class:`kue_core.Job`, its reads and writes awaited. Progress and log lines are a worker's
    to write, on its own ``Job``."""

    queue: Host

    async def save(self) -> AsyncJob:
        """Store the job (or, once saved, its changes); the job, with ``id`` set. With a
        unique key that a job holds, ``deduplicated`` tells (see ``Job.unique``)."""
        if self.id is not None:
            return await self.update()
        plain = ops.plain_save(self.queue, self)
        if plain is not None:
            self._saved((await self.queue.scripts.call(plain))[0])
        else:
            await self.queue.scripts.drive(ops.save(self.queue, self))
        return self

    async def update(self) -> AsyncJob:
        """Write changed data and options of a saved job; its state is kept."""
        await self.queue.scripts.drive(ops.update(self.queue, self))
        return self

    async def remove(self, *, cascade: bool = False) -> list[int]:
        """Delete the job, its log and its history (see ``Queue.remove``)."""
        return await self.queue.remove(self._saved_id(), cascade=cascade)

    async def cancel(self, reason: str = "") -> AsyncJob:
        """Fail the job at once, wherever it is, with no retry (see ``Queue.cancel``)."""
        self._reload(await self.queue.cancel(self._saved_id(), reason))
        return self

    async def retry(self) -> AsyncJob:
        """Run a failed or complete job again (see ``Queue.retry``)."""
        self._reload(await self.queue.retry(self._saved_id()))
        return self

    async def promote(self) -> AsyncJob:
        """Make a delayed job wait now (see ``Queue.promote``)."""
        self._reload(await self.queue.promote(self._saved_id()))
        return self

    async def move(self, to_type: str, *, force: bool = False) -> AsyncJob:
        """Put the job under another type (see ``Queue.move``)."""
        self._reload(await self.queue.move(self._saved_id(), to_type, force=force))
        return self

    async def update_data(self, data: Any) -> AsyncJob:
        """Replace the data of a waiting or failed job (see ``Queue.update_data``)."""
        self._reload(await self.queue.update_data(self._saved_id(), data))
        return self

    async def set_state(self, state: str) -> AsyncJob:
        """Move the job to another state (``active`` is a worker's to give)."""
        await self.queue.scripts.drive(ops.set_state(self.queue, self, state))
        return self

    async def set_priority(self, level: str | int) -> AsyncJob:
        """Change the priority of a saved job and re-order it in its lists."""
        await self.queue.scripts.drive(ops.set_priority(self.queue, self, level))
        return self

    async def history(self) -> list[dict[str, Any]]:
        """The job's recent transitions, oldest first."""
        return await self.queue.history(self._saved_id())

    async def refresh(self) -> AsyncJob:
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
                    ring, offload = self.queue.keyring, self.queue.offload
                    if offload is not None and offload.slow:  # (S3: read in a thread)
                        ended = await asyncio.to_thread(waiting.by_event, event, ring, offload)
                    else:
                        ended = waiting.by_event(event, ring, offload)
                    if ended is not None and ended.how == "failed":
                        with contextlib.suppress(JobNotFound):  # removed since: the event tells all
                            ended = waiting.as_stored(ended, await self.queue.get_job(job_id))
        return ended.value()

    def on(self, event: str, fn: Any) -> AsyncJob:
        raise InvalidJob("an AsyncJob has no listeners: use job.wait() or queue.events()")

    async def dependencies(self) -> list[dict[str, Any]]:
        """The jobs it depends on: ``{"id", "state", "done"}`` each, by id."""
        return await self.queue.dependencies(self._saved_id())

    async def dependents(self) -> list[dict[str, Any]]:
        """The jobs that depend on it: ``{"id", "state"}`` each, by id."""
        return await self.queue.dependents(self._saved_id())

    async def children_results(self) -> dict[int, Any]:
        """``{id: result}`` of the jobs it depends on that have completed."""
        return await self.queue.children_results(self._saved_id())

    async def runs(self) -> list[dict[str, Any]]:
        """The runs of a saved fan-out job, ordered by start (see ``Job.runs``)."""
        self._runs = await self.queue.runs(self._saved_id())
        return list(self._runs)

    async def set_only(self, workers: Iterable[str] | None) -> AsyncJob:
        """Change which workers may run this saved job (None: any worker); reloaded."""
        self._reload(await self.queue.set_only(self._saved_id(), workers))
        return self

    def log(self, *args: Any, **kwargs: Any) -> Any:
        raise InvalidJob("log lines are a worker's to write, on its own Job")

    def stream_iter(
        self, after: str | None = None, timeout: float | None = None
    ) -> AsyncIterator[Part]:
        """``Job.stream_iter``, as an asynchronous iterator (``async for``)."""
        return self.queue.stream_parts(self._saved_id(), after=after, timeout=timeout)

    def _retag(self, what: str, tags: list[str] | None = None) -> Any:
        # A saved job's tags and tracking change at once, which is awaited: through the
        # queue, as the error says.
        how, args = {"untrack": ("track", "job.id, on=False")}.get(what, (what, "job.id, ..."))
        raise InvalidJob(f"a saved AsyncJob changes this with await queue.{how}({args})")
