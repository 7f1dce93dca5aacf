"""How a job's payload fields are written and read back: sealed under its queue's keys
(:mod:`kue_core.base.sealing`), and kept in the payload store when larger than the queue keeps
in Redis (:mod:`kue_core.base.payloads`). A plain job's field costs a prefix comparison to
read and two attribute reads to write."""

from __future__ import annotations

from contextvars import ContextVar
from typing import Any, Protocol

from ..base import payloads, sealing
from ..base.errors import CannotDecrypt, InvalidJob, PayloadUnavailable
from ..base.values import json_field, to_json


class JobSpec(Protocol):
    """What these read and set of a job (``kue_core.jobs.spec.JobSpec``'s)."""

    data: Any
    queue: object
    unopened: CannotDecrypt | PayloadUnavailable | None
    _offloads: bool
    _to_store: tuple[str, bytes] | None
    _stored_data: str | None
    result: Any
    progress_data: Any
    error: str | None


_SEALED = sealing.PREFIX
_STORED = payloads.PREFIX
#: How every envelope and every reference to the payload store begins.
MARKED = '{"kue:'

#: While an asyncio client's operation runs (``kue_core.clients.aio_reads``): the reads from a
#: slow payload store (S3) its jobs need, made once the operation is done, in a thread, so
#: that none blocks the event loop. None (elsewhere): a job's fields are read at once.
DEFERRED: ContextVar[list[tuple[JobSpec, str, str]] | None] = ContextVar(
    "kue_deferred_reads", default=None
)


def data_text(job: JobSpec) -> str:
    """The job's data as its save writes it: its JSON, sealed when the queue has keys, and a
    reference when it goes to the payload store (then ``job._to_store`` holds the value, which
    the save writes once every job of it is checked: ``JobSpec._store_data``)."""
    text = to_json(job.data, "data")
    if text.startswith(MARKED):
        check_unmarked(job.data)
    ring = getattr(job.queue, "keyring", None)  # (sealing.of, inlined: every save)
    if ring is not None:
        text = ring.seal(text, "data")
    offload = getattr(job.queue, "offload", None)
    if offload is not None:
        if not job._offloads:
            offload.check(text, "data", "a schedule's data stays in Redis")
            return text
        text, job._to_store = offload.planned(text, "data")
        job._stored_data = job._to_store[0] if job._to_store is not None else None
    return text


def check_unmarked(data: Any) -> None:
    """Refuse as a job's data an encrypted envelope or a reference to the payload store (read
    without the key or the store, and given back): stored as it is, it would be read as the
    value it stands for, another job's, and held by neither."""
    if sealing.envelope_key(data) is not None:
        raise InvalidJob(
            "the data given is an encrypted envelope (it was read without its key): "
            "save or edit the job where its key is given"
        )
    if isinstance(data, dict) and payloads.STORED in data:
        raise InvalidJob(
            "the data given is a reference to the payload store (it was read without the "
            "store): save or edit the job where the store is given"
        )


def opened(job: JobSpec, stored: str, field: str) -> str:
    """A stored field's text: read from the payload store when it is there, opened when it is
    sealed; what is stored, with ``job.unopened`` saying why, when the queue cannot (it lacks
    the store, or the key; the first such field's reason is kept, but for one the handler
    reads, data, a signal or a step, whose reason takes the place of another's)."""
    if not stored.startswith(MARKED):
        if field == "error" and (at := stored.find(_SEALED)) > 0:
            # A fan-out job's error: "run on <worker> failed: " and its run's sealed error.
            return stored[:at] + opened(job, stored[at:], field)
        return stored
    if stored.startswith(_STORED):
        offload = getattr(job.queue, "offload", None)
        deferred = DEFERRED.get()
        if deferred is not None and offload is not None and offload.slow:
            deferred.append((job, field, stored))  # read by load(), off the loop
            return stored
    try:
        return _open(job.queue, stored, field)
    except (PayloadUnavailable, CannotDecrypt) as e:
        _unopened(job, e)
        return stored


def value_text(queue: object, stored: str, field: str) -> str:
    """A stored value's text outside its job (a dependency's result, as its dependents are
    handed it): read from the payload store, opened; as stored when this process cannot."""
    if not stored.startswith(MARKED):
        return stored
    try:
        return _open(queue, stored, field)
    except (PayloadUnavailable, CannotDecrypt):
        return stored


def _open(queue: object, stored: str, field: str) -> str:
    """A marked value's text: read from the payload store when it is there, opened when it
    is sealed; ``PayloadUnavailable`` or ``CannotDecrypt`` when this process cannot."""
    if stored.startswith(_STORED):
        offload = getattr(queue, "offload", None)
        if offload is None:
            raise PayloadUnavailable(payloads.name_of(stored) or "?", field, missing=True)
        stored = offload.loaded(stored, field)
    if not stored.startswith(_SEALED):
        return stored
    ring = sealing.of(queue)
    if ring is None:
        raise CannotDecrypt(sealing.key_id_of(stored) or "?", field, missing=True)
    return ring.open(stored, field)


def read_by_handler(field: str) -> bool:
    """Whether a field (as named when opened) is what a handler reads: its data, a signal's
    payload or a step's result; a worker does not run a job with one it cannot open."""
    return field == "data" or field.startswith(("signal:", "step:"))


def _unopened(job: JobSpec, e: CannotDecrypt | PayloadUnavailable) -> None:
    if job.unopened is None or (
        read_by_handler(e.field) and not read_by_handler(job.unopened.field)
    ):
        job.unopened = e


def load(job: JobSpec, field: str, stored: str) -> None:
    """A read :data:`DEFERRED` put off: the field's value read from the store, opened, and set
    on the job as ``from_hash`` would have (run in a thread)."""
    token = DEFERRED.set(None)
    try:
        text = opened(job, stored, field)
    finally:
        DEFERRED.reset(token)
    if field == "data":
        job.data = json_field(text, {})
    elif field == "result":
        job.result = json_field(text, None)
    elif field == "progress":
        job.progress_data = json_field(text, None)
    else:
        job.error = text
