"""The Queue facade: what producers, workers, the dashboard and the API call."""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from datetime import date
from typing import TYPE_CHECKING, Any

import redis

from . import connection, defaults
from .base import checks, payloads, sealing
from .base.errors import InvalidJob
from .base.keys import Keys
from .base.payloads import PayloadStore
from .base.states import PROMOTABLE, RETRYABLE
from .clients.queue_records import QueueRecords
from .clients.queue_schedules import ScheduleMethods
from .clients.queue_signals import SignalMethods
from .clients.queue_streams import StreamMethods
from .clients.queue_tasks import TaskMethods
from .clients.queue_workers import WorkerMethods
from .features import feeds as feed_ops
from .features import pins, stats
from .features.control import Control
from .features.limits import LimitMethods
from .jobs import journal, ops, record_ops
from .jobs.flow_ops import Node
from .jobs.job import Job, validate_type
from .jobs.log_lines import LogLine
from .store import calls
from .store.events import EventBus, EventStream, Receiver
from .store.transport import Transport
from .worker.state import Owner

_job_id = checks.job_id


def _flag(value: object, name: str) -> bool:
    if not isinstance(value, bool):
        raise InvalidJob(f"{name} must be true or false, got {value!r}")
    return value


class Queue(
    WorkerMethods,
    TaskMethods,
    QueueRecords,
    StreamMethods,
    SignalMethods,
    ScheduleMethods,
    LimitMethods,
):
    """A Kue-compatible job queue on one Redis and one key prefix.

    ``redis_url`` defaults to ``$KUE_REDIS_URL``; without either, an embedded Redis keeps its
    data under ``data_dir`` (default ``./.kue``), shared by every process that uses it.
    ``prefix`` (of every key) defaults to ``$KUE_PREFIX``, else ``q`` (Kue's): the rule the
    ``kue`` command and the HTTP app follow, so a producer and a worker started the documented
    way share one queue.
    ``lease_ms`` and ``stall_limit`` tune this process's workers (see ``kue_core.defaults``).
    ``replicas``: how many replicas must have a job before ``save()`` returns (Redis ``WAIT``;
    else :class:`NotReplicated` is raised); by default the URL's ``?replicas=N``, else 0.
    ``worker_id``: the id this process's workers register under, the same across restarts
    (letters, digits and ``. _ : @ -``, up to 100 characters); one live process at a time
    may have it (:class:`WorkerIdTaken`). By default, one made up: ``host:pid:hex8``.
    ``encryption_keys``: the keys its jobs' data and results are encrypted with in Redis
    (``<key id>:<32 bytes in base64>``, a list or comma-separated; the first encrypts, every
    one decrypts; see :mod:`kue_core.base.sealing`); by default ``$KUE_ENCRYPTION_KEYS``, else
    none: stored in clear.
    ``max_data_bytes``, ``payload_store``, ``max_payload_bytes``: a job's data or result larger
    than ``max_data_bytes`` goes to the payload store (a ``file:///path`` or
    ``s3://bucket/prefix`` URL) and the job keeps a reference; without a store, or above
    ``max_payload_bytes``, its save is refused (:class:`PayloadTooLarge`); see
    :mod:`kue_core.base.payloads`. By default ``$KUE_MAX_DATA_BYTES``, ``$KUE_PAYLOAD_STORE``
    and ``$KUE_MAX_PAYLOAD_BYTES``, else no limit.
    ``runtime``: ``"loop"``, the one worker runtime (every slot a task on one event loop, see
    :mod:`kue_core.worker.loop`); ``"thread"`` was removed. By default ``$KUE_RUNTIME``, else
    ``"loop"``.
    """

    def __init__(
        self,
        redis_url: str | None = None,
        prefix: str | None = None,
        *,
        data_dir: str | os.PathLike[str] | None = None,
        client: redis.Redis | None = None,
        lease_ms: int = defaults.LEASE_MS,
        stall_limit: int = defaults.STALL_LIMIT,
        replicas: int | None = None,
        worker_id: str | None = None,
        version: str | None = None,
        runtime: str | None = None,
        encryption_keys: str | Sequence[str] | None = None,
        max_data_bytes: int | None = None,
        payload_store: str | PayloadStore | None = None,
        max_payload_bytes: int | None = None,
    ) -> None:
        prefix = connection.queue_prefix(prefix)
        if encryption_keys is None:
            encryption_keys = os.environ.get(defaults.ENCRYPTION_KEYS_ENV)
        #: The keys its payloads are sealed with, or None (see kue_core.base.sealing).
        self.keyring = sealing.keyring(encryption_keys)
        #: Its payload limits and store, or None (see kue_core.base.payloads).
        self.offload = payloads.offload(prefix, max_data_bytes, payload_store, max_payload_bytes)
        self._set_up_workers(worker_id, version, lease_ms, stall_limit, runtime)
        self._tasks = {}  # the typed tasks defined on it, by type (see clients/queue_tasks.py)
        url = redis_url or os.environ.get(defaults.REDIS_URL_ENV)
        # Only a client made from a URL is ours to close: the embedded one is shared by every
        # queue of this process, and a client passed in belongs to the caller.
        self._owns_client = client is None and bool(url)
        if client is not None:
            self.client = client
        elif url:
            self.client = connection.from_url(url, route=prefix)
        else:
            self.client = connection.embedded(data_dir)
        self.prefix = prefix
        self.keys = Keys(prefix)
        if replicas is None:
            replicas = connection.url_options(url).get("replicas", 0) if url and not client else 0
        else:
            checks.integer(replicas, "replicas", 0)
        self.scripts = Transport(self.client, self.keys, replicas)
        self.events = EventBus(self.client, self.keys.events)
        self.control = Control(self.client, self.keys, self.scripts)

    def __repr__(self) -> str:
        return f"<Queue prefix={self.prefix!r}>"

    def close(self) -> None:
        """Shut the workers down, stop listening for events, release the connections."""
        self.shutdown()
        self.events.close()
        if self._owns_client:
            self.client.connection_pool.disconnect()

    def __enter__(self) -> Queue:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- producing --------------------------------------------------------------------------
    def create_job(self, job_type: str, data: Any = None) -> Job:
        """A new, unsaved job; set options on it, then ``save()``."""
        return Job(self, job_type, data)

    def save_many(self, jobs: Iterable[Job]) -> list[Job]:
        """Save new jobs in one round trip (chunks of ``defaults.SAVE_CHUNK`` per script call).

        Every job is validated first: one invalid job raises and none is saved.
        """
        return self.scripts.drive(ops.save_many(self, jobs))

    def flow(self, parent: Job, children: Iterable[Node] = ()) -> Job:
        """Save ``parent`` and ``children`` (new jobs of any types; an item is a job or a
        ``(job, [its children])`` pair) in one call, all or nothing: each parent is blocked
        until its children complete. Returns the saved parent; every job given has its id."""
        self.scripts.drive(ops.flow(self, parent, children))
        return parent

    # -- reading ----------------------------------------------------------------------------
    def get_job(self, job_id: int | str) -> Job:
        """Load one job; raises ``JobNotFound`` when there is none with this id."""
        return self.scripts.drive(ops.get_job(self, job_id))

    def get_jobs(self, ids: Sequence[int]) -> list[Job]:
        """Load several jobs in one round trip; ids without a job are left out."""
        return self.scripts.drive(ops.get_jobs(self, ids))

    def _loaded(self, job_id: int, h: dict[str, str], runs: dict[str, str] | None) -> Job:
        return Job.from_hash(self, job_id, h, runs)

    def remove(self, job_id: int | str, *, cascade: bool = False) -> list[int]:
        """Delete a job, its log and its history; returns the ids removed. A job that others
        are blocked waiting for is refused (``HasDependents``, naming them) unless ``cascade``,
        which removes them too, and theirs in turn."""
        return self.scripts.drive(ops.remove(self, job_id, cascade))

    def get_log(self, job_id: int | str) -> list[str]:
        """The job's log lines as its handlers wrote them (empty for an unknown job, as Kue)."""
        return self.scripts.drive(journal.get_log(self.keys, job_id, self.keyring))

    def get_log_lines(self, job_id: int | str) -> list[LogLine]:
        """The job's log lines, each with its ``text``, when it was written (``at``, ms) and
        its ``attempt`` (1 for the first; None for a line written outside one, or by Kue)."""
        return self.scripts.drive(journal.get_log_lines(self.keys, job_id, self.keyring))

    def range(
        self, start: int, stop: int, order: str = "asc", *, limit: int | None = None
    ) -> list[Job]:
        """Jobs of every state, by Kue's rules (see :meth:`range_by_state`)."""
        return self._range(self.keys.jobs, start, stop, order, limit)

    def range_by_state(
        self, state: str, start: int, stop: int, order: str = "asc", *, limit: int | None = None
    ) -> list[Job]:
        """Kue's range: the window ``start..stop`` (inclusive, by rank; negative counts from
        the end) of the state's set in score order, then sorted by id; ``desc`` reverses it.
        With ``limit``, a window of more jobs than that raises ``InvalidJob``."""
        return self._range(self._state_key(state), start, stop, order, limit)

    def range_by_type(
        self,
        job_type: str,
        state: str,
        start: int,
        stop: int,
        order: str = "asc",
        *,
        limit: int | None = None,
    ) -> list[Job]:
        """Like :meth:`range_by_state`, for one job type."""
        key = self._state_key(state, job_type)
        due = job_type if state == "delayed" else None  # by due time, as range_by_state
        return self.scripts.drive(ops.kue_range(self, key, start, stop, order, limit, due))

    def _range(self, key: str, start: int, stop: int, order: str, limit: int | None) -> list[Job]:
        return self.scripts.drive(ops.kue_range(self, key, start, stop, order, limit))

    def page(
        self,
        state: str,
        job_type: str | None = None,
        *,
        offset: int = 0,
        count: int = 25,
        desc: bool = False,
        by: str = "queue",
    ) -> list[Job]:
        """``count`` jobs of a state (optionally of one type) from rank ``offset``, in the
        order of the state's set (workers take waiting jobs by priority, then first in, first
        out; delayed ones are by due time), or the reverse with ``desc``: one ZRANGE and one
        pipelined read, however many jobs the state holds. ``by="finished"`` orders complete
        and failed jobs by when they finished, oldest first (newest with ``desc``)."""
        op = ops.page(self, state, job_type, offset, count, desc, by)
        return self.scripts.drive(op)

    def ids(self, state: str, job_type: str | None = None) -> list[int]:
        """Every job id in a state (optionally of one type), in score order."""
        return self.scripts.drive(ops.ids(self, state, job_type))

    def _state_key(self, state: str, job_type: str | None = None) -> str:
        """The set of a state's jobs, of every type or of one (both checked)."""
        return ops.state_key(self.keys, state, job_type)

    def count(self, state: str, job_type: str | None = None) -> int:
        """Number of jobs in a state, for all types or one."""
        return self.scripts.drive(ops.count(self.keys, state, job_type))

    def counts(self, job_type: str | None = None) -> dict[str, int]:
        """``{state: count}`` for every state, for all types or one (one round trip)."""
        return self.scripts.drive(ops.counts(self, job_type))

    def set_only(self, job_id: int | str, workers: Iterable[str] | None) -> Job:
        """Change which workers may run a saved job (None: any worker); see
        :func:`kue_core.jobs.record_ops.set_only`. Returns the job as it is now."""
        return self.scripts.drive(record_ops.set_only(self, job_id, workers))

    def pinned_waits(self, count: int = 500) -> dict[str, list[int]]:
        """Worker id -> ids of the pinned jobs waiting for it (see :mod:`kue_core.features.pins`),
        among the first ``count`` pinned jobs, best priority first."""
        return self.scripts.drive(pins.waits(self.keys, count))

    def counts_by_type(self) -> dict[str, dict[str, int]]:
        """``{type: {state: count}}`` for every job type."""
        return self.scripts.drive(stats.counts_by_type(self.keys))

    def types(self) -> list[str]:
        """Every job type ever saved, sorted."""
        return self.scripts.drive(ops.types(self))

    def work_time(self) -> int:
        """Total milliseconds spent on completed jobs."""
        return self.scripts.drive(ops.work_time(self))

    def ping(self) -> bool:
        """Whether Redis answers."""
        try:
            return bool(self.client.ping())
        except (redis.RedisError, OSError):
            return False

    def event_stream(self, timeout: float = defaults.SUBSCRIBE_TIMEOUT) -> EventStream:
        """A subscription of its own to the queue's events, read one message at a time (for
        a server that forwards them); subscribed when this returns. Close it when done."""
        return EventStream(self.client, self.keys.events, timeout)

    # -- bulk actions -----------------------------------------------------------------------
    def retry_all(self, job_type: str | None = None) -> int:
        """Send every failed job (of one type, or all) back to inactive with its attempts
        anew; returns how many."""
        return self.scripts.drive(ops.bulk(self.keys, "failed", "inactive", job_type))

    def promote_all(self, job_type: str | None = None) -> int:
        """Make every delayed job (of one type, or all) inactive now; returns how many."""
        return self.scripts.drive(ops.bulk(self.keys, "delayed", "inactive", job_type))

    def remove_all(self, state: str, job_type: str | None = None) -> int:
        """Delete every job in ``state`` (not active; of one type, or all); returns how many."""
        return self.scripts.drive(ops.bulk(self.keys, state, "remove", job_type))

    # -- statistics -------------------------------------------------------------------------
    def throughput(self, minutes: int = 60) -> list[dict[str, int]]:
        """Jobs that completed and that failed for good, per minute, for the last ``minutes``
        minutes (this one included), oldest first: ``{"at": ms, "complete": n, "failed": n}``."""
        return self.scripts.drive(stats.throughput(self.keys, minutes))

    def totals(self) -> dict[str, Any]:
        """Counters since the start: ``{"complete": {type: n}, "failed": {type: n},
        "durations": [(upper bound ms or None for the rest, n), ...]}`` (completed jobs by
        duration, each bucket counted alone, not cumulatively)."""
        return self.scripts.drive(stats.totals(self.keys))

    def timings(self, job_type: str | None = None, day: date | str | None = None) -> dict[str, Any]:
        """How long jobs waited (from their last change while waiting to their start) and ran
        (start to the attempt's end), per type, on a UTC day (default today on the Redis
        server's clock; kept ``defaults.TIMINGS_DAYS`` days): ``{"count", "mean_ms",
        "stddev_ms", "buckets": [[le ms or None, n], ...]}`` for each. With a type:
        ``{"type", "day", "wait", "run"}``; else ``{"day", "types": {type: {"wait", "run"}}}``."""
        return self.scripts.drive(stats.timings(self.keys, job_type, day))

    # -- feeds (see kue_core.features.feeds) -------------------------------------------------------
    def feed(self, job_type: str, event: str) -> str:
        """Start feeding ``event`` (``complete`` or ``failed``) of ``job_type``'s jobs to a
        list; returns its key. Starting a feed that runs changes nothing."""
        self.scripts.call(feed_ops.switch(self.keys, job_type, event, True))
        return self.keys.feed(event, job_type)

    def unfeed(self, job_type: str, event: str) -> None:
        """Stop the feed and delete what its list holds (a reader's own lists stay)."""
        self.scripts.call(feed_ops.switch(self.keys, job_type, event, False))

    def feeds(self) -> dict[str, list[str]]:
        """Every type with a feed: type -> its events."""
        return self.scripts.drive(feed_ops.feeds(self.keys))

    # -- job control (see kue_core.features.control) -----------------------------------------------
    def cancel(self, job_id: int | str, reason: str = "") -> Job:
        """End a job in any state but complete: it fails at once with the error
        ``cancelled: <reason>`` and is not retried; a running one is stopped in its worker
        process. ``InvalidTransition`` for a complete job. Returns the job as it is now."""
        return self.scripts.drive(ops.cancel(self, job_id, reason))

    def retry(self, job_id: int | str) -> Job:
        """Run a failed or complete job again: it waits now (or, pinned, for its own workers),
        with its attempts anew. Any other state is refused (``InvalidTransition``) and the job
        is left as it is. Returns the job as it is now."""
        return self.scripts.drive(ops.requeue(self, job_id, RETRYABLE))

    def promote(self, job_id: int | str) -> Job:
        """Make a delayed job wait now instead of at its due time; any other state is refused
        (``InvalidTransition``). Returns the job as it is now."""
        return self.scripts.drive(ops.requeue(self, job_id, PROMOTABLE))

    def move(self, job_id: int | str, to_type: str, *, force: bool = False) -> Job:
        """Put a job under another type, keeping its id, data, priority and state (a waiting
        job waits in the new type's queue). A running job is refused (``InvalidTransition``)
        unless ``force``: then its attempt is stopped as by :meth:`cancel` and it waits,
        inactive, under the new type. Returns the job as it is now."""
        return self.scripts.drive(ops.move(self, job_id, to_type, force))

    def update_data(self, job_id: int | str, data: Any) -> Job:
        """Replace the data of a waiting (inactive, delayed) or failed job; an active or
        complete one is refused (``InvalidTransition``). Returns the job as it is now."""
        return self.scripts.drive(ops.update_data(self, job_id, data))

    def stop_worker(self, worker_id: str, timeout: float = defaults.SHUTDOWN_TIMEOUT) -> None:
        """Ask a live worker process (an id from :meth:`workers`) to shut down gracefully, as
        SIGTERM does: it claims nothing more, its running handlers get ``timeout`` seconds,
        and the jobs still running then go back to the queue. ``WorkerNotFound`` for an id of
        no live worker. Returns once asked; the process goes from :meth:`workers` as it ends."""
        self.control.stop_worker(worker_id, timeout)

    def pause(self, job_type: str, *, local: bool = False) -> bool:
        """Stop every worker (of any process) from claiming jobs of ``job_type``: running jobs
        finish, new jobs wait. With ``local``, only this process's workers (Kue's
        ``ctx.pause``). False when the type was paused already (there)."""
        validate_type(job_type)
        if _flag(local, "local"):
            return self._worker_side().pause_here(job_type)
        return self.scripts.call(calls.pause(self.keys, job_type))

    def resume(self, job_type: str, *, local: bool = False) -> bool:
        """Let workers claim jobs of a paused type again (with ``local``: undo a local pause).
        False when it was not paused (there)."""
        validate_type(job_type)
        if _flag(local, "local"):
            return self._worker_side().resume_here(job_type)
        return self.scripts.call(calls.resume(self.keys, job_type))

    def paused(self) -> list[str]:
        """The paused job types, sorted."""
        return self.scripts.drive(ops.paused(self))

    def workers(self) -> list[dict[str, Any]]:
        """The live worker processes (of any host) on this queue: id, host, pid, types and
        their concurrency, types paused in that process only, handler threads left running
        past their attempt, the ids of the jobs each runs (as of now: the active jobs'
        ``workerId``, which claims and reports change), its last heartbeat (ms)."""
        return self.control.workers()

    # -- events -----------------------------------------------------------------------------
    def on(self, name: str, fn: Receiver) -> Queue:
        """Listen to ``"job <event>"`` (``fn(job_id, *args)``) or ``"error"`` (``fn(exc)``)."""
        self.events.on(name, fn)
        return self

    def off(self, name: str, fn: Receiver) -> Queue:
        self.events.off(name, fn)
        return self


if TYPE_CHECKING:  # the worker side gives its workers the queue itself (as their Owner)
    _owner: type[Owner] = Queue
