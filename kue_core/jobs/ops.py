"""What a producer or a reader does, written once for both clients: each operation is a
generator that checks its input, yields the steps it needs (script calls, plain commands:
see :mod:`kue_core.store.calls`), is sent their replies, and returns its result. The blocking
``Queue`` runs it with ``Transport.drive``, ``kue_core.aio.AsyncQueue`` with ``await
AsyncTransport.drive`` (:mod:`kue_core.store.transport`, :mod:`kue_core.store.aio_transport`):
the same rules, keys, arguments and errors, whichever client runs it.

An operation takes the client (``side``) for its keys and its job class only; it does no
I/O of its own.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Protocol, TypeVar

from .. import defaults, tracing
from ..base import checks, sealing
from ..base.errors import InvalidJob, InvalidTransition, JobNotFound, KueError
from ..base.keys import Keys, job_id_from_zid
from ..base.states import STATES
from ..base.values import parse_priority, parse_state, to_json, validate_type
from ..features import records
from ..features.control import reason_text
from ..store import calls
from ..store.calls import Call, Op, read
from ..store.lua_source import SAVE_WIDTH
from . import due, stored_fields
from .flow_ops import Node, flow_rows, flow_saved
from .spec import JobSpec

#: The job class of one client (``Job``, ``AsyncJob``).
_J = TypeVar("_J", bound=JobSpec)
_J_co = TypeVar("_J_co", bound=JobSpec, covariant=True)
_R = TypeVar("_R")


class Side(Protocol[_J_co]):
    """What an operation needs of the client running it."""

    @property
    def keys(self) -> Keys: ...

    def _loaded(self, job_id: int, h: dict[str, str], runs: dict[str, str] | None) -> _J_co:
        """A job of this client's job class from its hash (and its runs, for a fan-out job)."""
        ...


# -- saving ---------------------------------------------------------------------------------
def plain_save(side: Side[JobSpec], job: JobSpec) -> Call[list[int]] | None:
    """The one script call that saves ``job`` when it is a plain job (no dependencies, no
    unique key, no trace to make), else None: then :func:`save` it. A client runs it at once,
    skipping the operation's machinery, which a plain save would otherwise pay for."""
    if job._depends is None and job._unique is None and not tracing.enabled:
        row = job._save_row()
        job._store_data()
        return calls.save(side.keys, [row])
    return None


def save(side: Side[JobSpec], job: JobSpec) -> Op[None]:
    """Save a new job: with dependencies as a flow, with a unique key unless a job holds it,
    else plainly; traced, when traces are on (see :mod:`kue_core.tracing`)."""
    if tracing.enabled and job._trace is None:
        with tracing.producing([job]):
            yield from _save(side, job)
        return
    yield from _save(side, job)


def _save(side: Side[JobSpec], job: JobSpec) -> Op[None]:
    if job._depends is not None:
        yield from flow(side, job, [])
        return
    if job._unique is not None:
        row = job._save_row()
        job._store_data()
        call = calls.save_unique(side.keys, row, *job._unique)
        job_id, outcome, state = yield from _refusable(side.keys, [job], call)
        job._saved(job_id)
        job.deduplicated = outcome != "saved"
        if state:
            job.state = state
        return
    row = job._save_row()
    job._store_data()
    ids = yield from _refusable(side.keys, [job], calls.save(side.keys, [row]))
    job._saved(ids[0])


def flow(side: Side[JobSpec], parent: JobSpec, children: Iterable[Node]) -> Op[list[JobSpec]]:
    """Save ``parent`` and its tree of ``children`` in one call (see ``Queue.flow``)."""
    nodes, rows = flow_rows(side, parent, children)
    jobs = [job for job, _ in nodes]
    if not tracing.enabled or parent._trace is not None:
        for job in jobs:
            job._store_data()
        saved = yield from _refusable(side.keys, jobs, calls.flow(side.keys, rows))
        return flow_saved(nodes, saved)
    with tracing.producing([job for job, _ in nodes]):
        # Each row again, now that its job carries the trace context.
        pairs = zip(nodes, rows, strict=True)
        rows = [[*job._save_row(), *row[SAVE_WIDTH:]] for (job, _), row in pairs]
        for job in jobs:
            job._store_data()
        saved = yield from _refusable(side.keys, jobs, calls.flow(side.keys, rows))
        return flow_saved(nodes, saved)


def save_many(side: Side[_J], jobs: Iterable[_J]) -> Op[list[_J]]:
    """Save new jobs in one round trip (see ``Queue.save_many``); traced as one send, when
    traces are on."""
    batch = list(jobs)
    if tracing.enabled and batch:
        with tracing.producing(batch):
            return (yield from _save_many(side, batch))
    return (yield from _save_many(side, batch))


def _save_many(side: Side[_J], batch: list[_J]) -> Op[list[_J]]:
    for job in batch:
        if getattr(job, "queue", None) is not side or not hasattr(job, "_save_row"):
            raise InvalidJob("save_many takes jobs created by this queue")
        if job.id is not None:
            raise InvalidJob(f"job {job.id} is saved already; use job.update()")
    rows = [job._save_row() for job in batch]  # every job is checked before any is saved
    for job in batch:
        job._store_data()
    plain: list[tuple[_J, list[Any]]] = []
    for each, row in [*zip(batch, rows, strict=True), (None, [])]:
        if each is not None and each._unique is None and each._depends is None:
            plain.append((each, row))
            continue
        # A job with a unique key or dependencies is one call of its own (it may find its
        # key held); the plain jobs before it go in one call per chunk, in order.
        if plain:
            size = defaults.SAVE_CHUNK
            chunks = [plain[i : i + size] for i in range(0, len(plain), size)]
            if len(chunks) == 1:
                ids = yield calls.save(side.keys, [r for _, r in plain])
            else:
                saved = yield [calls.save(side.keys, [r for _, r in c]) for c in chunks]
                ids = [i for chunk in saved for i in chunk]
            for (job, _), job_id in zip(plain, ids, strict=True):
                job._saved(job_id)
            plain = []
        if each is not None:
            yield from _save(side, each)
    return batch


def set_state(side: Side[JobSpec], job: JobSpec, state: str) -> Op[None]:
    """Move a saved job to another state (``active`` is a worker's to give)."""
    target = parse_state(state)
    if target == "active":
        raise InvalidTransition("only a worker can make a job active")
    yield calls.set_state(side.keys, job._saved_id(), target)
    job.state = target


def set_priority(side: Side[JobSpec], job: JobSpec, level: str | int) -> Op[None]:
    """Change the priority of a saved job and re-order it in its lists."""
    value = parse_priority(level)
    yield calls.set_priority(side.keys, job._saved_id(), value)
    job._priority = value


def update(side: Side[JobSpec], job: JobSpec) -> Op[None]:
    """Write the changed data and options of a saved job; its state is kept."""
    job_id = job._saved_id()
    fields = job._update_fields()
    job._store_data()  # (update.lua puts the value it replaces in the trash)
    job.state = yield from _refusable(side.keys, [job], calls.update(side.keys, job_id, fields))


# -- reading --------------------------------------------------------------------------------
def get_jobs(side: Side[_J], ids: Sequence[int]) -> Op[list[_J]]:
    """Several jobs in one round trip (two, when some fan out); ids without a job are left
    out."""
    if not ids:
        return []
    hashes = yield read(*(("HGETALL", side.keys.job(jid)) for jid in ids))
    found = [(jid, h) for jid, h in zip(ids, hashes, strict=True) if "type" in h]
    fanned = [jid for jid, h in found if "fan_out" in h]
    runs: dict[int, dict[str, str]] = {}
    if fanned:  # a plain job reads nothing more
        replies = yield read(*(("HGETALL", side.keys.runs(jid)) for jid in fanned))
        runs = dict(zip(fanned, replies, strict=True))
    return [side._loaded(jid, h, runs.get(jid)) for jid, h in found]


def get_job(side: Side[_J], job_id: int | str) -> Op[_J]:
    """One job; ``JobNotFound`` when there is none with this id."""
    jid = checks.job_id(job_id)
    jobs = yield from get_jobs(side, [jid])
    if not jobs:
        raise JobNotFound(jid)
    return jobs[0]


def state_key(keys: Keys, state: str, job_type: str | None = None) -> str:
    """The set of a state's jobs, of every type or of one (both checked)."""
    state = parse_state(state)
    if job_type is None:
        return keys.state(state)
    return keys.type_state(validate_type(job_type), state)


def count(keys: Keys, state: str, job_type: str | None) -> Op[int]:
    """Number of jobs in a state, for all types or one."""
    (n,) = yield read(("ZCARD", state_key(keys, state, job_type)))
    return int(n)


def bulk(keys: Keys, state: str, action: str, job_type: str | None) -> Op[int]:
    """``action`` (a state to move to, or ``remove``) on every job of ``state`` (of one type,
    or all), in batches until the set is empty or until as many jobs were handled as it held
    at the start (jobs keep arriving: the call must end); how many were handled
    (``Queue.retry_all``, ``promote_all``, ``remove_all``)."""
    key, state = state_key(keys, state, job_type), parse_state(state)
    total, budget = 0, None
    while True:
        handled, left = yield calls.bulk(keys, key, state, action, defaults.BULK_BATCH)
        total += int(handled)
        if budget is None:
            budget = handled + left
        if left == 0 or total >= budget:
            return total


def _index(value: object, name: str) -> int:
    return checks.integer(value, name, -(2**63), 2**63 - 1)


def _order(order: str) -> bool:
    """True for descending; Kue treats anything but ``desc`` as ascending."""
    if order not in ("asc", "desc"):
        raise InvalidJob(f"order must be asc or desc, got {order!r}")
    return order == "desc"


def kue_range(
    side: Side[_J],
    key: str,
    start: int,
    stop: int,
    order: str,
    limit: int | None,
    due_type: str | None = None,
) -> Op[list[_J]]:
    """Kue's range of the set ``key`` (see ``Queue.range_by_state``); ``due_type`` when
    ``key`` is that type's delayed set, whose window is taken by due time (see
    :mod:`kue_core.jobs.due`)."""
    desc = _order(order)
    start, stop = _index(start, "from"), _index(stop, "to")
    if due_type is not None:
        members = yield from due.window(side.keys, due_type, start, stop, False)
    else:
        (members,) = yield read(("ZRANGE", key, start, stop))
    if limit is not None and len(members) > limit:
        raise InvalidJob(
            f"the range {start}..{stop} holds {len(members)} jobs; ask for at most {limit}"
        )
    jobs = yield from get_jobs(side, sorted(job_id_from_zid(m) for m in members))
    return jobs[::-1] if desc else jobs


#: How ``Queue.page`` orders a state's jobs: as the state's set does (the order workers take
#: them, or by due time), or by finish time (complete and failed only).
PAGE_ORDERS = ("queue", "finished")


def page(
    side: Side[_J],
    state: str,
    job_type: str | None,
    offset: int,
    count: int,
    desc: bool,
    by: str = "queue",
) -> Op[list[_J]]:
    """``count`` jobs of a state from rank ``offset`` (see ``Queue.page``)."""
    key, state = state_key(side.keys, state, job_type), parse_state(state)
    checks.integer(offset, "offset", 0)
    checks.integer(count, "count", 0)
    if by not in PAGE_ORDERS:
        raise InvalidJob(f"by is one of {', '.join(PAGE_ORDERS)}, got {by!r:.100}")
    if by == "finished" and state not in ("complete", "failed"):
        raise InvalidJob(f"only complete and failed jobs are ordered by finish time, not {state}")
    if count == 0:
        return []
    if by == "finished":
        call = calls.finished(side.keys, state, job_type or "", offset, count, desc)
        ids: list[int] = yield call
        return (yield from get_jobs(side, ids))
    stop = offset + count - 1
    if state == "delayed" and job_type is not None:  # by due time, as the all-types set
        members = yield from due.window(side.keys, job_type, offset, stop, desc)
        return (yield from get_jobs(side, [job_id_from_zid(m) for m in members]))
    command = ("ZREVRANGE", key, offset, stop) if desc else ("ZRANGE", key, offset, stop)
    (members,) = yield read(command)
    return (yield from get_jobs(side, [job_id_from_zid(m) for m in members]))


def counts(side: Side[JobSpec], job_type: str | None) -> Op[dict[str, int]]:
    """``{state: count}`` for every state, for all types or one (one round trip)."""
    if job_type is not None:
        validate_type(job_type)
    keys = side.keys
    found = yield read(
        *(
            ("ZCARD", keys.state(s) if job_type is None else keys.type_state(job_type, s))
            for s in STATES
        )
    )
    return dict(zip(STATES, found, strict=True))


def ids(side: Side[JobSpec], state: str, job_type: str | None) -> Op[list[int]]:
    """Every job id in a state (optionally of one type), in score order."""
    (members,) = yield read(("ZRANGE", state_key(side.keys, state, job_type), 0, -1))
    return [job_id_from_zid(m) for m in members]


def work_time(side: Side[JobSpec]) -> Op[int]:
    """Total milliseconds spent on completed jobs."""
    (value,) = yield read(("GET", side.keys.work_time))
    return int(value) if value else 0


def paused(side: Side[JobSpec]) -> Op[list[str]]:
    """The paused job types, sorted."""
    (found,) = yield read(("SMEMBERS", side.keys.paused))
    return sorted(found)


def types(side: Side[JobSpec]) -> Op[list[str]]:
    """Every job type ever saved, sorted."""
    (found,) = yield read(("SMEMBERS", side.keys.types))
    return sorted(found)


# -- control --------------------------------------------------------------------------------
def cancel(side: Side[_J], job_id: int | str, reason: str) -> Op[_J]:
    """Cancel a job (see ``Queue.cancel``); the job as it is now."""
    jid = checks.job_id(job_id)
    yield calls.cancel(side.keys, jid, reason_text(reason))
    return (yield from get_job(side, jid))


def requeue(side: Side[_J], job_id: int | str, only_from: Sequence[str]) -> Op[_J]:
    """Make a job in one of ``only_from`` wait again now (``Queue.retry``, ``Queue.promote``):
    any other state is refused in the same call that would move it; the job as it is now."""
    jid = checks.job_id(job_id)
    yield calls.set_state(side.keys, jid, "inactive", only_from)
    return (yield from get_job(side, jid))


def move(side: Side[_J], job_id: int | str, to_type: str, force: bool) -> Op[_J]:
    """Put a job under another type (see ``Queue.move``); the job as it is now."""
    jid = checks.job_id(job_id)
    if not isinstance(force, bool):
        raise InvalidJob(f"force must be true or false, got {force!r}")
    yield calls.move(side.keys, jid, validate_type(to_type), force)
    return (yield from get_job(side, jid))


def update_data(side: Side[_J], job_id: int | str, data: Any) -> Op[_J]:
    """Replace a waiting or failed job's data (see ``Queue.update_data``)."""
    jid = checks.job_id(job_id)
    stored_fields.check_unmarked(data)
    data_json = to_json(data, "data")
    ring = sealing.of(side)
    if ring is not None:
        data_json = ring.seal(data_json, "data")
    (keys_text,) = yield read(("HGET", side.keys.job(jid), "searchKeys"))
    found = records.search_keys_of(keys_text)
    words = " ".join(records.data_words(data, found, title=ring is None))
    offload, name = getattr(side, "offload", None), None
    if offload is not None:  # (edit.lua puts the name it replaces in the trash)
        data_json, name = offload.stored(data_json, "data")
    yield from _refused_trashed(side.keys, [name], calls.edit(side.keys, jid, data_json, words))
    return (yield from get_job(side, jid))


def _refusable(keys: Keys, jobs: Iterable[JobSpec], call: Call[_R]) -> Op[_R]:
    """``call``, which saves ``jobs`` (see :func:`_refused_trashed`)."""
    return (yield from _refused_trashed(keys, [j._stored_data for j in jobs], call))


def _refused_trashed(keys: Keys, names: Sequence[str | None], call: Call[_R]) -> Op[_R]:
    """``call``'s reply; when its script refuses it (a ``KueError``: an unknown job, a state
    it cannot take, a dependency that is no job), the values written to the payload store
    for it (``names``; None for none) go to the trash: no job holds them."""
    try:
        reply: _R = yield call
    except KueError:
        written = [n for n in names if n]
        if written:
            yield read(("RPUSH", keys.payload_trash, *written))
        raise
    return reply


def remove(side: Side[JobSpec], job_id: int | str, cascade: bool) -> Op[list[int]]:
    """Delete a job, its log and its history (see ``Queue.remove``): the ids removed."""
    if not isinstance(cascade, bool):
        raise InvalidJob(f"cascade must be true or false, got {cascade!r}")
    removed: list[int] = yield calls.remove(side.keys, checks.job_id(job_id), cascade)
    return removed
