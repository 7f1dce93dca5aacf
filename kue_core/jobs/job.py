"""A job of the blocking client: :class:`~kue_core.jobs.spec.JobSpec`'s options and fields, with
its reads and writes through the ``Queue`` that made it."""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Protocol, cast

from .. import defaults
from ..base.errors import InvalidJob
from ..base.keys import Keys
from ..base.payloads import Offload
from ..base.sealing import Keyring
from ..base.states import JobState
from ..base.values import now_ms, parse_priority, parse_state, to_json, validate_type
from ..base.values import utf8 as _utf8
from ..features import steps
from ..features.streams import Part
from ..store import calls
from ..store.calls import Call
from ..store.events import EventBus, EventStream, Receiver
from ..store.transport import Transport
from . import log_lines, ops, record_ops, waiting
from .notes import Notes
from .spec import JobSpec

#: A step without a recorded result.
_NONE = object()
#: Held while a def handler's step finds or makes the lock of its name (Job.step).
_STEPPING = threading.Lock()

__all__ = ["Job", "parse_priority", "parse_state", "to_json", "validate_type"]


class Host(Protocol):
    """What a ``Job`` uses of its ``Queue``."""

    keys: Keys
    scripts: Transport
    events: EventBus
    keyring: Keyring | None
    offload: Offload | None

    def _loaded(self, job_id: int, h: dict[str, str], runs: dict[str, str] | None) -> Job: ...
    def get_job(self, job_id: int | str) -> Job: ...
    def event_stream(self) -> EventStream: ...
    def stream_parts(
        self, job_id: int | str, *, after: str | None = None, timeout: float | None = None
    ) -> Iterator[Part]: ...
    def remove(self, job_id: int | str, *, cascade: bool = False) -> list[int]: ...
    def cancel(self, job_id: int | str, reason: str = "") -> Job: ...
    def retry(self, job_id: int | str) -> Job: ...
    def promote(self, job_id: int | str) -> Job: ...
    def move(self, job_id: int | str, to_type: str, *, force: bool = False) -> Job: ...
    def update_data(self, job_id: int | str, data: Any) -> Job: ...
    def set_only(self, job_id: int | str, workers: Iterable[str] | None) -> Job: ...
    def history(self, job_id: int | str) -> list[dict[str, Any]]: ...
    def runs(self, job_id: int | str) -> list[dict[str, Any]]: ...
    def dependencies(self, job_id: int | str) -> list[dict[str, Any]]: ...
    def dependents(self, job_id: int | str) -> list[dict[str, Any]]: ...
    def children_results(self, job_id: int | str) -> dict[int, Any]: ...


class Job(JobSpec):
    """One job. Create with ``queue.create_job(type, data)``; chain options; ``save()``.

    Option methods are setters when given a value (and return the job, for chaining) and
    getters when called without one, as in Kue: ``job.priority("high")``, ``job.priority()``.
    """

    queue: Host
    # Listeners added before the job has an id.
    _listeners: list[tuple[str, Receiver]] | None = None
    # Set while an ``async def`` handler runs it on a worker's event loop: where its progress
    # reports and log lines go there (see kue_core.jobs.notes).
    _notes: Notes | None = None

    def save(self) -> Job:
        """Store the job (or, once saved, its changes); returns it with ``id`` set. With a
        unique key that a job holds, see :meth:`unique`: ``deduplicated`` tells."""
        if self.id is not None:
            return self.update()
        plain = ops.plain_save(self.queue, self)
        if plain is not None:
            self._saved(self.queue.scripts.call(plain)[0])
        else:
            self.queue.scripts.drive(ops.save(self.queue, self))
        return self

    def update(self) -> Job:
        """Write changed data and options of a saved job; its state is kept."""
        self.queue.scripts.drive(ops.update(self.queue, self))
        return self

    def remove(self, *, cascade: bool = False) -> list[int]:
        """Delete the job, its log and its history; see ``Queue.remove`` for ``cascade``."""
        return self.queue.remove(self._saved_id(), cascade=cascade)

    def cancel(self, reason: str = "") -> Job:
        """Fail the job at once, wherever it is, with the error ``cancelled: <reason>`` and no
        retry; a running one is stopped in its worker process (see ``Queue.cancel``)."""
        self._reload(self.queue.cancel(self._saved_id(), reason))
        return self

    def retry(self) -> Job:
        """Run a failed or complete job again, with its attempts anew (see ``Queue.retry``)."""
        self._reload(self.queue.retry(self._saved_id()))
        return self

    def promote(self) -> Job:
        """Make a delayed job wait now (see ``Queue.promote``)."""
        self._reload(self.queue.promote(self._saved_id()))
        return self

    def move(self, to_type: str, *, force: bool = False) -> Job:
        """Put the job under another type, keeping its id, data, priority and state; a running
        job only with ``force``, which stops its attempt (see ``Queue.move``)."""
        self._reload(self.queue.move(self._saved_id(), to_type, force=force))
        return self

    def update_data(self, data: Any) -> Job:
        """Replace the data of a waiting or failed job (see ``Queue.update_data``)."""
        self._reload(self.queue.update_data(self._saved_id(), data))
        return self

    def set_state(self, state: JobState | str) -> Job:
        """Move the job to another state (``active`` is a worker's to give)."""
        self.queue.scripts.drive(ops.set_state(self.queue, self, state))
        return self

    def set_priority(self, level: str | int) -> Job:
        """Change the priority of a saved job and re-order it in its lists."""
        self.queue.scripts.drive(ops.set_priority(self.queue, self, level))
        return self

    def log(self, fmt: Any, *args: Any) -> Job:
        """Append a line to the job's log: ``job.log("sent %s to %s", n, to)``. In an ``async
        def`` handler on the worker's event loop it does not wait for Redis (see
        :meth:`alog`)."""
        self._write(self._log_call(fmt, args))
        return self

    async def alog(self, fmt: Any, *args: Any) -> Job:
        """:meth:`log`, awaited, for an ``async def`` handler: it returns once Redis has the
        line and raises what writing it raised (``JobNotFound`` once the job is removed, a
        lost connection). On the worker's event loop it goes in turn with the job's other
        lines and reports; elsewhere the call runs in a thread (``asyncio.to_thread``)."""
        await self._awaited(self._log_call(fmt, args))
        return self

    async def aprogress(self, done: float, total: float, data: Any = None) -> Job:
        """:meth:`progress` (``done`` of ``total``, ``data`` to listeners too), awaited, for an
        ``async def`` handler: it returns once Redis has the report, and raises what writing
        it raised, as :meth:`alog` does."""
        percent, data_json = self._progress_args(done, total, data)
        await self._awaited(calls.progress(self.queue.keys, self._saved_id(), percent, data_json))
        self._progressed(percent, data)
        return self

    def stream(self, part: Any) -> Job:
        """Append ``part`` (any JSON value: a token of text, a row) to the job's stream of
        partial output, which readers follow while the job runs (:meth:`stream_iter`; see
        kue_core.features.streams). In the handler running the job only; in an ``async def``
        handler on the worker's event loop it does not wait for Redis (see :meth:`astream`):
        the parts written while the loop's last write of parts is away go as one call."""
        text = self._stream_text(part)
        notes = self._notes
        if notes is not None and notes.here():
            notes.send_part(self._stream_call, text)
        else:
            self._write(self._stream_call([text]))
        return self

    async def astream(self, part: Any) -> Job:
        """:meth:`stream`, awaited: it returns once Redis has the part, and raises what
        writing it raised (``Stopped`` once the attempt is over), as :meth:`alog` does."""
        await self._awaited(self._stream_call([self._stream_text(part)]))
        return self

    def stream_iter(self, after: str | None = None, timeout: float | None = None) -> Iterator[Part]:
        """The parts of the job's stream, as they come, after entry ``after`` (None: from
        the first), until the job has ended and every part is read (see
        :meth:`kue_core.Queue.stream_parts`)."""
        return self.queue.stream_parts(self._saved_id(), after=after, timeout=timeout)

    def _stream_text(self, part: Any) -> str:
        """A part as stored (checked, sealed with the queue's keys; the attempt running)."""
        self._check_running()
        if self._attempt is None:
            raise InvalidJob("a job's stream is written by the handler running it")
        if self._fan_out is not None:
            raise InvalidJob("a fan-out job's runs do not stream (each run is its own)")
        text = to_json(part, "stream part")
        most = defaults.STREAM_PART_BYTES
        if len(text) > most // 4 and len(text.encode()) > most:
            raise InvalidJob(f"a stream part is at most {most:,} bytes of JSON")
        ring = self.queue.keyring
        return text if ring is None else ring.seal(text, "stream")

    def _stream_call(self, texts: list[str]) -> Call[str]:
        """The script call that appends parts (as :meth:`_stream_text` gives them)."""
        token = self._attempt.token if self._attempt is not None else ""
        job_id, entries, most = self._saved_id(), defaults.STREAM_ENTRIES, defaults.STREAM_BYTES
        return calls.stream(self.queue.keys, job_id, token, texts, entries, most)

    def step(self, name: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Run ``fn(*args, **kwargs)`` once for this job: the first attempt that gets here
        runs it and records its result (JSON) with the job before returning it; a later
        attempt (a retry, after a signal, after its worker died) gets the recorded result and
        ``fn`` is not run again (see kue_core.features.steps). In the handler running the
        job only; an ``async def`` handler awaits :meth:`astep`. ``Stopped`` when the
        attempt is over before the record is written."""
        found = self._recorded_step(name)
        if found is not _NONE:
            return found
        if self._notes is not None and self._notes.here():
            raise InvalidJob("an async def handler records a step with await job.astep(...)")
        with _STEPPING:  # one lock a step's name: two threads of the handler run fn once
            stepping = self._stepping = self._stepping or {}
            lock = stepping.setdefault(name, threading.Lock())
        with cast(threading.Lock, lock):
            found = self._recorded_step(name)  # recorded by another thread meanwhile
            if found is not _NONE:
                return found
            call, text = self._step_call(name, fn(*args, **kwargs))
            if self._notes is None:
                self.queue.scripts.call(call)
            else:
                self._notes.wait_from_thread(call)
            return self._remember(name, text)

    async def astep(self, name: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """:meth:`step` for an ``async def`` handler: ``fn`` may be a coroutine function (it
        is awaited) or a plain one."""
        found = self._recorded_step(name)
        if found is not _NONE:
            return found
        stepping = self._stepping = self._stepping or {}
        running = stepping.get(name)
        if running is not None:  # the same step awaited twice at once: fn runs once
            await cast(asyncio.Event, running).wait()
            found = self._recorded_step(name)
            if found is _NONE:
                raise InvalidJob(f"step {name!r} failed in a concurrent call of it")
            return found
        stepping[name] = done = asyncio.Event()
        try:
            result = fn(*args, **kwargs)
            if inspect.isawaitable(result):
                result = await result
            call, text = self._step_call(name, result)
            await self._awaited(call)
            return self._remember(name, text)
        finally:
            del stepping[name]
            done.set()

    def _recorded_step(self, name: str) -> Any:
        """A step's recorded result, or ``_NONE`` when it has none yet (checked)."""
        steps.check_name(name)
        self._check_running()
        if self._attempt is None:
            raise InvalidJob("a job's steps are run by the handler running it")
        if self._fan_out is not None:
            raise InvalidJob("a fan-out job's runs do not record steps (each run is its own)")
        text = (self._steps or {}).get(name)
        return _NONE if text is None else steps.recorded(text)

    def _step_call(self, name: str, result: Any) -> tuple[Call[bool], str]:
        """The call recording a step's result, and the result's JSON."""
        sealed, text = steps.stored(name, result, self.queue.keyring)
        token = self._attempt.token if self._attempt is not None else ""
        attempt = self.attempts_made + 1
        call = calls.step(self.queue.keys, self._saved_id(), token, name, sealed, attempt)
        return call, text

    def _remember(self, name: str, text: str) -> Any:
        """Once a step is recorded (``text``, its JSON): a second call of its name in this
        attempt returns it. The value the step returns, read back from that JSON."""
        if self._steps is None:
            self._steps = {}
        self._steps[name] = text
        return steps.recorded(text)

    def _log_call(self, fmt: Any, args: tuple[Any, ...]) -> Call[int]:
        """The script call that appends a log line (checked, and the attempt still running)."""
        self._check_running()
        if not isinstance(fmt, str):
            line = to_json(fmt, "log")
        elif args:
            try:
                line = fmt % args
            except (TypeError, ValueError):
                line = " ".join([fmt, *map(str, args)])
        else:
            line = fmt
        _utf8(line, "log")
        ring = self.queue.keyring
        if ring is not None:
            line = ring.seal(line, "log")
        # Stamped with its time and attempt (attempts_made counts the earlier ones), in the
        # line itself: Kue's log is a list of strings (see kue_core.jobs.log_lines).
        attempt = self.attempts_made + 1 if self.state == "active" else None
        stamped = log_lines.stamp(line, now_ms(), attempt)
        return calls.log(self.queue.keys, self._saved_id(), stamped)

    def _write(self, call: Call[Any]) -> None:
        """Run a progress or log call: on a worker's event loop (see kue_core.jobs.notes),
        handed to it without waiting when called on it (a blocking call would hold the loop
        up), waited for from a ``def`` handler's thread; else at once."""
        notes = self._notes
        if notes is None:
            self.queue.scripts.call(call)
        elif notes.here():
            notes.send(call)
        else:
            notes.wait_from_thread(call)

    async def _awaited(self, call: Call[Any]) -> None:
        notes = self._notes
        if notes is not None and notes.here():
            await notes.wait(call)
        else:
            await asyncio.to_thread(self.queue.scripts.call, call)

    def history(self) -> list[dict[str, Any]]:
        """The job's recent transitions, oldest first."""
        return self.queue.history(self._saved_id())

    def refresh(self) -> Job:
        """Read the job again: its state, progress, result... as they are now."""
        self._reload(self.queue.get_job(self._saved_id()))
        return self

    def wait(self, timeout: float | None = None) -> Any:
        """Wait until the job ends: its result once it completes; raises ``JobFailed`` (with
        its error) once it fails for good, ``JobNotFound`` if it is removed, ``WaitTimeout``
        after ``timeout`` seconds (None: no bound)."""
        return waiting.wait(self.queue, self._saved_id(), timeout)

    def _saved(self, job_id: int) -> None:
        super()._saved(job_id)
        if self._listeners:
            for event, fn in self._listeners:
                self.queue.events.on_job(job_id, event, fn)
            self._listeners = None

    def on(self, event: str, fn: Receiver) -> Job:
        """Call ``fn(*args)`` when this job emits ``event`` (``"complete"``, ``"progress"``...)."""
        self.queue.events.job_signal(event)  # validates the name now
        if self.id is None:
            if self._listeners is None:
                self._listeners = []
            self._listeners.append((event, fn))
        else:
            self.queue.events.on_job(self.id, event, fn)
        return self

    def _report(self, percent: int, data_json: str) -> None:
        self._write(calls.progress(self.queue.keys, self._saved_id(), percent, data_json))

    def _retag(self, what: str, tags: list[str] | None = None) -> Any:
        return self.queue.scripts.drive(
            record_ops.retag(self.queue.keys, self._saved_id(), what, tags or ())
        )

    def _read_runs(self) -> list[dict[str, Any]]:
        return self.queue.runs(self._saved_id())

    def runs(self) -> list[dict[str, Any]]:
        """The runs of a saved fan-out job, ordered by start: each ``{"worker", "state",
        "started_at", "ended_at", "result", "error", "tries"}`` (keys absent when unset)."""
        self._runs = self._read_runs()
        return list(self._runs)

    def set_only(self, workers: Iterable[str] | None) -> Job:
        """Change which workers may run this saved job (None: any worker); see
        ``Queue.set_only``. Returns the job, reloaded."""
        self._reload(self.queue.set_only(self._saved_id(), workers))
        return self

    def dependencies(self) -> list[dict[str, Any]]:
        """The jobs it depends on: ``{"id", "state", "done"}`` each, by id (state None for a
        job removed since)."""
        return self.queue.dependencies(self._saved_id())

    def dependents(self) -> list[dict[str, Any]]:
        """The jobs that depend on it: ``{"id", "state"}`` each, by id."""
        return self.queue.dependents(self._saved_id())

    def children_results(self) -> dict[int, Any]:
        """``{id: result}`` of the jobs it depends on that have completed (in a flow: its
        children), kept even once they are removed."""
        return self.queue.children_results(self._saved_id())
