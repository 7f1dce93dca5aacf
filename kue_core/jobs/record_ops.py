"""Operations on what is kept beside a job (:mod:`kue_core.jobs.ops`' form: no I/O, run by either
client): its tags and tracking, what it depends on and what depends on it, its runs, and the
workers it is pinned to. ``Queue`` and ``AsyncQueue`` each drive them."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any, TypeVar

from ..base import checks
from ..base.keys import Keys, job_id_from_zid
from ..base.values import json_field
from ..features import records, runs
from ..features.pins import new_workers
from ..features.search import Found
from ..store import calls
from ..store.calls import Op, hash_reply, read
from . import stored_fields
from .ops import Side, get_job, get_jobs
from .spec import JobSpec

#: The job class of one client (``Job``, ``AsyncJob``).
_J = TypeVar("_J", bound=JobSpec)


# -- tags and tracking ----------------------------------------------------------------------
def retag(keys: Keys, job_id: int | str, what: str, tags: Iterable[str] = ()) -> Op[Any]:
    """``tag`` or ``untag`` a saved job (its tags after, a list), or ``track`` or ``untrack``
    it (whether that changed anything); ``JobNotFound`` for no such job."""
    jid = checks.job_id(job_id)
    if what in ("track", "untrack"):
        return bool((yield calls.tag(keys, jid, what)))
    rows = records.tag_rows(records.tags(tags))
    return json.loads((yield calls.tag(keys, jid, what, rows)))


def retagged(side: Side[_J], job_id: int | str, what: str, tags: Iterable[str] = ()) -> Op[_J]:
    """:func:`retag`, then the job as it is now."""
    yield from retag(side.keys, job_id, what, tags)
    return (yield from get_job(side, job_id))


def tagged(keys: Keys, tag: str, offset: int, count: int) -> Op[Found]:
    """Ids of the jobs with ``tag``, most recently tagged first, from rank ``offset``."""
    key = keys.tag(records.tag(tag))
    checks.integer(offset, "offset", 0)
    checks.integer(count, "count", 0, 1000)
    if count == 0:
        (total,) = yield read(("ZCARD", key))
        return Found([], int(total))
    members, total = yield read(("ZREVRANGE", key, offset, offset + count - 1), ("ZCARD", key))
    return Found([job_id_from_zid(m) for m in members], int(total))


def tags(keys: Keys, offset: int, count: int) -> Op[dict[str, int]]:
    """Tags in use and how many jobs have each, most used first, from rank ``offset``."""
    checks.integer(offset, "offset", 0)
    checks.integer(count, "count", 0, 1000)
    if count == 0:
        return {}
    (found,) = yield read(("ZREVRANGE", keys.tags, offset, offset + count - 1, "WITHSCORES"))
    pairs = zip(found[::2], found[1::2], strict=True) if _flat(found) else found
    return {tag: int(float(n)) for tag, n in pairs}


def tag_count(keys: Keys) -> Op[int]:
    """How many distinct tags are in use."""
    (n,) = yield read(("ZCARD", keys.tags))
    return int(n)


def tracked(side: Side[_J]) -> Op[list[_J]]:
    """The tracked jobs, most recently tracked first."""
    (members,) = yield read(("ZREVRANGE", side.keys.tracked, 0, -1))
    return (yield from get_jobs(side, [job_id_from_zid(m) for m in members]))


def _flat(reply: Sequence[Any]) -> bool:
    """Whether a ``WITHSCORES`` reply is flat (RESP2: member, score, ...) rather than pairs."""
    return bool(reply) and not isinstance(reply[0], list | tuple)


# -- dependencies ---------------------------------------------------------------------------
def dependencies(keys: Keys, job_id: int | str) -> Op[list[dict[str, Any]]]:
    """The jobs job ``job_id`` depends on: ``{"id", "state", "done"}`` each, by id (state
    None for a job removed since)."""
    jid = checks.job_id(job_id)
    (found,) = yield read(("ZRANGE", keys.deps(jid), 0, -1, "WITHSCORES"))
    pairs_in = zip(found[::2], found[1::2], strict=True) if _flat(found) else found
    pairs = sorted((int(m), float(score) >= 1) for m, score in pairs_in)
    states = yield from _states(keys, [i for i, _ in pairs])
    return [{"id": i, "state": s, "done": done} for (i, done), s in zip(pairs, states, strict=True)]


def dependents(keys: Keys, job_id: int | str) -> Op[list[dict[str, Any]]]:
    """The jobs that depend on job ``job_id``: ``{"id", "state"}`` each, by id."""
    jid = checks.job_id(job_id)
    (members,) = yield read(("SMEMBERS", keys.dependents(jid)))
    ids = sorted(int(m) for m in members)
    states = yield from _states(keys, ids)
    return [{"id": i, "state": s} for i, s in zip(ids, states, strict=True)]


def children_results(keys: Keys, job_id: int | str) -> Op[dict[int, str]]:
    """``{id: result as stored}`` of the completed jobs that job ``job_id`` depends on (a
    result sealed, or in the payload store, as its job held it: see :func:`results_of`)."""
    jid = checks.job_id(job_id)
    (found,) = yield read(("HGETALL", keys.results(jid)))
    items = hash_reply(found)
    return dict(sorted((int(k), v) for k, v in items.items()))


def results_of(stored: dict[int, str], queue: object) -> dict[int, Any]:
    """The results :func:`children_results` read, each read from the payload store and
    opened with ``queue``'s keys (as stored when this process cannot)."""
    return {
        k: json_field(stored_fields.value_text(queue, v, "result"), None) for k, v in stored.items()
    }


def _states(keys: Keys, ids: Sequence[int]) -> Op[list[str | None]]:
    if not ids:
        return []
    return list((yield read(*(("HGET", keys.job(i), "state") for i in ids))))


# -- runs and pins --------------------------------------------------------------------------
def job_runs(keys: Keys, job_id: int | str) -> Op[list[dict[str, Any]]]:
    """The runs of a saved fan-out job (see :func:`kue_core.features.runs.parse`)."""
    jid = checks.job_id(job_id)
    (found,) = yield read(("HGETALL", keys.runs(jid)))
    return runs.parse(hash_reply(found))


def set_only(side: Side[_J], job_id: int | str, workers: object) -> Op[_J]:
    """Change which workers may run saved job ``job_id`` (``pin.lua``): ``workers`` (see
    :func:`kue_core.features.pins.new_workers`) or None for any worker; the job as it is now. A
    waiting job moves to its new workers' places (or to ``inactive``); a running job whose worker is
    no longer allowed is stopped in that worker's process and waits pinned for the new ones, no
    attempt counted; a running fan-out job's runs on workers no longer allowed stop, and their
    places are offered to the new workers. A fan-out job keeps at least ``k`` workers, and a
    late-joiners job (every worker of its type) a list of them (``InvalidJob``)."""
    jid = checks.job_id(job_id)
    ids = new_workers(workers)
    yield calls.pin(side.keys, jid, "" if ids is None else json.dumps(ids, separators=(",", ":")))
    return (yield from get_job(side, jid))
