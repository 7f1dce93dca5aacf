"""How a job's payload fields are written and read back: sealed under its queue's keys
(:mod:`kue_core.base.sealing`), and kept in the payload store when larger than the queue keeps
in Redis (:mod:`kue_core.base.payloads`). A plain job's field costs a prefix comparison to
read and two attribute reads to write."""

from __future__ import annotations

from typing import Any, Protocol

from ..base import payloads, sealing
from ..base.errors import CannotDecrypt, PayloadUnavailable
from ..base.values import to_json


class JobSpec(Protocol):
    """What these read and set of a job (``kue_core.jobs.spec.JobSpec``'s)."""

    data: Any
    queue: object
    unopened: CannotDecrypt | PayloadUnavailable | None
    _offloads: bool
    _to_store: tuple[str, bytes] | None
    _stored_data: str | None


_SEALED = sealing.PREFIX
_STORED = payloads.PREFIX
#: How every envelope and every reference to the payload store begins.
MARKED = '{"kue:'


def data_text(job: JobSpec) -> str:
    """The job's data as its save writes it: its JSON, sealed when the queue has keys, and a
    reference when it goes to the payload store (then ``job._to_store`` holds the value, which
    the save writes once every job of it is checked: ``JobSpec._store_data``)."""
    text = to_json(job.data, "data")
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


def opened(job: JobSpec, stored: str, field: str) -> str:
    """A stored field's text: read from the payload store when it is there, opened when it is
    sealed; what is stored, with ``job.unopened`` saying why, when the queue cannot (it lacks
    the store, or the key; the first such field's reason is kept, the data's: read first)."""
    if not stored.startswith(MARKED):
        return stored
    if stored.startswith(_STORED):
        offload = getattr(job.queue, "offload", None)
        try:
            if offload is None:
                raise PayloadUnavailable(payloads.name_of(stored) or "?", field, missing=True)
            stored = offload.loaded(stored, field)
        except PayloadUnavailable as e:
            if job.unopened is None:
                job.unopened = e
            return stored
    if not stored.startswith(_SEALED):
        return stored
    ring = sealing.of(job.queue)
    try:
        if ring is None:
            raise CannotDecrypt(sealing.key_id_of(stored) or "?", field, missing=True)
        return ring.open(stored, field)
    except CannotDecrypt as e:
        if job.unopened is None:
            job.unopened = e
        return stored
