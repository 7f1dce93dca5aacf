"""Streams of a running job's partial output (issue 55, first step): ``job.stream(part)`` in a
handler appends a JSON value to the job's Redis stream ``<p>:job:<id>:stream`` (``stream.lua``,
fenced by the attempt's token: a worker whose attempt is over cannot write to the job's
stream again), about ``STREAM_ENTRIES`` entries kept; readers iterate it live and resume
after an entry id (``queue.stream_parts(id, after=...)``, ``job.stream_iter()``), until the job
has ended and every part is read. Each entry holds its attempt (``a``), so that a retry's parts
are told apart from the last attempt's, and the part (``d``), sealed when the queue has keys.
The stream goes with the job (its hash's ``streamed`` field tells ``delete_job`` to delete it).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ..base.sealing import Keyring, opened_text

#: States after which nothing more is streamed.
ENDED = frozenset({"complete", "failed"})


@dataclass(frozen=True)
class Part:
    """One part of a job's stream: its entry id (``<ms>-<seq>``: where a reader resumes after
    it), the attempt that wrote it, and its value."""

    id: str
    attempt: int
    value: Any


@dataclass(frozen=True)
class Reading:
    """One read of a job's stream (``queue.read_stream()``): the parts it found, and the job's
    last state (``complete``, ``failed``, ``removed``) once it has ended and every part is
    read (None while it may stream more)."""

    parts: list[Part]
    ended: str | None


def parts(entries: list[Any], ring: Keyring | None) -> list[Part]:
    """Stream entries (``XRANGE``/``XREAD``'s ``[id, {field: value}]``) as parts."""
    out = []
    for entry_id, fields in entries:
        text = opened_text(ring, str(fields.get("d", "null")), "stream")
        try:
            value = json.loads(text)
        except ValueError:
            value = text  # sealed under a key this process lacks: as stored
        out.append(Part(str(entry_id), int(fields.get("a") or 0), value))
    return out
