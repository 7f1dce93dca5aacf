"""Pinning: jobs that only named worker processes may run (``job.only(["gpu-1", "gpu-2"])``).

A worker process has an id (``Queue(worker_id="gpu-1")``, ``kue worker --id gpu-1``; else a
generated one). A job pinned to some of them waits in state ``pinned`` instead of
``inactive``: indexed as Kue's states are (``<p>:jobs:pinned``, ``<p>:jobs:<type>:pinned``),
so that no worker which does not know pinning takes it (Node Kue's workers included), and in
``<p>:places:<type>:<worker>`` of each of its workers, where their claims look. The claim of
a type with pinned jobs compares the best job pinned to this worker with the best job any
worker may take, by priority; at equal priority the pinned one goes first. Other workers never
see it, so a pinned job never holds up the jobs behind it.

Everything else about a pinned job is as for any job: attempts, retries, leases. When its
worker dies, its lease runs out and it waits pinned again, for one of its workers.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

from .. import defaults
from ..base import checks
from ..base.errors import InvalidJob
from ..base.keys import Keys, job_id_from_zid
from ..store.calls import Op, read

#: What a worker id given by hand may be (``Queue(worker_id=...)``, ``kue worker --id``,
#: ``job.only``): letters, digits and ``. _ : @ -``, starting with a letter or a digit
#: (generated ids, ``host:pid:hex``, are of this shape on usual hosts).
WORKER_ID_RULE = "[A-Za-z0-9][A-Za-z0-9._:@-]*"
_WORKER_ID = re.compile(WORKER_ID_RULE)
#: The rule, as error messages state it.
RULE = (
    f"1 to {defaults.MAX_WORKER_ID} characters: letters, digits and . _ : @ -, "
    "starting with a letter or a digit"
)


def check_worker_id(value: object) -> str:
    """``value`` if it is a worker id a process may be given; else ``InvalidJob``."""
    if (
        not isinstance(value, str)
        or len(value) > defaults.MAX_WORKER_ID
        or not _WORKER_ID.fullmatch(value)
    ):
        raise InvalidJob(f"a worker id must be {RULE}; got {value!r:.120}")
    return value


def worker_ids(value: object) -> list[str]:
    """The workers a job is pinned to: a non-empty list (or tuple) of worker ids, at most
    ``defaults.MAX_PINS``, repeats dropped; or ``InvalidJob``."""
    if isinstance(value, str) or not isinstance(value, Iterable):
        raise InvalidJob(f"only takes a list of worker ids, got {value!r:.120}")
    ids = list(dict.fromkeys(check_worker_id(each) for each in value))
    if not ids:
        raise InvalidJob("only takes at least one worker id")
    if len(ids) > defaults.MAX_PINS:
        raise InvalidJob(f"a job may be pinned to at most {defaults.MAX_PINS} workers")
    return ids


def waits(keys: Keys, count: int) -> Op[dict[str, list[int]]]:
    """Worker id -> the ids of the pinned jobs waiting for it, among the first ``count``
    pinned jobs (best priority first): what the dashboard's workers view shows."""
    checks.integer(count, "count", 1)
    (members,) = yield read(("ZRANGE", keys.state("pinned"), 0, count - 1))
    ids = [job_id_from_zid(m) for m in members]
    onlys = yield read(*(("HGET", keys.job(job_id), "only") for job_id in ids))
    out: dict[str, list[int]] = {}
    for job_id, text in zip(ids, onlys, strict=True):
        for w in workers_of(text):
            out.setdefault(w, []).append(job_id)
    return out


def workers_of(text: str | None) -> list[str]:
    """The worker ids of an ``only`` field (none when absent or not a list of strings: kue
    doctor reports those)."""
    try:
        value = json.loads(text) if text else None
    except ValueError:
        return []
    return [w for w in value if isinstance(w, str)] if isinstance(value, list) else []


def new_workers(value: object) -> list[str] | None:
    """The workers ``set_only`` takes: None (any worker), or a list (or tuple) of 1 to
    ``defaults.MAX_PINS`` distinct worker ids; else ``InvalidJob``."""
    if value is None:
        return None
    if isinstance(value, str) or not isinstance(value, Iterable):
        raise InvalidJob(f"set_only takes a list of worker ids or None, got {value!r:.120}")
    ids = [check_worker_id(each) for each in value]
    if not ids:
        raise InvalidJob("set_only takes at least one worker id (None: any worker)")
    if len(ids) > defaults.MAX_PINS:
        raise InvalidJob(f"a job may be pinned to at most {defaults.MAX_PINS} workers")
    if len(set(ids)) != len(ids):
        raise InvalidJob(f"set_only takes distinct worker ids, got {ids!r:.120}")
    return ids


class PinOptions:
    """Part of a job: ``prefer``."""

    id: int | None
    _records: bool
    _only: list[str] | None
    _fan_out: dict[str, Any] | None
    _prefer: list[str] | None = None

    def prefer(self, workers: Any = None) -> Any:
        """Workers that should run the job first (given before the save): any worker may
        run it (it waits ``inactive``, where Node Kue's workers see it too), but each of
        these finds it before a job of equal priority that it does not prefer. Without
        arguments, the preferred workers or None. Not with ``only`` or ``fan_out``."""
        if workers is None:
            return list(self._prefer) if self._prefer is not None else None
        if self.id is not None:
            raise InvalidJob("preferred workers are given before the save")
        self._prefer = worker_ids(workers)
        self._records = True
        return self

    def _prefer_value(self) -> list[str] | None:
        """The records object's preferred workers, checked against ``only`` and
        ``fan_out`` as they are at the save."""
        if self._prefer is None:
            return None
        if self._only is not None:
            raise InvalidJob("a job has preferred workers or workers of its own, not both")
        if self._fan_out is not None:
            raise InvalidJob("a fan-out job has no preferred workers (use only)")
        return self._prefer
