"""Bulk actions on a filter: retry, remove, promote or cancel every job a filter matches
(a state; optionally a type, a tag, search words and a least age), not only jobs picked one
by one.

The filter walks the state's set (of the type, when given) with ``ZSCAN``, a batch at a time
(or the tag's set, when the filter has a tag on fewer jobs than the state holds), keeps the
jobs of each batch that are in the state, have the tag and every word and are old enough
(one round trip a batch), and acts on them at once: ``bulk.lua`` moves, removes or cancels
a batch in one call (as ``retry_all`` does a state; a running job cancelled is stopped in
its worker). Between batches other clients run: no call holds Redis for long, and the action
can stop after any batch, having done what it says.

An action confirmed by an operator ("Retry 29 jobs?") carries that count as ``expect``: the
run counts again first, and when the filter matches another number by then it does nothing
and raises ``BulkCountChanged`` with the new count, for the operator to be asked again. The
run then acts on ``expect`` jobs at most, so a job that comes into the filter between that
count and its batch is left as it is. Nothing holds the ids that were counted: a filter may
match millions of jobs, and a list of them would be as large as the state.

A run may record its progress (``Keys.bulk``: a hash of the action, the filter, jobs matched
and done so far, the state) so that another process can follow it, or ask it to stop after
its batch. A run whose recorder went silent (its process died) reads as ``interrupted``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from .. import defaults
from ..base import checks
from ..base.errors import BulkCountChanged, BulkNotFound, InvalidJob
from ..base.keys import Keys, job_id_from_zid
from ..base.states import STATES
from ..base.values import validate_type
from ..store import calls
from ..store.calls import Op, hash_reply, read
from . import control, records

#: What each action does, and to which states it applies.
ACTIONS: dict[str, tuple[str, ...]] = {
    "retry": ("failed",),
    "promote": ("delayed",),
    "remove": tuple(s for s in STATES if s != "active"),
    "cancel": ("inactive", "delayed", "active", "blocked", "pinned", "suspended"),
}
#: The filter's fields.
FIELDS = ("state", "type", "tag", "words", "min_age_ms")
#: Most example jobs ``Queue.bulk_match`` gives.
MAX_EXAMPLES = 100
_MOVES = {"retry": "inactive", "promote": "inactive", "remove": "remove", "cancel": "cancel"}
_ZID = re.compile(r"[0-9]{2}\|[1-9][0-9]*")
_RUN_ID = re.compile(r"[0-9a-f]{32}")


@dataclass(frozen=True)
class Filter:
    """Which jobs: of ``state``; of ``type``, with ``tag``, found by every one of ``words``
    (whole words, as the search index holds them), created ``min_age_ms`` ago or more."""

    state: str
    type: str | None = None
    tag: str | None = None
    words: tuple[str, ...] = ()
    min_age_ms: int | None = None

    @property
    def narrow(self) -> bool:
        """Whether it looks at more than the state and type (then each job is checked)."""
        return bool(self.tag or self.words or self.min_age_ms)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["words"] = " ".join(self.words) or None
        return out


def parse_filter(raw: object) -> Filter:
    """A filter from its JSON form (an object of :data:`FIELDS`); ``InvalidJob`` naming what
    is wrong."""
    if not isinstance(raw, Mapping):
        raise InvalidJob("a filter must be an object with a state")
    unknown = sorted(set(raw) - set(FIELDS))
    if unknown:
        raise InvalidJob(f"a filter has no field {unknown[0]!r} (it has {', '.join(FIELDS)})")
    state = raw.get("state")
    if state not in STATES:
        raise InvalidJob(f"a filter's state must be one of {', '.join(STATES)}, got {state!r}")
    job_type = raw.get("type")
    if job_type is not None:
        validate_type(job_type)
    tag = raw.get("tag")
    if tag is not None:
        records.tag(tag)
    text = raw.get("words")
    if text is not None and not isinstance(text, str):
        raise InvalidJob(f"a filter's words must be a string, got {text!r}")
    words = tuple(records.words(text or ""))
    if text and text.strip() and not words:
        raise InvalidJob("a filter's words must hold a letter or a digit")
    age = raw.get("min_age_ms")
    if age is not None:
        checks.integer(age, "min_age_ms", 0, defaults.MAX_MS)
    return Filter(str(state), job_type, tag, words, age or None)


def _check_action(action: object, f: Filter) -> str:
    if not isinstance(action, str) or action not in ACTIONS:
        raise InvalidJob(f"a bulk action must be one of {', '.join(ACTIONS)}, got {action!r:.100}")
    if f.state not in ACTIONS[action]:
        raise InvalidJob(f"{action} applies to jobs {' or '.join(ACTIONS[action])}, not {f.state}")
    return str(action)


def _members(reply: Any) -> tuple[int, list[str]]:
    """A ZSCAN reply, as either client parses it: (next cursor, members)."""
    cursor, page = reply
    if page and isinstance(page[0], (list, tuple)):
        return int(cursor), [str(m) for m, _ in page]
    return int(cursor), [str(m) for m in page[::2]]


def _state_key(keys: Keys, f: Filter) -> str:
    return keys.type_state(f.type, f.state) if f.type else keys.state(f.state)


def _source(keys: Keys, f: Filter) -> Op[str]:
    """The set to walk: the state's, or the tag's when it holds fewer jobs (a tag of a few
    jobs in a state of millions is a walk of a few)."""
    key = _state_key(keys, f)
    if not f.tag:
        return key
    in_state, tagged = yield read(("ZCARD", key), ("ZCARD", keys.tag(f.tag)))
    return keys.tag(f.tag) if int(tagged) < int(in_state) else key


def _matching(keys: Keys, f: Filter, source: str, members: list[str], now: int) -> Op[list[str]]:
    """The members (of ``source``) whose jobs are in the state, have the filter's tag and
    words and are old enough: one round trip."""
    key = _state_key(keys, f)
    if not members or (source == key and not f.narrow):
        return members
    sets: list[tuple[Any, ...]] = [] if source == key else [("ZMSCORE", key, *members)]
    sets += [("ZMSCORE", keys.tag(f.tag), *members)] if f.tag else []
    sets += [("ZMSCORE", keys.word(word), *members) for word in f.words]
    rows = [("HMGET", keys.job(job_id_from_zid(m)), "created_at", "type") for m in members]
    replies = yield read(*sets, *rows)
    found, fields = replies[: len(sets)], replies[len(sets) :]
    type_words: dict[str, set[str]] = {}
    kept = []
    for i, member in enumerate(members):
        created, job_type = fields[i]
        scores = iter(found)
        if source != key and next(scores)[i] is None:  # not in the state
            continue
        if f.tag and next(scores)[i] is None:
            continue
        if f.words:
            mine = type_words.setdefault(job_type or "", set(records.words(job_type or "")))
            if any(s[i] is None and w not in mine for s, w in zip(scores, f.words, strict=True)):
                continue
        if f.min_age_ms and (created is None or int(created) > now - f.min_age_ms):
            continue
        kept.append(member)
    return kept


def _walk(keys: Keys, f: Filter, source: str, now: int, cursor: int) -> Op[tuple[int, list[str]]]:
    """One batch of the walk through ``source`` from ``cursor``: the next cursor (0 at the
    end) and the members the filter matches."""
    (reply,) = yield read(("ZSCAN", source, cursor, "COUNT", defaults.BULK_BATCH))
    cursor, members = _members(reply)
    members = [m for m in members if _ZID.fullmatch(m)]
    return cursor, (yield from _matching(keys, f, source, members, now))


def count(keys: Keys, raw_filter: object) -> Op[int]:
    """See ``Queue.bulk_count``."""
    matched, _ = yield from match(keys, raw_filter, 0)
    return matched


def match(keys: Keys, raw_filter: object, examples: int) -> Op[tuple[int, list[int]]]:
    """See ``Queue.bulk_match``: how many jobs match, and the ids of ``examples`` of them at
    most (the first found), in one walk."""
    f = parse_filter(raw_filter)
    checks.integer(examples, "examples", 0, MAX_EXAMPLES)
    if not f.narrow:
        key = _state_key(keys, f)
        if not examples:
            (n,) = yield read(("ZCARD", key))
            return int(n), []
        n, first = yield read(("ZCARD", key), ("ZRANGE", key, 0, examples - 1))
        return int(n), [job_id_from_zid(str(m)) for m in first]
    now = yield from calls.server_now()
    source = yield from _source(keys, f)
    cursor, seen = 0, set()
    found: list[str] = []
    while True:
        cursor, members = yield from _walk(keys, f, source, now, cursor)
        found += [m for m in members if m not in seen][: examples - len(found)]
        seen.update(members)
        if cursor == 0:
            return len(seen), [job_id_from_zid(m) for m in found]


def _act(keys: Keys, action: str, f: Filter, members: list[str], reason: str) -> Op[int]:
    """Do ``action`` on the jobs of ``members``, in one call: how many it did (a job that
    left the state meanwhile is left as it is)."""
    key, todo = _state_key(keys, f), _MOVES[action]
    handled, _ = yield calls.bulk(keys, key, f.state, todo, len(members), members, reason)
    return int(handled)


def run(
    keys: Keys,
    action: object,
    raw_filter: object,
    run_id: str | None = None,
    reason: str = "",
    expect: int | None = None,
) -> Op[dict[str, Any]]:
    """See ``Queue.bulk``."""
    f = parse_filter(raw_filter)
    action = _check_action(action, f)
    reason = control.reason_text(reason)
    if expect is not None:
        checks.integer(expect, "expect", 0, 2**63 - 1)
        matched = yield from count(keys, raw_filter)  # counted again, as the operator was asked
        if matched != expect:
            raise BulkCountChanged(matched, expect)
    now = yield from calls.server_now()
    status: dict[str, Any] = {"id": run_id, "action": action, "filter": f.to_dict()}
    status.update(expect=expect, matched=0, done=0, state="running")
    status.update(started_at=now, updated_at=now)
    record = keys.bulk(run_id) if run_id else None
    if record:
        yield read(("HSET", record, *_fields(status)), ("PEXPIRE", record, defaults.BULK_KEEP_MS))
    source = yield from _source(keys, f)
    cursor, seen = 0, set()
    while True:
        cursor, members = yield from _walk(keys, f, source, now, cursor)
        members = [m for m in members if m not in seen]
        if expect is not None:  # never more than confirmed: a job come since waits
            members = members[: expect - status["matched"]]
            cursor = 0 if status["matched"] + len(members) >= expect else cursor
        seen.update(members)
        # A walk's step may give more than a batch (ZSCAN's COUNT is a hint: Valkey gives
        # whole buckets), so the record and its stop are looked at after each batch.
        batches = [
            members[i : i + defaults.BULK_BATCH]
            for i in range(0, len(members), defaults.BULK_BATCH)
        ]
        for i, chunk in enumerate(batches or [[]]):
            status["matched"] += len(chunk)
            if chunk:
                status["done"] += yield from _act(keys, action, f, chunk, reason)
            more = cursor != 0 or i < len(batches) - 1
            if not more:
                status["state"] = "done"
            if record:
                status["updated_at"] = yield from calls.server_now()
                _, stop = yield read(("HSET", record, *_fields(status)), ("HGET", record, "stop"))
                if stop and more:
                    status["state"] = "stopped"
                    yield read(("HSET", record, "state", "stopped"))
            if status["state"] != "running":
                return status


def _fields(status: dict[str, Any]) -> list[Any]:
    out: list[Any] = []
    for name in ("action", "matched", "done", "state", "started_at", "updated_at"):
        out += [name, status[name]]
    if status["expect"] is not None:
        out += ["expect", status["expect"]]
    return [*out, "filter", json.dumps(status["filter"])]


def status(keys: Keys, run_id: object) -> Op[dict[str, Any]]:
    """See ``Queue.bulk_status``."""
    if not isinstance(run_id, str) or not _RUN_ID.fullmatch(run_id):
        raise BulkNotFound(str(run_id))
    (raw,) = yield read(("HGETALL", keys.bulk(run_id)))
    got = hash_reply(raw)
    if not got:
        raise BulkNotFound(run_id)
    now = yield from calls.server_now()
    out: dict[str, Any] = {"id": run_id, "action": got.get("action")}
    out["filter"] = json.loads(got.get("filter") or "{}")
    out["expect"] = int(got["expect"]) if got.get("expect") else None
    for name in ("matched", "done", "started_at", "updated_at"):
        out[name] = int(got.get(name) or 0)
    out["state"] = got.get("state", "running")
    if out["state"] == "running" and now - out["updated_at"] > defaults.BULK_STALE_MS:
        out["state"] = "interrupted"  # its process went silent: it will not go on
    out["stopping"] = bool(got.get("stop")) and out["state"] == "running"
    return out


def stop(keys: Keys, run_id: object) -> Op[dict[str, Any]]:
    """See ``Queue.stop_bulk``."""
    found = yield from status(keys, run_id)
    if found["state"] == "running":
        yield read(("HSET", keys.bulk(found["id"]), "stop", "1"))
        found["stopping"] = True
    return found
