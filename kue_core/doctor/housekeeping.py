"""The doctor's checks beyond a job's own sets: wake-up tokens per type, workers whose
registration expired, the id counter, unique keys left by Node Kue, and the bounds of the
statistics' history, of bulk actions' records and of the audit log."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import cast

from .. import defaults
from ..features import history
from ..store import calls
from .core import Check
from .findings import plural
from .judging import ago, lua_number, score_text, type_of

#: A bulk action's record, named without the prefix (see ``Keys.bulk``).
_RUN_RECORD = re.compile(r"bulk:[0-9a-f]{32}")


def tokens(c: Check, sets: Iterable[str]) -> None:
    types = set(c.types_seen)
    if c.keys.types not in c.skip:
        types.update(str(t) for t in c.client.sscan_iter(c.keys.types))
    for key in sets:
        jtype = type_of(c.keys.name(key))
        if jtype is not None:
            types.add(jtype)
    ordered = sorted(types)
    c.report.types = len(ordered)
    for i in range(0, len(ordered), c.per_call):
        chunk = ordered[i : i + c.per_call]
        counts = c.scripts.call(calls.inspect(c.keys, [], chunk)).types
        for jtype, count in zip(chunk, counts, strict=True):
            # The members repair removes need no token (it counts again as it pushes).
            leaving = c.leaving.get(c.keys.type_state(jtype, "inactive"), 0)
            waiting, tokens = count.inactive - leaving, count.tokens
            if tokens < waiting:
                short = waiting - tokens
                key = c.keys.tokens(jtype)
                c.add(
                    "missing-tokens",
                    key,
                    f"{key} holds {plural(tokens, 'wake-up token')} for "
                    f"{plural(waiting, 'inactive job')} of type {jtype!r}: Kue's workers "
                    f"would leave {short} of them waiting",
                    f"push {plural(short, 'token')}",
                    None,
                    ("tokens", jtype, "", ""),
                )


def workers(c: Check) -> None:
    key = c.keys.workers
    if key in c.skip:
        return
    now = None
    cursor = 0
    while True:
        cursor, page = c.client.zscan(key, cursor, count=c.batch)
        pipe = c.client.pipeline(transaction=False)
        for wid, _ in page:
            pipe.exists(c.keys.worker(str(wid)))
        for (wid, beat), alive in zip(page, pipe.execute(), strict=True):
            if alive:
                continue
            if now is None:
                seconds, micros = c.client.time()
                now = seconds * 1000 + micros // 1000
            worker = str(wid)
            c.add(
                "gone-worker",
                key,
                f"worker {worker} is in {key} but its registration expired (last "
                f"heartbeat {ago(now - float(beat))} ago)",
                "remove it from the set",
                None,
                ("unworker", worker, "", ""),
            )
        if cursor == 0:
            return


def ids(c: Check, max_id: int) -> None:
    key = c.keys.ids
    if key in c.skip or not max_id:
        return
    current = lua_number(cast("str | None", c.client.get(key)))
    if current is None or current < max_id:
        now = "missing" if current is None else score_text(current)
        c.add(
            "ids-behind",
            key,
            f"{key} is {now} but job {max_id} exists: Kue's save would write over it",
            f"raise it to {max_id}",
            max_id,
            ("ids", str(max_id), "", ""),
        )


def unique_keys(c: Check) -> None:
    """Unique keys without an expiry naming a job that is gone or has ended, and
    kue-unique entries naming a job that is gone: left by Node Kue, which ends and removes
    jobs without our scripts."""
    reuse = c.keys.unique_jobs
    for key in c.client.scan_iter(match=c.keys.match("unique:*"), count=defaults.DOCTOR_SCAN_COUNT):
        if key == reuse:
            continue
        pipe = c.client.pipeline(transaction=False)
        pipe.type(key)
        pipe.get(key)
        pipe.pttl(key)
        kind, holder, ttl = pipe.execute()
        if kind != "string" or not str(holder).isdigit() or ttl != -1:
            continue
        state, jtype = cast(
            "list[str | None]", c.client.hmget(c.keys.job(int(holder)), "state", "type")
        )
        if jtype is None or state in ("complete", "failed"):
            what = "is gone" if jtype is None else f"is {state}"
            name = key[len(c.keys.prefix) + len(":unique:") :]
            c.add(
                "stale-unique",
                key,
                f"unique key {name!r} names job {holder}, which {what}: it blocks nothing "
                "now but stays in Redis",
                "delete it",
                int(holder),
                ("ununique", name, str(holder), ""),
            )
    if c.client.type(reuse) != "hash":
        return
    for name, holder in c.client.hscan_iter(reuse, count=c.batch):
        if str(holder).isdigit() and not c.client.exists(c.keys.job(int(holder))):
            c.add(
                "stale-unique",
                reuse,
                f"kue-unique's key {name!r} names job {holder}, which is gone",
                "delete the entry",
                int(holder),
                ("ununique", "", str(holder), str(name)),
            )


def bounds(c: Check) -> None:
    """Keys of the statistics' history and bulk actions' records without an expiry (they
    would stay for good: every one is written with one) and an audit log far past its bound
    (it is trimmed as entries are added)."""
    keep = {code: step.keep_s for code, step in history.STEPS.items()}
    for code, seconds in keep.items():
        match = c.keys.match(f"history:{code}:*")
        for key in c.client.scan_iter(match=match, count=defaults.DOCTOR_SCAN_COUNT):
            if c.client.ttl(key) != -1:
                continue
            c.add(
                "unbounded-history",
                key,
                f"{key}, points of the statistics' history, has no expiry: it would stay",
                f"expire it in {seconds} s, as the history's keys do",
                None,
                ("bound", c.keys.name(key), str(seconds), ""),
            )
    seconds = defaults.BULK_KEEP_MS // 1000
    for key in c.client.scan_iter(match=c.keys.match("bulk:*"), count=defaults.DOCTOR_SCAN_COUNT):
        name = c.keys.name(key)
        if not _RUN_RECORD.fullmatch(name) or c.client.ttl(key) != -1:
            continue
        c.add(
            "unbounded-bulk",
            key,
            f"{key}, the record of a bulk action, has no expiry: it would stay",
            f"expire it in {seconds} s, as a bulk action's record does",
            None,
            ("bound", name, str(seconds), ""),
        )
    key = c.keys.audit
    if key in c.skip or c.client.type(key) != "stream":
        return
    length, most = int(c.client.xlen(key)), defaults.AUDIT_MAX_ENTRIES
    if length > 2 * most:
        c.add(
            "long-audit",
            key,
            f"{key} holds {length} entries, past its bound of about {most}",
            f"trim it to about {most}",
            None,
            ("bound", c.keys.name(key), str(most), ""),
        )
