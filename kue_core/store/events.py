"""Kue's events as blinker signals, fed from the ``<prefix>:events`` pub/sub channel.

Every event goes through Redis, also the ones this process caused, so a listener hears the
same thing whichever process (or Node Kue worker) made the change. A listener thread is
started by the first ``on()``; receivers run in that thread.

* job level: ``job.on("complete", fn)`` calls ``fn(result)``;
* queue level: ``queue.on("job complete", fn)`` calls ``fn(job_id, result)``, as Kue;
* ``queue.on("error", fn)`` hears Redis troubles of the listener and of workers
  (``fn(exception)``).
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import redis
from blinker import NamedSignal, Namespace

from .. import defaults
from ..base.errors import InvalidJob
from ..base.retry import Pauses

log = logging.getLogger(__name__)

#: Kue's job events, in the order of a job's life, and how many arguments each gives its
#: receivers (after the job id, for queue-level ones): ``enqueue(type)``, ``start(type)``,
#: ``promotion()``, ``progress(percent, data)``, ``failed attempt(message, attempts made)``,
#: ``failed(message)``, ``complete(result)``, ``remove(type)``, ``error(message)``; and ours:
#: ``cancelled(reason)`` (before its ``failed``), ``moved(old type)``, ``edited()``,
#: ``deduplicated(unique key)`` (a save that found the job holding its key), ``unblocked()``
#: (the last job it depended on completed), ``pinned(workers or None)`` (``set_only``),
#: ``suspended(signal)`` (its handler waits for a signal), ``resumed(signal)`` (its wait
#: ended: the signal came or its timeout passed); a
#: fan-out job's (see kue_core.features.runs) ``run start(worker)``, ``run complete(worker)``, ``run
#: failed(worker, message)``, ``run lost(worker)`` (its lease ran out or its worker gave it
#: back; runs stopped because the job ended or was moved are told by that job's own event).
ARITY = {
    "enqueue": 1,
    "start": 1,
    "promotion": 0,
    "progress": 2,
    "failed attempt": 2,
    "failed": 1,
    "complete": 1,
    "remove": 1,
    "error": 1,
    "cancelled": 1,
    "moved": 1,
    "edited": 0,
    "deduplicated": 1,
    "unblocked": 0,
    "pinned": 1,
    "suspended": 1,
    "resumed": 1,
    "run start": 1,
    "run complete": 1,
    "run failed": 2,
    "run lost": 1,
}
EVENTS = tuple(ARITY)
#: After these a job has no more events to give: its job-level receivers are dropped.
FINAL_EVENTS = frozenset({"complete", "failed", "remove"})

Receiver = Callable[..., Any]

#: Seconds the listener waits for a message before checking whether it should stop.
POLL = 0.2


@dataclass(frozen=True)
class Event:
    """One event as a listener hears it: the job's ``id``, the event's ``name``
    (``"complete"``...), its ``args`` (as many as :data:`ARITY` says), and the job's ``type``
    (None in an event of Node Kue, which does not send it)."""

    id: int
    name: str
    args: tuple[Any, ...]
    type: str | None = None


def parse_event(message: str | bytes) -> Event | None:
    """One pub/sub message as an :class:`Event`; None for a malformed one (logged) and for an
    event of a newer or foreign version (not ours to interpret)."""
    try:
        msg = json.loads(message)
        event = msg["event"]
        job_id = int(msg["id"])
        args = tuple(msg.get("args", [event])[1:])
        job_type = msg.get("type")
    except (ValueError, KeyError, TypeError, IndexError):
        log.warning("ignoring a malformed event message: %.200r", message)
        return None
    if event not in EVENTS:
        return None
    # Node Kue's workers publish a fixed number of arguments, the unused ones as null
    # (``complete`` is ``["complete", result, null]``): receivers get the event's own.
    arity = ARITY[event]
    if len(args) != arity:
        args = (args + (None,) * arity)[:arity]
    return Event(job_id, event, args, job_type if isinstance(job_type, str) else None)


def wanted_events(names: Iterable[str]) -> frozenset[str] | None:
    """The job events named (checked), or None for every one when none is."""
    wanted = frozenset(names)
    unknown = sorted(n for n in wanted if n not in EVENTS)
    if unknown:
        raise InvalidJob(f"unknown event {unknown[0]!r}; events are: {', '.join(EVENTS)}")
    return wanted or None


def _guarded(fn: Receiver, *args: Any) -> None:
    """Call one receiver; its exception is logged and does not reach the others."""
    try:
        fn(*args)
    except Exception:
        log.exception("event receiver %r raised", fn)


class EventBus:
    """Signals of one queue and the thread that feeds them from Redis pub/sub."""

    def __init__(self, client: redis.Redis, channel: str) -> None:
        self._client = client
        self._channel = channel
        self._job_signals = Namespace()
        self._queue_signals = Namespace()
        self._wrappers: dict[tuple[str, Receiver], Receiver] = {}
        self._per_job: dict[int, list[tuple[str, Receiver]]] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._listening = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def listening(self) -> bool:
        """True while the subscription to the events channel is in place."""
        return self._listening.is_set()

    # -- signals --------------------------------------------------------------------------
    def job_signal(self, event: str) -> NamedSignal:
        """The signal of a job-level event; the sender is the job id."""
        if event not in EVENTS:
            raise InvalidJob(f"unknown event {event!r}; events are: {', '.join(EVENTS)}")
        return self._job_signals.signal(event)

    def queue_signal(self, name: str) -> NamedSignal:
        """The signal of a queue-level event: ``"job <event>"`` or ``"error"``."""
        if name != "error" and not (name.startswith("job ") and name[4:] in EVENTS):
            known = ", ".join(f"job {e}" for e in EVENTS)
            raise InvalidJob(f"unknown queue event {name!r}; events are: {known}, error")
        return self._queue_signals.signal(name)

    def on(self, name: str, fn: Receiver) -> None:
        """Call ``fn(job_id, *args)`` for ``"job <event>"``, ``fn(exception)`` for ``"error"``."""
        signal = self.queue_signal(name)

        def receiver(sender: Any, args: tuple[Any, ...] = ()) -> None:
            _guarded(fn, *args) if name == "error" else _guarded(fn, sender, *args)

        with self._lock:
            self._wrappers[(name, fn)] = receiver
        signal.connect(receiver, weak=False)
        self.start()

    def off(self, name: str, fn: Receiver) -> None:
        with self._lock:
            receiver = self._wrappers.pop((name, fn), None)
        if receiver is not None:
            self.queue_signal(name).disconnect(receiver)

    def on_job(self, job_id: int, event: str, fn: Receiver) -> None:
        """Call ``fn(*args)`` when job ``job_id`` emits ``event``."""
        signal = self.job_signal(event)

        def receiver(sender: Any, args: tuple[Any, ...] = ()) -> None:
            _guarded(fn, *args)

        with self._lock:
            self._per_job.setdefault(job_id, []).append((event, receiver))
        signal.connect(receiver, sender=job_id, weak=False)
        self.start()

    # -- dispatch -------------------------------------------------------------------------
    def dispatch(self, message: str) -> None:
        """Turn one pub/sub message into signals; a bad message is logged and skipped."""
        parsed = parse_event(message)
        if parsed is None:
            return
        job_id, event, args = parsed.id, parsed.name, parsed.args
        self._send(self._job_signals.signal(event), job_id, args)
        self._send(self._queue_signals.signal("job " + event), job_id, args)
        if event in FINAL_EVENTS:
            with self._lock:
                receivers = self._per_job.pop(job_id, [])
            for name, receiver in receivers:
                self._job_signals.signal(name).disconnect(receiver, sender=job_id)

    def _send(self, signal: NamedSignal, sender: Any, args: tuple[Any, ...]) -> None:
        if signal.receivers:
            signal.send(sender, args=args)

    def report(self, error: Exception) -> None:
        """Send ``error`` to the queue's ``error`` receivers (listener and worker troubles)."""
        self._send(self._queue_signals.signal("error"), None, (error,))

    # -- listener thread ------------------------------------------------------------------
    def start(self) -> None:
        """Start listening (once); returns when the subscription is in place."""
        with self._lock:
            if self._thread is not None:
                return
            self._stop.clear()
            self._thread = threading.Thread(target=self._listen, name="kue-events", daemon=True)
            self._thread.start()
        self._listening.wait(defaults.SUBSCRIBE_TIMEOUT)

    def _listen(self) -> None:
        pauses = Pauses()
        while not self._stop.is_set():
            pubsub = self._client.pubsub()  # type: ignore[no-untyped-call]
            try:
                pubsub.subscribe(self._channel)
                # The first reply confirms the subscription: from here no event is missed.
                while pubsub.get_message(timeout=POLL) is None:
                    if self._stop.is_set():
                        return
                self._listening.set()
                pauses.reset()
                while not self._stop.is_set():
                    msg = pubsub.get_message(timeout=POLL)
                    if msg is not None and msg["type"] == "message":
                        self.dispatch(msg["data"])
            except redis.RedisError as e:
                self._listening.clear()
                self.report(e)
                self._stop.wait(pauses.next())
            finally:
                self._listening.clear()
                pubsub.close()

    def close(self) -> None:
        """Stop the listener thread."""
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=5)


class EventStream:
    """One subscription to the event channel, on a connection of its own, read one message at
    a time: what a server forwarding events to a client (Server-Sent Events) needs. Raises
    ``redis.RedisError`` when Redis cannot be reached, at the start or later."""

    def __init__(self, client: redis.Redis, channel: str, timeout: float) -> None:
        self._pubsub = client.pubsub()  # type: ignore[no-untyped-call]
        try:
            self._pubsub.subscribe(channel)
            # The first reply confirms the subscription: from here no event is missed.
            if self._pubsub.get_message(timeout=timeout) is None:
                raise redis.ConnectionError(f"no confirmation of the subscription to {channel}")
        except BaseException:
            self.close()
            raise

    def get(self, timeout: float) -> dict[str, Any] | None:
        """The next event (``{"id", "event", "args", "type"}``), or None when none came
        within ``timeout`` seconds or the message was not an event."""
        msg = self._pubsub.get_message(timeout=timeout)
        if msg is None or msg["type"] != "message":
            return None
        try:
            event = json.loads(msg["data"])
        except ValueError:
            return None
        return event if isinstance(event, dict) else None

    def next_event(self, timeout: float) -> Event | None:
        """The next event, or None when none came within ``timeout`` seconds or the message
        was not one."""
        msg = self._pubsub.get_message(timeout=timeout)
        if msg is None or msg["type"] != "message":
            return None
        return parse_event(msg["data"])

    def close(self) -> None:
        self._pubsub.close()
