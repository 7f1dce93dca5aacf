"""OpenTelemetry traces from enqueue to handler, when enabled (``pip install "kue[otel]"``,
then :func:`enable`).

* ``save()`` (and ``save_many()``, flows, either client) opens a PRODUCER span ``send <type>``
  as a child of the span current at the call, and stores its context in the job: the hash
  field ``trace`` (W3C trace context as the global propagator writes it, JSON), a field of
  our own that Kue's JSON and Node Kue leave alone.
* The worker opens a CONSUMER span ``process <type>`` for each attempt, in that trace (its
  parent is the producer span), current while the handler runs, so the handler's own spans
  join the trace. Its attributes: the job's id, type and attempt, and ``kue.job.outcome``
  (``complete`` or ``failed``, the job's state words, else ``ttl``, ``lease lost``,
  ``released``, ``cancelled`` or ``limited``); a failure is recorded as an exception event
  and an error status.

Spans go to the globally configured tracer provider, as every OpenTelemetry
instrumentation's do. Off (the default), nothing here runs: a save and an attempt check one
module flag.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Protocol

from .base.errors import KueError

if TYPE_CHECKING:
    from opentelemetry.trace import Span


class Sent(Protocol):
    """What a save's span reads of a job (a ``Job`` of either client), and where it leaves the
    trace context the job carries to its worker."""

    type: str
    id: int | None
    _trace: str | None


#: Whether traces are made: set by :func:`enable`, read on every save and attempt.
enabled = False
#: The instrumentation's name, as its tracer and spans carry it.
SCOPE = "kue_core"
SYSTEM = "kue"

# OpenTelemetry's modules, imported by enable(): a process that never traces never loads them.
_tracer: Any = None
trace: Any = None
propagate: Any = None


def enable() -> None:
    """Make traces from now on, in this process (a producer's and a worker's both need it),
    with the global tracer provider (set it before or after: spans follow it)."""
    global enabled, _tracer, trace, propagate
    try:
        from opentelemetry import propagate as otel_propagate
        from opentelemetry import trace as otel_trace
    except ImportError:
        raise KueError('OpenTelemetry is not installed: pip install "kue[otel]"') from None
    trace, propagate = otel_trace, otel_propagate
    _tracer = trace.get_tracer(SCOPE)
    enabled = True


#: A W3C ``traceparent``: version, trace id, parent span id, flags.
_TRACEPARENT = re.compile(r"[0-9a-f]{2}-([0-9a-f]{32})-[0-9a-f]{16}-[0-9a-f]{2}")


def trace_id(stored: str | None) -> str | None:
    """The trace id (32 hex digits) in a job's stored trace context, or None when it has
    none or it cannot be read (OpenTelemetry need not be installed)."""
    if not stored:
        return None
    try:
        carrier = json.loads(stored)
    except ValueError:
        return None
    parent = carrier.get("traceparent") if isinstance(carrier, dict) else None
    found = _TRACEPARENT.fullmatch(parent) if isinstance(parent, str) else None
    if found is None or found.group(1) == "0" * 32:  # all zeros: invalid, says the spec
        return None
    return found.group(1)


def disable() -> None:
    """Make no more traces in this process."""
    global enabled
    enabled = False


@contextmanager
def producing(jobs: Sequence[Sent]) -> Iterator[None]:
    """A PRODUCER span around the save of ``jobs``, whose context each job carries to the
    worker (in ``job._trace``, saved with it)."""
    types = sorted({job.type for job in jobs})
    destination = types[0] if len(types) == 1 else "jobs"
    attributes: dict[str, Any] = {
        "messaging.system": SYSTEM,
        "messaging.operation.type": "send",
        "messaging.operation.name": "send",
        "messaging.destination.name": destination,
    }
    if len(jobs) > 1:
        attributes["messaging.batch.message_count"] = len(jobs)
    span = _tracer.start_span(
        f"send {destination}", kind=trace.SpanKind.PRODUCER, attributes=attributes
    )
    carrier: dict[str, str] = {}
    propagate.inject(carrier, context=trace.set_span_in_context(span))
    text = json.dumps(carrier, separators=(",", ":"))
    for job in jobs:
        job._trace = text
    try:
        yield
        if len(jobs) == 1 and jobs[0].id is not None:
            span.set_attribute("messaging.message.id", str(jobs[0].id))
    except BaseException as e:
        span.record_exception(e)
        span.set_status(trace.StatusCode.ERROR, str(e))
        for job in jobs:  # a save tried again is a send of its own
            if job.id is None:
                job._trace = None
        raise
    finally:
        span.end()


@contextmanager
def consuming(job_id: int, job_type: str, fields: dict[str, str]) -> Iterator[Span]:
    """The CONSUMER span of one attempt at a claimed job (its hash: ``fields``), current
    inside; its parent is the context its producer stored, if any."""
    parent = None
    stored = fields.get("trace")
    if stored:
        try:
            carrier = json.loads(stored)
        except ValueError:
            carrier = None
        if isinstance(carrier, dict):
            parent = propagate.extract(carrier)
    attributes = {
        "messaging.system": SYSTEM,
        "messaging.operation.type": "process",
        "messaging.operation.name": "process",
        "messaging.destination.name": job_type,
        "messaging.message.id": str(job_id),
        "kue.job.attempt": int(fields.get("attempts") or 0) + 1,
    }
    span = _tracer.start_span(
        f"process {job_type}", context=parent, kind=trace.SpanKind.CONSUMER, attributes=attributes
    )
    with trace.use_span(span, end_on_exit=True):
        yield span


def ended(span: Span, reason: str, message: str | None = None, text: str | None = None) -> None:
    """Record how an attempt ended: ``reason`` (``complete``, or one of
    :class:`kue_core.worker.attempt.Reason`, or ``limited``), and a failure's one-line
    ``message`` and kept ``text``."""
    span.set_attribute("kue.job.outcome", reason)
    if message is None:
        return
    kind = message.partition(":")[0] if ":" in message else message
    span.add_event(
        "exception",
        {
            "exception.type": kind,
            "exception.message": message,
            "exception.stacktrace": text or message,
        },
    )
    span.set_status(trace.StatusCode.ERROR, message)
