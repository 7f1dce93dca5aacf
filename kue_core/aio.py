"""The asyncio client, for producers and readers: ``AsyncQueue`` on ``redis.asyncio``.

It runs the blocking client's operations (:mod:`kue_core.jobs.ops`) and script calls
(:mod:`kue_core.store.calls`) on an asyncio connection: the same checks, keys, script arguments,
replies and errors as :class:`kue_core.Queue`, written once. Workers stay on ``Queue``
(``async def`` handlers run on its event loop already)::

    async with AsyncQueue("redis://localhost") as queue:
        job = await queue.create_job("email", {"to": "ada@example.com"}).attempts(3).save()
        result = await job.wait(timeout=30)
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from datetime import date
from typing import Any

import redis.asyncio

from . import connection, defaults
from .base import checks, payloads, sealing
from .base.keys import Keys
from .base.payloads import PayloadStore
from .base.states import PROMOTABLE, RETRYABLE
from .base.values import validate_type
from .clients.aio_plans import AsyncPlans
from .clients.aio_reads import ReadingTransport
from .clients.aio_records import AsyncRecords
from .clients.queue_signals import AsyncSignalMethods
from .clients.queue_streams import AsyncStreamMethods
from .clients.queue_tasks import AsyncTaskMethods
from .clients.tasks import AioAsyncTask, AioTask
from .features import control, pins, search, stats
from .features import feeds as feed_ops
from .features.search import Found
from .jobs import journal, ops
from .jobs.aio_job import AsyncJob
from .jobs.log_lines import LogLine
from .store import calls
from .store.aio_events import AsyncEvents
from .store.aio_transport import AsyncTransport
from .store.events import wanted_events

__all__ = ["AioAsyncTask", "AioTask", "AsyncEvents", "AsyncJob", "AsyncQueue"]


class AsyncQueue(
    AsyncTaskMethods, AsyncRecords, AsyncStreamMethods, AsyncSignalMethods, AsyncPlans
):
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
        encryption_keys: str | Sequence[str] | None = None,
        max_data_bytes: int | None = None,
        payload_store: str | PayloadStore | None = None,
        max_payload_bytes: int | None = None,
    ) -> None:
        self.prefix = connection.queue_prefix(prefix)
        if encryption_keys is None:
            encryption_keys = os.environ.get(defaults.ENCRYPTION_KEYS_ENV)
        #: The keys its payloads are sealed with, or None (see kue_core.base.sealing).
        self.keyring = sealing.keyring(encryption_keys)
        #: Its payload limits and store, or None (see kue_core.base.payloads).
        self.offload = payloads.offload(
            self.prefix, max_data_bytes, payload_store, max_payload_bytes
        )
        url = redis_url or os.environ.get(defaults.REDIS_URL_ENV)
        self._tasks = {}  # the typed tasks defined on it, by type (see clients/queue_tasks.py)
        self._owns_client = client is None
        self.client = (
            client if client is not None else connection.async_client(url, data_dir, self.prefix)
        )
        if replicas is None:
            replicas = connection.url_options(url).get("replicas", 0) if url and not client else 0
        else:
            checks.integer(replicas, "replicas", 0)
        self.keys = Keys(self.prefix)
        # With a slow payload store, the stored values of the jobs an operation reads are read
        # in threads once it is done (kue_core/clients/aio_reads.py); else nothing more.
        slow = self.offload is not None and self.offload.slow
        transport = ReadingTransport if slow else AsyncTransport
        self.scripts = transport(self.client, self.keys, replicas)

    def __repr__(self) -> str:
        return f"<AsyncQueue prefix={self.prefix!r}>"

    async def close(self) -> None:
        """Release the connections (of a client made here)."""
        await self.scripts.close()
        if self._owns_client:
            await self.client.aclose()
            # A Sentinel URL's client: the connections to the sentinels too.
            manager = getattr(self.client.connection_pool, "sentinel_manager", None)
            for sentinel in getattr(manager, "sentinels", ()):
                await sentinel.aclose()

    async def __aenter__(self) -> AsyncQueue:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def _loaded(self, job_id: int, h: dict[str, str], runs: dict[str, str] | None) -> AsyncJob:
        return AsyncJob.from_hash(self, job_id, h, runs)

    # -- producing --------------------------------------------------------------------------
    def create_job(self, job_type: str, data: Any = None) -> AsyncJob:
        """A new, unsaved job; set options on it (as on ``Queue.create_job``), then ``await
        job.save()``."""
        return AsyncJob(self, job_type, data)

    async def save_many(self, jobs: Iterable[AsyncJob]) -> list[AsyncJob]:
        """Save new jobs in one round trip (see ``Queue.save_many``)."""
        return await self.scripts.drive(ops.save_many(self, jobs))

    async def flow(self, parent: AsyncJob, children: Iterable[Any] = ()) -> AsyncJob:
        """Save ``parent`` and ``children`` in one call, all or nothing (see ``Queue.flow``)."""
        await self.scripts.drive(ops.flow(self, parent, children))
        return parent

    # -- reading ----------------------------------------------------------------------------
    async def get_job(self, job_id: int | str) -> AsyncJob:
        """One job; ``JobNotFound`` when there is none with this id."""
        return await self.scripts.drive(ops.get_job(self, job_id))

    async def get_jobs(self, ids: Sequence[int]) -> list[AsyncJob]:
        """Several jobs in one round trip; ids without a job are left out."""
        return await self.scripts.drive(ops.get_jobs(self, ids))

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
        due = job_type if state == "delayed" else None  # by due time, as range_by_state
        return await self.scripts.drive(ops.kue_range(self, key, start, stop, order, limit, due))

    async def _range(
        self, key: str, start: int, stop: int, order: str, limit: int | None
    ) -> list[AsyncJob]:
        op = ops.kue_range(self, key, start, stop, order, limit)
        return await self.scripts.drive(op)

    async def page(
        self,
        state: str,
        job_type: str | None = None,
        *,
        offset: int = 0,
        count: int = 25,
        desc: bool = False,
        by: str = "queue",
    ) -> list[AsyncJob]:
        """``count`` jobs of a state from rank ``offset`` (see ``Queue.page``)."""
        op = ops.page(self, state, job_type, offset, count, desc, by)
        return await self.scripts.drive(op)

    async def count(self, state: str, job_type: str | None = None) -> int:
        """Number of jobs in a state, for all types or one."""
        return await self.scripts.drive(ops.count(self.keys, state, job_type))

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
        return await self.scripts.drive(journal.history(self, job_id))

    async def get_log(self, job_id: int | str) -> list[str]:
        """The job's log lines as its handlers wrote them (empty for an unknown job, as Kue)."""
        return await self.scripts.drive(journal.get_log(self.keys, job_id, self.keyring))

    async def get_log_lines(self, job_id: int | str) -> list[LogLine]:
        """The job's log lines, each with its ``text``, when it was written (``at``, ms) and
        its ``attempt`` (see ``Queue.get_log_lines``)."""
        return await self.scripts.drive(journal.get_log_lines(self.keys, job_id, self.keyring))

    async def ping(self) -> bool:
        """Whether Redis answers."""
        try:
            return bool(await self.client.ping())
        except (redis.RedisError, OSError):
            return False

    # -- control ----------------------------------------------------------------------------
    async def cancel(self, job_id: int | str, reason: str = "") -> AsyncJob:
        """End a job in any state but complete (see ``Queue.cancel``); the job as it is now."""
        return await self.scripts.drive(ops.cancel(self, job_id, reason))

    async def retry(self, job_id: int | str) -> AsyncJob:
        """Run a failed or complete job again (see ``Queue.retry``); the job as it is now."""
        return await self.scripts.drive(ops.requeue(self, job_id, RETRYABLE))

    async def promote(self, job_id: int | str) -> AsyncJob:
        """Make a delayed job wait now (see ``Queue.promote``); the job as it is now."""
        return await self.scripts.drive(ops.requeue(self, job_id, PROMOTABLE))

    async def move(self, job_id: int | str, to_type: str, *, force: bool = False) -> AsyncJob:
        """Put a job under another type (see ``Queue.move``); the job as it is now."""
        return await self.scripts.drive(ops.move(self, job_id, to_type, force))

    async def update_data(self, job_id: int | str, data: Any) -> AsyncJob:
        """Replace a waiting or failed job's data (see ``Queue.update_data``)."""
        return await self.scripts.drive(ops.update_data(self, job_id, data))

    async def remove(self, job_id: int | str, *, cascade: bool = False) -> list[int]:
        """Delete a job, its log and its history (see ``Queue.remove``): the ids removed."""
        removed: list[int] = await self.scripts.drive(ops.remove(self, job_id, cascade))
        return removed

    async def pause(self, job_type: str) -> bool:
        """Stop every worker from claiming jobs of ``job_type``; False when it was paused."""
        paused: bool = await self.scripts.call(calls.pause(self.keys, validate_type(job_type)))
        return paused

    async def resume(self, job_type: str) -> bool:
        """Let workers claim jobs of a paused type again; False when it was not paused."""
        resumed: bool = await self.scripts.call(calls.resume(self.keys, validate_type(job_type)))
        return resumed

    async def paused(self) -> list[str]:
        """The paused job types, sorted."""
        return await self.scripts.drive(ops.paused(self))

    async def workers(self) -> list[dict[str, Any]]:
        """The live worker processes of any host on this queue (see ``Queue.workers``)."""
        return await self.scripts.drive(control.workers(self.keys))

    async def stop_worker(self, worker_id: str, timeout: float = defaults.SHUTDOWN_TIMEOUT) -> None:
        """Ask a live worker process to shut down gracefully (see ``Queue.stop_worker``)."""
        await self.scripts.drive(control.stop_worker(self.keys, worker_id, timeout))

    async def pinned_waits(self, count: int = 500) -> dict[str, list[int]]:
        """Worker id -> ids of the pinned jobs waiting for it (see ``Queue.pinned_waits``)."""
        return await self.scripts.drive(pins.waits(self.keys, count))

    # -- bulk actions (see Queue.retry_all, promote_all, remove_all) -------------------------
    async def retry_all(self, job_type: str | None = None) -> int:
        return await self.scripts.drive(ops.bulk(self.keys, "failed", "inactive", job_type))

    async def promote_all(self, job_type: str | None = None) -> int:
        return await self.scripts.drive(ops.bulk(self.keys, "delayed", "inactive", job_type))

    async def remove_all(self, state: str, job_type: str | None = None) -> int:
        return await self.scripts.drive(ops.bulk(self.keys, state, "remove", job_type))

    # -- statistics (see Queue.counts_by_type, throughput, totals, timings) ------------------
    async def counts_by_type(self) -> dict[str, dict[str, int]]:
        return await self.scripts.drive(stats.counts_by_type(self.keys))

    async def throughput(self, minutes: int = 60) -> list[dict[str, int]]:
        return await self.scripts.drive(stats.throughput(self.keys, minutes))

    async def totals(self) -> dict[str, Any]:
        return await self.scripts.drive(stats.totals(self.keys))

    async def timings(
        self, job_type: str | None = None, day: date | str | None = None
    ) -> dict[str, Any]:
        return await self.scripts.drive(stats.timings(self.keys, job_type, day))

    # -- feeds (see Queue.feed, unfeed, feeds) ------------------------------------------------
    async def feed(self, job_type: str, event: str) -> str:
        await self.scripts.call(feed_ops.switch(self.keys, job_type, event, True))
        return self.keys.feed(event, job_type)

    async def unfeed(self, job_type: str, event: str) -> None:
        await self.scripts.call(feed_ops.switch(self.keys, job_type, event, False))

    async def feeds(self) -> dict[str, list[str]]:
        return await self.scripts.drive(feed_ops.feeds(self.keys))

    # -- events -----------------------------------------------------------------------------
    def events(
        self, *names: str, job_type: str | None = None, job_id: int | str | None = None
    ) -> AsyncEvents:
        """The queue's events as they happen, from every process (see
        :mod:`kue_core.store.events`): ``async for event in queue.events("complete")``, each an
        :class:`kue_core.store.events.Event`. Only the events named (none: every one), of one type,
        of one job. Subscribed at the first iteration, or on entering ``async with``: use
        that to be sure to hear what follows it. Closed when the loop ends."""
        wanted = wanted_events(names)
        if job_type is not None:
            validate_type(job_type)
        jid = None if job_id is None else checks.job_id(job_id)
        return AsyncEvents(self.client, self.keys.events, wanted, job_type, jid)
