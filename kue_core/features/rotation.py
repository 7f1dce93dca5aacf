"""Key rotation: every job's encrypted values put under the queue's newest key
(``Queue.rotate_keys``, ``kue keys rotate``; docs/security.md).

A step reads ``ROTATE_BATCH`` job ids at a time, in order: each job's sealed fields (data,
result, error, progress data, its signals' payloads and its steps' results), log lines,
history entries and the parts it streamed; what is sealed under another of
the queue's keys is opened and sealed again under the newest, and written back by
``reseal.lua`` only where the value is still what was read (a value written meanwhile is
left: it is written under whatever key its writer had). Where the rotation got to is kept
per key in ``<p>:keys:rotation``, after each step: an interrupted rotation goes on from there,
and a step done twice changes nothing. A value under a key the queue does not have is left
as it is, and counted. Values stored in clear (jobs saved before the queue had keys) stay so.
A value in the payload store (kue_core/base/payloads.py) is read from it and written again
under a new name, sealed under the newest key; the job's field then refers to the new name,
and the old one goes to the store's trash (a new value whose field changed meanwhile goes
there instead).
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass

from ..base import checks
from ..base.errors import CannotDecrypt, InvalidEncryptionKeys, InvalidJob, PayloadUnavailable
from ..base.keys import Keys
from ..base.payloads import PREFIX as STORED
from ..base.payloads import Offload, name_of
from ..base.sealing import PREFIX, Keyring, key_id_of, of
from ..store import calls
from ..store.calls import Call, Op, read

#: The job's sealed hash fields, with the name each is sealed under.
FIELDS = {"data": "data", "result": "result", "error": "error", "progress_data": "progress"}
#: The hash fields that tell a job has more sealed values: signals' payloads and steps'
#: results (fields ``signal:<name>``, ``step:<name>``, each sealed under its field's name),
#: and parts streamed (``<p>:job:<id>:stream``, each entry's ``d`` sealed as ``stream``).
MORE = ("signals", "steps", "streamed")
NAMED = ("signal:", "step:")


@dataclass(frozen=True)
class Rotated:
    """What rotating did: the jobs looked at (``jobs``), the values put under the newest key
    (``resealed``), those under a key the queue lacks (``unopened``, left as they are), the
    last job id done (``at``) and the last there is (``last``); ``done`` once ``at`` is it."""

    key: str
    jobs: int
    resealed: int
    unopened: int
    at: int
    last: int

    @property
    def done(self) -> bool:
        return self.at >= self.last


def ring_of(queue: object, steps: int | None, batch: int, from_start: bool) -> Keyring:
    """The keyring a rotation of ``queue`` puts values under, its arguments checked."""
    if steps is not None:
        checks.integer(steps, "steps", 1)
    checks.integer(batch, "batch", 1, 10_000)
    if not isinstance(from_start, bool):
        raise InvalidJob(f"from_start must be true or false, got {from_start!r}")
    ring = of(queue)
    if ring is None:
        raise InvalidEncryptionKeys(
            "the queue has no encryption keys: there is no key to rotate to"
        )
    return ring


def rotate(
    keys: Keys,
    ring: Keyring,
    steps: int | None,
    batch: int,
    from_start: bool,
    offload: Offload | None = None,
) -> Op[Rotated]:
    """Rotate up to ``steps`` steps of ``batch`` jobs (all of them: None), from where the
    last rotation to this key stopped, or from the first job."""
    last_text, at_text = yield read(("GET", keys.ids), ("HGET", keys.rotation, ring.newest))
    last = int(last_text or 0)
    at = 0 if from_start else int(at_text or 0)
    jobs = resealed = unopened = 0
    step = 0
    while at < last and (steps is None or step < steps):
        ids = list(range(at + 1, min(at + batch, last) + 1))
        replies = yield read(
            *[("HMGET", keys.job(i), *FIELDS, *MORE) for i in ids],
            *[("LRANGE", keys.log(i), 0, -1) for i in ids],
            *[("LRANGE", keys.history(i), 0, -1) for i in ids],
        )
        n = len(ids)
        named, parts = yield from _more(keys, ids, [r[len(FIELDS) :] for r in replies[:n]])
        writes: list[Call[int]] = []
        for k, job_id in enumerate(ids):
            fields, lines, entries = replies[k][: len(FIELDS)], replies[n + k], replies[2 * n + k]
            if all(v is None for v in replies[k]) and not lines:
                continue  # no such job (removed)
            jobs += 1
            change = _Change(ring, offload)
            held = [*zip(FIELDS.items(), fields, strict=True), *named.get(job_id, ())]
            new_fields = [(f, v, w) for (f, as_), v in held if v and (w := change.value(v, as_))]
            new_lines = [(i, v, w) for i, v in enumerate(lines) if (w := change.line(v))]
            new_entries = [(i, v, w) for i, v in enumerate(entries) if (w := change.entry(v))]
            new_parts = [
                (e, v, w) for e, v in parts.get(job_id, ()) if (w := change.value(v, "stream"))
            ]
            unopened += change.unopened
            if new_fields or new_lines or new_entries or new_parts:
                writes.append(
                    calls.reseal(keys, job_id, new_fields, new_lines, new_entries, new_parts)
                )
        if writes:
            done = yield writes
            resealed += sum(done)
        at = ids[-1]
        yield read(("HSET", keys.rotation, ring.newest, at))
        step += 1
    return Rotated(ring.newest, jobs, resealed, unopened, at, last)


def _more(
    keys: Keys, ids: list[int], more: list[list[str | None]]
) -> Op[tuple[dict[int, list[tuple[tuple[str, str], str]]], dict[int, list[tuple[str, str]]]]]:
    """The signals' payloads and steps' results (``((field, sealed as), value)``) and the
    streamed parts (``(entry id, value)``) of the jobs that have any (``more``: each job's
    fields of :data:`MORE`): read only for those."""
    named_ids = [i for i, (sig, st, _) in zip(ids, more, strict=True) if sig or st]
    stream_ids = [i for i, (_, _, streamed) in zip(ids, more, strict=True) if streamed]
    if not named_ids and not stream_ids:
        return {}, {}
    replies = yield read(
        *[("HKEYS", keys.job(i)) for i in named_ids],
        *[("XRANGE", keys.stream(i), "-", "+") for i in stream_ids],
    )
    hkeys = replies[: len(named_ids)]
    found = [
        (i, [f for f in r if f.startswith(NAMED)]) for i, r in zip(named_ids, hkeys, strict=True)
    ]
    found = [(i, fields) for i, fields in found if fields]
    values = (yield read(*[("HMGET", keys.job(i), *f) for i, f in found])) if found else []
    named = {
        i: [((f, f), v) for f, v in zip(fields, vals, strict=True)]
        for (i, fields), vals in zip(found, values, strict=True)
    }
    parts = {
        i: [(e, kv.get("d") or "") for e, kv in entries]
        for i, entries in zip(stream_ids, replies[len(named_ids) :], strict=True)
    }
    return named, parts


class _Change:
    """One job's values under the newest key: each method gives the new value, or None when
    the value needs no change (in clear, under the newest key) or cannot (a key it lacks)."""

    def __init__(self, ring: Keyring, offload: Offload | None = None) -> None:
        self._ring = ring
        self._offload = offload
        self.unopened = 0

    def value(self, stored: str, name: str) -> str | None:
        if stored.startswith(STORED):
            return self._stored(stored, name)
        kid = key_id_of(stored)
        if kid is None or kid == self._ring.newest:
            return None
        try:
            return self._ring.seal(self._ring.open(stored, name), name)
        except CannotDecrypt:
            self.unopened += 1
            return None

    def _stored(self, stored: str, name: str) -> str | None:
        """A value in the payload store: the reference to a copy under the newest key (or the
        value itself, when it now fits in Redis), written to the store before it is returned."""
        try:
            if self._offload is None:
                raise PayloadUnavailable(name_of(stored) or "?", name, missing=True)
            new = self.value(self._offload.loaded(stored, name), name)
        except PayloadUnavailable:
            self.unopened += 1
            return None
        if new is None:
            return None
        held, planned = self._offload.planned(new, name)
        if planned is not None:
            self._offload.put(planned)
        return held

    def line(self, stored: str) -> str | None:
        """A log line: its stamp (time, attempt) in clear, then its text sealed."""
        at = stored.find(PREFIX)
        if at < 0:
            return None
        new = self.value(stored[at:], "log")
        return None if new is None else stored[:at] + new

    def entry(self, stored: str) -> str | None:
        """A history entry (JSON): its error, when sealed."""
        if PREFIX[:-1].replace('"', '\\"') not in stored:  # the envelope, JSON-escaped
            return None
        with contextlib.suppress(ValueError):
            entry = json.loads(stored)
            error = entry.get("error") if isinstance(entry, dict) else None
            if isinstance(error, str) and (new := self.value(error, "error")) is not None:
                entry["error"] = new
                return json.dumps(entry, separators=(",", ":"))
        return None
