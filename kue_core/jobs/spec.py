"""What a job is, on either client: its options, its fields, and the codec of its Redis hash
(Kue's fields, and ours beside them). The reads and writes are each client's: ``Job``
(:mod:`kue_core.jobs.job`) and ``AsyncJob`` (:mod:`kue_core.jobs.aio_job`)."""

from __future__ import annotations

import asyncio
import threading
from typing import Any, Protocol, Self, TypeVar, overload

from .. import defaults, tracing
from ..base import checks, sealing
from ..base.errors import CannotDecrypt, InvalidJob, PayloadUnavailable, Stopped
from ..base.states import JobState
from ..base.values import json_field as _json_field
from ..base.values import now_ms as _now_ms
from ..base.values import num as _num
from ..base.values import to_json, validate_type
from ..features import pins, records, runs, signals, steps
from ..features.flows import DependencyOptions
from ..features.job_records import RecordOptions
from ..store.lua_source import SAVE_WIDTH
from . import stored_fields, unique
from .options import JobOptions

__all__ = ["JobSpec"]


#: The fields of a plain job's hash (see ``from_hash``): a hash with no other is read whole
#: before the others are looked for, which keep their class defaults.
_PLAIN = frozenset(
    {
        "type", "data", "priority", "state", "max_attempts", "attempts", "created_at",
        "promote_at", "updated_at", "started_at", "workerId", "lease", "trail", "waited",
    }
)  # fmt: skip


def _int(text: str | None) -> int | None:
    """A stored number as an int (a time in ms); None when absent or not a number."""
    if text is None:
        return None
    try:
        return int(text)
    except ValueError:
        value = _num(text)
        return int(value) if value is not None else None


class _Running(Protocol):
    """What a job sees of the attempt running it (``kue_core.worker.attempt.Attempt``)."""

    @property
    def over(self) -> bool: ...

    #: The fencing token its claim got.
    token: str


_UNSET: Any = object()
#: A job of any class (``Job``, ``kue_core.aio.AsyncJob``): option setters return their own.
_J = TypeVar("_J", bound="JobSpec")


class JobSpec(
    JobOptions,
    runs.FanOutOptions,
    pins.PinOptions,
    RecordOptions,
    DependencyOptions,
    signals.SignalFields,
):
    """What a job is, on either client: its options (Kue's fluent API), its fields, and the
    codec of its Redis hash. ``Job`` and ``kue_core.aio.AsyncJob`` add the reads and writes.

    Option methods are setters when given a value (and return the job, for chaining) and
    getters when called without one, as in Kue: ``job.priority("high")``, ``job.priority()``.
    """

    # Defaults as class attributes: a new job sets only what differs, which keeps
    # ``create_job(...).save()`` cheap. Loaded jobs override them from the hash.
    id: int | None = None
    type: str = ""
    data: Any = None
    state: str | None = None
    _remove_on_complete = False
    #: True when ``save()`` found a job holding this job's unique key: ``id`` is that job's.
    deduplicated = False
    _progress: int | float = 0
    # Set when loaded from Redis.
    created_at: int | None = None
    promote_at: int | None = None
    updated_at: int | None = None
    started_at: int | None = None
    failed_at: int | None = None
    duration: int | None = None
    worker_id: str | None = None
    error: str | None = None
    attempts_made = 0
    #: The key of the schedule that made the job, and the time (ms) of its tick; else None.
    schedule_key: str | None = None
    tick: int | None = None
    #: What the handler returned, once the job completed; else None.
    result: Any = None
    #: The data given with the last progress report; else None.
    progress_data: Any = None
    # Whether the hash holds them: Kue's JSON has the keys only then (a stored null included).
    _has_result = False
    _has_progress_data = False
    # The trace context its save's producer span gave it (JSON; see kue_core.tracing).
    _trace: str | None = None
    # The attempt running this job in a worker of this process, if any.
    _attempt: _Running | None = None
    #: Why a sealed field of the job as read could not be opened (its key is not among the
    #: queue's, say; see base/sealing.py), or one in the payload store read (the queue has no
    #: store; see base/payloads.py), or None: that field holds what is stored in Redis.
    unopened: CannotDecrypt | PayloadUnavailable | None = None
    # The name its data goes into the payload store under, and the value, written by its
    # save once every job of the save is checked (base/payloads.py); False for a job whose
    # data stays in Redis whatever its size (a schedule's: its jobs share one definition).
    _stored_data: str | None = None
    _to_store: tuple[str, bytes] | None = None
    _offloads = True
    # The steps it recorded (job.step()): name -> result as JSON (opened); None: none.
    _steps: dict[str, str] | None = None
    # The steps running now: name -> set once it is recorded (job.astep()), or held while
    # it runs (job.step(), from any of the handler's threads).
    _stepping: dict[str, asyncio.Event | threading.Lock] | None = None

    #: The queue that made the job (each client's job knows what it is).
    queue: object

    def __init__(self, queue: object, job_type: str, data: Any = None) -> None:
        self.queue = queue
        self.type = validate_type(job_type)
        self.data = {} if data is None else data

    def __repr__(self) -> str:
        return f"<Job {self.id} {self.type!r} {self.state}>"

    @property
    def stopping(self) -> bool:
        """True once the attempt running this job is over (ttl exceeded, lease lost, worker
        shutting down, cancelled): the handler should return; its result will be dropped.
        ``progress()`` and ``log()`` then raise :class:`kue_core.Stopped`."""
        return self._attempt is not None and self._attempt.over

    def _check_running(self) -> None:
        if self.stopping:
            raise Stopped(f"the attempt at job {self.id} is over; its handler should return")

    # -- persistence ------------------------------------------------------------------------
    def _update_fields(self) -> list[Any]:
        """The values ``update.lua`` takes for this job (validated: raises before any write)."""
        return [
            self._data_json(),
            self._priority,
            self._max_attempts,
            self._backoff_json(),
            self._ttl,
            "1" if self._remove_on_complete else "",
            self._delay,
            self._due_at,
            " ".join(self._words()),
            records.stored(self._keep_complete),
            records.stored(self._keep_failed),
        ]

    @property
    def trace_id(self) -> str | None:
        """The id of the trace its save began (see :mod:`kue_core.tracing`), or None."""
        return tracing.trace_id(self._trace)

    def _reload(self, other: JobSpec) -> None:
        """Take the stored fields of ``other``, a fresh load of this job; an option it no
        longer has (``only``, tags...) goes back to its class default."""
        # This object's own, not the job's (``deduplicated``: what its save found).
        keep = ("queue", "_listeners", "_attempt", "deduplicated")
        fresh = vars(other)
        for name in list(vars(self)):
            if name not in fresh and name not in keep and hasattr(type(self), name):
                delattr(self, name)
        for name, value in fresh.items():
            if name not in keep:
                setattr(self, name, value)

    @overload
    def progress(self) -> int | float: ...
    @overload
    def progress(self: _J, done: float, total: float, data: Any = None) -> _J: ...
    def progress(self, done: Any = _UNSET, total: Any = _UNSET, data: Any = None) -> Any:
        """Record ``done`` of ``total`` (as a percentage); ``data`` goes to listeners too."""
        if done is _UNSET:
            return self._progress
        percent, data_json = self._progress_args(done, total, data)
        self._report(percent, data_json)
        self._progressed(percent, data)
        return self

    def _progress_args(self, done: Any, total: Any, data: Any) -> tuple[int, str]:
        """A report's percentage and data (JSON), checked (and the attempt still running)."""
        self._check_running()
        checks.number(done, "progress done", 0)
        if checks.number(total, "progress total") <= 0:
            raise InvalidJob(f"progress total must be above 0, got {total!r}")
        percent = min(100, int(done * 100 / total))
        if data is None:
            return percent, ""
        text = to_json(data, "progress data")
        ring = sealing.of(self.queue)
        return percent, text if ring is None else ring.seal(text, "progress")

    def _progressed(self, percent: int, data: Any) -> None:
        """The job's fields as a report has set them."""
        self._progress = percent
        if data is not None:
            self.progress_data = data
            self._has_progress_data = True

    def _report(self, percent: int, data_json: str) -> None:
        """Write a progress report of this saved job (a worker's client does)."""
        raise InvalidJob("progress is a worker's to report, on its own Job")

    def _saved_id(self) -> int:
        if self.id is None:
            raise InvalidJob("the job is not saved yet")
        return self.id

    def _data_json(self) -> str:
        """The data as stored (see :func:`kue_core.jobs.stored_fields.data_text`)."""
        return stored_fields.data_text(self)

    def _store_data(self) -> None:
        """Write its data to the payload store, when its save row planned so (a save does,
        after every row is made and before the call that saves them)."""
        if self._to_store is not None:
            self.queue.offload.put(self._to_store)  # type: ignore[attr-defined]
            self._to_store = None

    def _backoff_json(self) -> str:
        return "" if self._backoff is None else to_json(self._backoff, "backoff")

    def _save_row(self) -> list[Any]:
        """The values ``save.lua`` takes for this job (validated: raises before any write)."""
        row = [
            self.type,
            self._data_json(),
            self._priority,
            self._delay,
            self._max_attempts,
            self._backoff_json(),
            self._ttl,
            "1" if self._remove_on_complete else "",
            self._due_at,
            self._extras(),
        ]
        assert len(row) == SAVE_WIDTH
        return row

    def _saved(self, job_id: int) -> None:
        """Called by the queue once ``save.lua`` gave the job its id."""
        self.id = job_id
        delayed = self._delay > 0 or self._due_at > _now_ms()  # save.lua decides on its clock
        waiting = JobState.PINNED.value if self._only else JobState.INACTIVE.value
        self.state = JobState.DELAYED.value if delayed else waiting

    # -- (de)serialisation ----------------------------------------------------------------
    @classmethod
    def from_hash(
        cls, queue: object, job_id: int, h: dict[str, str], found_runs: dict[str, str] | None = None
    ) -> Self:
        """A job from its Redis hash (written by this library or by Kue); a fan-out job's runs
        are read unless given (``found_runs``: the hash of its runs)."""
        job = cls.__new__(cls)
        job.queue = queue
        job.type = h.get("type", "")
        job.id = job_id
        data = h.get("data")
        if data is not None and data.startswith(stored_fields.MARKED):
            data = job._opened(data, "data")
        job.data = _json_field(data, {})
        job.state = h.get("state")
        prio = _num(h.get("priority"))
        job._priority = int(prio) if prio is not None else 0
        job._priority_ok = prio is not None
        job._max_attempts = int(_num(h.get("max_attempts")) or defaults.MAX_ATTEMPTS)
        job.attempts_made = int(_num(h.get("attempts")) or 0)
        job.created_at = _int(h.get("created_at"))
        job.promote_at = _int(h.get("promote_at"))
        job.updated_at = _int(h.get("updated_at"))
        job.started_at = _int(h.get("started_at"))
        job.worker_id = h.get("workerId")
        if h.keys() <= _PLAIN:  # the rest keep their class defaults
            return job
        job.failed_at = _int(h.get("failed_at"))
        job.duration = _int(h.get("duration"))
        job._delay = int(_num(h.get("delay")) or 0)
        job._ttl = int(_num(h.get("ttl")) or 0)
        job._remove_on_complete = h.get("removeOnComplete") == "true"
        raw_backoff = h.get("backoff")
        if raw_backoff is not None:
            # Data only: Kue stored functions as source text; those are never run here.
            parsed = _json_field(raw_backoff, None)
            job._backoff = parsed if parsed is True or isinstance(parsed, dict) else None
        job._progress = _num(h.get("progress")) or 0
        error = h.get("error")
        job.error = None if error is None else job._opened(error, "error")
        if "result" in h:
            job.result = _json_field(job._opened(h["result"], "result"), None)
            job._has_result = True
        if "progress_data" in h:
            job.progress_data = _json_field(job._opened(h["progress_data"], "progress"), None)
            job._has_progress_data = True
        if "tags" in h:
            found = _json_field(h["tags"], None)
            job._tags = (
                [t for t in found if isinstance(t, str)] if isinstance(found, list) else None
            )
        if "searchKeys" in h:
            found = _json_field(h["searchKeys"], None)
            job._search_keys = found if isinstance(found, list) else None
        job.tracked = h.get("tracked") == "true"
        kept = records.keep_from_text(h.get("keep_complete"))
        job._keep_complete = kept if isinstance(kept, records.Keep) else None
        job._keep_failed = records.keep_from_text(h.get("keep_failed"))
        job._load_deps(h)
        if "schedule" in h:
            job.schedule_key = h["schedule"]
            tick = _num(h.get("tick"))
            job.tick = int(tick) if tick is not None else None
        job._group = h.get("group")
        job._trace = h.get("trace")
        only = _json_field(h["only"], None) if "only" in h else None
        if isinstance(only, list):
            job._only = [w for w in only if isinstance(w, str)]
        if "prefer" in h:
            job._prefer = pins.workers_of(h["prefer"])
        if "fan_out" in h:  # a plain job reads nothing more
            job._fan_out = runs.from_hash(h)
            job._runs = job._read_runs() if found_runs is None else runs.parse(found_runs)
        if signals.has_signals(h):
            job._signal_state = signals.from_hash(h, job._opened)
        if "steps" in h:
            job._steps = steps.from_hash(h, job._opened)
        key, mode = h.get("unique"), h.get("unique_mode")
        if key is not None and mode in unique.MODES:
            job._unique = unique.Unique(key, mode, 0)
        return job

    def _opened(self, stored: str, field: str) -> str:
        """A stored field's text (see :func:`kue_core.jobs.stored_fields.opened`)."""
        return stored_fields.opened(self, stored, field)

    def _read_runs(self) -> list[dict[str, Any]]:
        """The runs of this loaded fan-out job, read now (when they were not read with it)."""
        raise InvalidJob("the runs of a fan-out job are read with it on this client")

    def to_dict(self) -> dict[str, Any]:
        """Kue's ``GET /job/:id`` shape (Job#toJSON), with numbers as numbers."""
        out: dict[str, Any] = {"id": self.id, "type": self.type, "data": self.data}
        if self._has_result:
            out["result"] = self.result
        out["priority"] = self._priority if self._priority_ok else None
        out["progress"] = self._progress
        if self._has_progress_data:
            out["progress_data"] = self.progress_data
        out["state"] = self.state
        optional = (
            ("error", self.error),
            ("created_at", self.created_at),
            ("promote_at", self.promote_at),
            ("updated_at", self.updated_at),
            ("failed_at", self.failed_at),
            ("started_at", self.started_at),
            ("duration", self.duration),
            ("delay", self._delay or None),
            ("workerId", self.worker_id),
            ("ttl", self._ttl or None),
        )
        out.update((k, v) for k, v in optional if v is not None)
        if self._unique is not None:
            out["unique"] = {"key": self._unique.key, "mode": self._unique.mode}
        if isinstance(self.unopened, CannotDecrypt):
            out["unopened"] = {"key": self.unopened.key_id, "missing": self.unopened.missing}
        elif self.unopened is not None:
            out["unopened"] = {"payload": self.unopened.name, "missing": self.unopened.missing}
        if self._tags:
            out["tags"] = list(self._tags)
        if self._group is not None:
            out["group"] = self._group
        if self._only is not None:
            out["only"] = list(self._only)
        if self._prefer is not None:
            out["prefer"] = list(self._prefer)
        if self._fan_out is not None:
            out["fanOut"] = dict(self._fan_out)
            if self.id is not None:
                out["runs"] = [dict(run) for run in self._runs or ()]  # the caller's to change
        if self.tracked:
            out["tracked"] = True
        for name, policy in (  # Kue's option names, as POST /job takes them
            ("removeOnComplete", self.remove_on_complete()),
            ("removeOnFail", self.remove_on_fail()),
        ):
            if policy:
                out[name] = policy
        out.update(self._deps_dict())
        out.update(signals.as_json(self._signal_state))
        if self._steps:
            out["steps"] = {k: _json_field(v, None) for k, v in self._steps.items()}
        if self.schedule_key is not None:
            out["schedule"] = self.schedule_key
            out["tick"] = self.tick
        made, most = self.attempts_made, self._max_attempts
        remaining = most - made if made > 0 else most
        if self.state == "failed":  # failed for good, as in Kue: a retry gives attempts anew
            remaining = 0  # (NoRetry, a cancel or a failed dependency end one early)
        out["attempts"] = {"made": made, "remaining": remaining, "max": most}
        return out
