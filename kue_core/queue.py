"""The Queue facade: what producers, the dashboard and the API call."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from typing import Any, cast

import redis

from . import connection, defaults
from .errors import InvalidJob, JobNotFound
from .events import EventBus, Receiver
from .job import Job, parse_state, validate_type
from .keys import Keys, job_id_from_zid
from .scripts import Scripts
from .states import STATES


def _job_id(value: object) -> int:
    """A job id given as an int or a string of digits."""
    if isinstance(value, str) and value.isascii() and value.isdigit():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidJob(f"a job id is a positive integer, got {value!r}")
    return value


def _index(value: object, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidJob(f"{name} must be an integer, got {value!r}")
    return value


def _order(order: str) -> bool:
    """True for descending; Kue treats anything but ``desc`` as ascending."""
    if order not in ("asc", "desc"):
        raise InvalidJob(f"order must be asc or desc, got {order!r}")
    return order == "desc"


class Queue:
    """A Kue-compatible job queue on one Redis and one key prefix.

    ``redis_url`` defaults to ``$KUE_REDIS_URL``; without either, an embedded Redis keeps its
    data under ``data_dir`` (default ``./.kue``), shared by every process that uses it.
    """

    def __init__(
        self,
        redis_url: str | None = None,
        prefix: str = defaults.PREFIX,
        *,
        data_dir: str | os.PathLike[str] | None = None,
        client: redis.Redis | None = None,
    ) -> None:
        if not isinstance(prefix, str) or not prefix or any(c.isspace() for c in prefix):
            raise InvalidJob(f"prefix must be a non-empty string without spaces, got {prefix!r}")
        url = redis_url or os.environ.get(defaults.REDIS_URL_ENV)
        # Only a client made from a URL is ours to close: the embedded one is shared by every
        # queue of this process, and a client passed in belongs to the caller.
        self._owns_client = client is None and bool(url)
        if client is not None:
            self.client = client
        elif url:
            self.client = connection.from_url(url)
        else:
            self.client = connection.embedded(data_dir)
        self.prefix = prefix
        self.keys = Keys(prefix)
        self.scripts = Scripts(self.client, self.keys)
        self.events = EventBus(self.client, self.keys.events)

    def __repr__(self) -> str:
        return f"<Queue prefix={self.prefix!r}>"

    def close(self) -> None:
        """Stop listening for events and release this queue's connections."""
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
        batch = list(jobs)
        for job in batch:
            if not isinstance(job, Job) or job.queue is not self:
                raise InvalidJob("save_many takes jobs created by this queue")
            if job.id is not None:
                raise InvalidJob(f"job {job.id} is saved already; use job.update()")
        rows = [job._save_row() for job in batch]
        if not rows:
            return batch
        if len(rows) <= defaults.SAVE_CHUNK:
            ids = self.scripts.save(rows)
        else:
            size = defaults.SAVE_CHUNK
            ids = self.scripts.save_chunks([rows[i : i + size] for i in range(0, len(rows), size)])
        for job, job_id in zip(batch, ids, strict=True):
            job._saved(job_id)
        return batch

    # -- reading ----------------------------------------------------------------------------
    def get_job(self, job_id: int | str) -> Job:
        """Load one job; raises ``JobNotFound`` when there is none with this id."""
        jid = _job_id(job_id)
        h = cast(dict[str, str], self.client.hgetall(self.keys.job(jid)))
        if not h or "type" not in h:
            raise JobNotFound(jid)
        return Job.from_hash(self, jid, h)

    def get_jobs(self, ids: Sequence[int]) -> list[Job]:
        """Load several jobs in one round trip; ids without a job are left out."""
        pipe = self.client.pipeline(transaction=False)
        for jid in ids:
            pipe.hgetall(self.keys.job(jid))
        hashes = cast(list[dict[str, str]], pipe.execute())
        return [
            Job.from_hash(self, jid, h) for jid, h in zip(ids, hashes, strict=True) if "type" in h
        ]

    def get_log(self, job_id: int | str) -> list[str]:
        """The job's log lines (empty for an unknown job, as Kue)."""
        return cast(list[str], self.client.lrange(self.keys.log(_job_id(job_id)), 0, -1))

    def history(self, job_id: int | str) -> list[dict[str, Any]]:
        """The job's recent transitions, oldest first: ``{"state", "at", ...}`` each."""
        entries = cast(list[str], self.client.lrange(self.keys.history(_job_id(job_id)), 0, -1))
        return [json.loads(e) for e in entries]

    def range(self, start: int, stop: int, order: str = "asc") -> list[Job]:
        """Jobs of every state, by Kue's rules (see :meth:`range_by_state`)."""
        return self._range(self.keys.jobs, start, stop, order)

    def range_by_state(self, state: str, start: int, stop: int, order: str = "asc") -> list[Job]:
        """Kue's range: the window ``start..stop`` (inclusive, by rank; negative counts from
        the end) of the state's set in score order, then sorted by id; ``desc`` reverses it."""
        return self._range(self.keys.state(parse_state(state)), start, stop, order)

    def range_by_type(
        self, job_type: str, state: str, start: int, stop: int, order: str = "asc"
    ) -> list[Job]:
        """Like :meth:`range_by_state`, for one job type."""
        key = self.keys.type_state(validate_type(job_type), parse_state(state))
        return self._range(key, start, stop, order)

    def _range(self, key: str, start: int, stop: int, order: str) -> list[Job]:
        desc = _order(order)
        members = self._zrange(key, _index(start, "from"), _index(stop, "to"))
        ids = sorted(job_id_from_zid(m) for m in members)
        jobs = self.get_jobs(ids)
        return jobs[::-1] if desc else jobs

    def ids(self, state: str, job_type: str | None = None) -> list[int]:
        """Every job id in a state (optionally of one type), in score order."""
        key = (
            self.keys.state(parse_state(state))
            if job_type is None
            else self.keys.type_state(validate_type(job_type), parse_state(state))
        )
        return [job_id_from_zid(m) for m in self._zrange(key, 0, -1)]

    def _zrange(self, key: str, start: int, stop: int) -> list[str]:
        return cast(list[str], self.client.zrange(key, start, stop))

    def count(self, state: str, job_type: str | None = None) -> int:
        """Number of jobs in a state, for all types or one."""
        return self.counts(job_type)[parse_state(state)]

    def counts(self, job_type: str | None = None) -> dict[str, int]:
        """``{state: count}`` for every state, for all types or one (one round trip)."""
        if job_type is not None:
            validate_type(job_type)
        pipe = self.client.pipeline(transaction=False)
        for state in STATES:
            if job_type is None:
                pipe.zcard(self.keys.state(state))
            else:
                pipe.zcard(self.keys.type_state(job_type, state))
        return dict(zip(STATES, pipe.execute(), strict=True))

    def types(self) -> list[str]:
        """Every job type ever saved, sorted."""
        return sorted(cast(set[str], self.client.smembers(self.keys.types)))

    def work_time(self) -> int:
        """Total milliseconds spent on completed jobs."""
        value = self.client.get(self.keys.work_time)
        return int(value) if value else 0

    # -- events -----------------------------------------------------------------------------
    def on(self, name: str, fn: Receiver) -> Queue:
        """Listen to ``"job <event>"`` (``fn(job_id, *args)``) or ``"error"`` (``fn(exc)``)."""
        self.events.on(name, fn)
        return self

    def off(self, name: str, fn: Receiver) -> Queue:
        self.events.off(name, fn)
        return self
