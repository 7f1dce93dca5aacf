"""Script calls as values: which transition script, its key and arguments, and how its reply
reads, with no I/O. :class:`kue_core.store.scripts.Scripts` runs them on a blocking connection and
:class:`kue_core.aio.AsyncScripts` on an asyncio one, so both clients send the same arguments
and read the same replies (see :mod:`kue_core.jobs.ops` for operations of several steps).

Only the scripts a producer or a reader runs are here; the worker's own transitions (claim,
complete, heartbeat...) stay in ``Scripts``: only the blocking worker runs them.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from ..base.keys import Keys

T = TypeVar("T")


class Call(Generic[T]):
    """One run of script ``name`` on ``key`` (its first key; the prefix is passed too) with
    ``args``; ``parse`` reads its reply. ``replicated``: the caller waits for the queue's
    replicas to confirm its writes (Redis ``WAIT``) before it counts as done. (A plain class
    with slots: one is made for every save, and a frozen dataclass costs four times more.)"""

    __slots__ = ("args", "key", "name", "parse", "replicated")

    def __init__(
        self,
        name: str,
        key: str,
        args: tuple[Any, ...],
        parse: Callable[[Any], T],
        replicated: bool = False,
    ) -> None:
        self.name = name
        self.key = key
        self.args = args
        self.parse = parse
        self.replicated = replicated

    def __repr__(self) -> str:
        return f"Call({self.name!r}, {self.key!r}, {self.args!r})"


@dataclass(frozen=True)
class Read:
    """Plain commands (each a tuple: name, arguments), sent in one round trip; the reply is
    the list of their replies."""

    commands: tuple[tuple[Any, ...], ...]


def read(*commands: tuple[Any, ...]) -> Read:
    return Read(commands)


#: One step of an operation: a script call, several calls of one script in one round trip
#: (the reply: their replies, in order), or plain commands.
Step = Call[Any] | list[Call[Any]] | Read
#: An operation: a generator that yields steps, is sent each step's reply, and returns its
#: result. Written once, run by either client (``Scripts.drive``, ``AsyncScripts.drive``).
Op = Generator[Step, Any, T]


def _as_is(reply: Any) -> Any:
    return reply


def _ints(reply: Any) -> list[int]:
    return [int(i) for i in reply]


def _flag(value: bool) -> str:
    return "1" if value else ""


def flat(rows: Sequence[Sequence[Any]]) -> list[Any]:
    """A script's rows of values, one after another in its ARGV."""
    return [v for row in rows for v in row]


# -- saving ---------------------------------------------------------------------------------
def save(keys: Keys, rows: Sequence[Sequence[Any]]) -> Call[list[int]]:
    """Store jobs given as rows of ``SAVE_WIDTH`` values; their ids."""
    return Call("save", keys.ids, (len(rows), *flat(rows)), _as_is, True)


def _unique_saved(reply: Any) -> tuple[int, str, str | None]:
    job_id, outcome, state = reply
    return int(job_id), outcome, state


def save_unique(
    keys: Keys, row: Sequence[Any], key: str, mode: str, ttl: int
) -> Call[tuple[int, str, str | None]]:
    """Save one job with a unique key unless a job holds it: (id, outcome, state)."""
    return Call("save_unique", keys.ids, (*row, key, mode, ttl), _unique_saved, True)


def _flow_saved(reply: Any) -> list[tuple[int, str]]:
    return [(int(i), str(state)) for i, state in reply]


def flow(keys: Keys, rows: Sequence[Sequence[Any]]) -> Call[list[tuple[int, str]]]:
    """Save jobs with dependencies, all or nothing (rows as ``flow.lua`` takes them): (id,
    state) of each."""
    return Call("flow", keys.ids, (len(rows), *flat(rows)), _flow_saved, True)


# -- finding --------------------------------------------------------------------------------
def _found(reply: Any) -> tuple[int, bool, list[int]]:
    total, exact, *ids = reply
    return int(total), exact == 1, [int(i) for i in ids]


def search(
    keys: Keys,
    offset: int,
    count: int,
    scan: int,
    state: str,
    job_type: str,
    terms: Sequence[Any],
) -> Call[tuple[int, bool, list[int]]]:
    """See ``search.lua``: (total, exact, ids of the page)."""
    return Call("search", keys.words, (offset, count, scan, state, job_type, *terms), _found)


def finished(
    keys: Keys, state: str, job_type: str, offset: int, count: int, newest: bool
) -> Call[list[int]]:
    """See ``finished.lua``: the ids of a page of complete or failed jobs by finish time."""
    args = (state, job_type, offset, count, _flag(newest))
    return Call("finished", keys.finished(state), args, _ints)


# -- changing a saved job: each gives its state (or what it says) ---------------------------
def update(keys: Keys, job_id: int, fields: Sequence[Any]) -> Call[str]:
    return Call("update", keys.job(job_id), (job_id, *fields), _as_is)


def set_state(keys: Keys, job_id: int, state: str, only_from: Sequence[str] = ()) -> Call[str]:
    """The state the job was in; with ``only_from``, a job in another state is refused
    (``InvalidTransition``) and left as it is."""
    return Call("set_state", keys.job(job_id), (job_id, state, " ".join(only_from)), _as_is)


def set_priority(keys: Keys, job_id: int, priority: int) -> Call[None]:
    return Call("set_priority", keys.job(job_id), (job_id, priority), _as_is)


def remove(keys: Keys, job_id: int, cascade: bool) -> Call[list[int]]:
    """Remove a job (with ``cascade``, and the jobs blocked waiting for it): the ids removed."""
    return Call("remove", keys.job(job_id), (job_id, _flag(cascade)), _ints)


def cancel(keys: Keys, job_id: int, reason: str) -> Call[str]:
    return Call("cancel", keys.job(job_id), (job_id, reason), _as_is)


def move(keys: Keys, job_id: int, to_type: str, force: bool) -> Call[str]:
    return Call("move", keys.job(job_id), (job_id, to_type, _flag(force)), _as_is)


def edit(keys: Keys, job_id: int, data_json: str, words: str) -> Call[str]:
    return Call("edit", keys.job(job_id), (job_id, data_json, words), _as_is)


def tag(keys: Keys, job_id: int, what: str, rows: Sequence[str] = ()) -> Call[Any]:
    """Add or remove tags (``rows``: tag, its words...), or track or untrack a job."""
    return Call("tag", keys.job(job_id), (job_id, what, *rows), _as_is)


def pin(keys: Keys, job_id: int, workers_json: str) -> Call[str]:
    return Call("pin", keys.job(job_id), (job_id, workers_json), _as_is)


# -- types ----------------------------------------------------------------------------------
def bulk(
    keys: Keys,
    key: str,
    state: str,
    action: str,
    limit: int,
    members: Sequence[str] = (),
    reason: str = "",
) -> Call[tuple[int, int]]:
    """One batch of ``action`` (a state to move to, ``remove`` or ``cancel`` with its
    ``reason``) on the jobs of ``state`` in the set ``key`` (those of ``members`` only, when
    given): (jobs handled, jobs left in the set)."""
    return Call("bulk", key, (state, action, limit, reason, *members), _pair)


def _pair(reply: Any) -> tuple[int, int]:
    return int(reply[0]), int(reply[1])


def feed(keys: Keys, job_type: str, event: str, on: bool) -> Call[None]:
    """Start or stop the feed of ``event`` of ``job_type`` (see ``feed.lua``)."""
    return Call("feed", keys.limits, (job_type, event, "1" if on else ""), _none)


def _none(reply: Any) -> None:
    return None


def hash_reply(reply: Any) -> dict[str, str]:
    """An ``HGETALL`` reply as a dict (a client that does not parse it gives a flat list)."""
    if isinstance(reply, dict):
        return {str(k): str(v) for k, v in reply.items()}
    return {str(k): str(v) for k, v in zip(reply[::2], reply[1::2], strict=True)}


def pause(keys: Keys, job_type: str) -> Call[bool]:
    """Stop claims of ``job_type``; False when it was paused already."""
    return Call("pause", keys.paused, (job_type,), bool)


def resume(keys: Keys, job_type: str) -> Call[bool]:
    """Allow claims of ``job_type`` again; False when it was not paused."""
    return Call("resume", keys.paused, (job_type,), bool)


def _rules(text: Any) -> dict[str, Any]:
    value = json.loads(text)
    return value if isinstance(value, dict) else {}


def limit(
    keys: Keys, job_type: str, changes: dict[str, Any], end_hold: bool
) -> Call[dict[str, Any]]:
    """Change the limits of ``job_type`` (see ``limit.lua``): its rules after."""
    return Call("limit", keys.limits, (job_type, json.dumps(changes), _flag(end_hold)), _rules)


# -- schedules ------------------------------------------------------------------------------
def schedule(keys: Keys, op: str, key: str, at: int = -1, fields: Sequence[Any] = ()) -> Call[bool]:
    """Define (``set``), ``pause``, ``resume`` or ``remove`` a schedule; False when it does
    not exist."""
    return Call("schedule", keys.schedules, (op, key, at, *fields), bool)


def _ticked(reply: Any) -> tuple[str, list[int], int]:
    if reply[0] != "made":
        return str(reply[0]), [], 0
    return "made", [int(i) for i in reply[2:]], int(reply[1])


def tick(
    keys: Keys,
    key: str,
    due: int | None,
    rev: str,
    at: int,
    rows: Sequence[Sequence[Any]],
    unique: Sequence[Any] | None = None,
) -> Call[tuple[str, list[int], int]]:
    """Fire a schedule: its jobs (rows of SAVE_WIDTH values and a tick each, with the unique
    (key, mode, ttl) they share, if any) and its next due time ``at``, if it is still due at
    ``due`` under ``rev`` (None: a trigger). Gives (``made``, ids, held): with a unique key,
    each tick's new job or the holder, and how many found a holder; (``stale``, [], 0) or
    (``gone``, [], 0)."""
    args = (key, "" if due is None else due, rev, at, *(unique or ("", "", 0)))
    return Call("tick", keys.ids, (*args, len(rows), *flat(rows)), _ticked, True)


def server_now() -> Op[int]:
    """Now on the Redis server's clock, in ms: the clock of every due time, window and age
    (see ``connection.server_ms``)."""
    ((seconds, micros),) = yield read(("TIME",))
    return int(seconds) * 1000 + int(micros) // 1000


# -- the statistics' history ----------------------------------------------------------------
def sample(keys: Keys, seen: str, minute: int, args: Sequence[Any]) -> Call[bool]:
    """Write a sample of the history (``args`` as ``sample.lua`` takes them after the minute)
    unless another process wrote one since ``<p>:history:minute`` held ``seen``: whether
    it was written."""
    return Call("sample", keys.series_minute, (seen, minute, *args), _written)


def _written(reply: Any) -> bool:
    return int(reply) == 1
