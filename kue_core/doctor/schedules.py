"""kue doctor's look at schedules (see :mod:`kue_core.jobs.schedules`): ``<p>:schedules``, the
schedules that will make jobs (member: the schedule's key, score: its next due time), and each
schedule's hash ``<p>:schedule:<key>``. Our scripts change both in one call; hand edits, a
partial restore or a Redis that lost writes can leave them apart.

``stale-schedule``
    a member of ``<p>:schedules`` whose hash is gone (or holds no definition), or which is
    paused or has ended: the promotion timers wake for it, and find nothing to do. Repair:
    remove the member.
``lost-schedule``
    a schedule neither paused nor ended that is not in ``<p>:schedules``: it would never make
    a job again. Repair: put it back, due now (server time); its next firing plans from there
    under its catch-up policy, as after an outage.

A key ``<p>:schedule:<key>`` of another Redis type is a ``wrong-type`` finding: a person must
look. Each suspect is read twice around the set's entry and reported only when both reads
agree, so that a schedule changed while the check runs (paused, ended, removed, resumed) is
not reported.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .. import defaults
from .checker import Checker

if TYPE_CHECKING:
    pass

#: The fields of a schedule's hash the check reads.
_FIELDS = ("definition", "paused", "ended", "rev")


def check(c: Checker) -> None:
    """Add the schedule findings to ``c``'s report."""
    if c.client.type(c.keys.schedules) in ("zset", "none"):  # else doctor's wrong-type
        _members(c)
        _hashes(c)


def _why_stale(kind: str, h: list[Any]) -> str | None:
    """Why a schedule whose hash is of Redis type ``kind`` with fields ``h`` (``_FIELDS``)
    should not be in ``<p>:schedules``; None when it should (or another finding covers it)."""
    if kind == "none" or (kind == "hash" and h[0] is None):
        return "its hash is gone" if kind == "none" else "its hash holds no definition"
    if kind != "hash":
        return None  # wrong-type, found with the hashes
    if h[1] == "1":
        return "it is paused"
    if h[2] == "1":
        return "it has ended"
    return None


def _members(c: Checker) -> None:
    zkey = c.keys.schedules
    cursor = 0
    while True:
        cursor, page = c.client.zscan(zkey, cursor, count=c.batch)
        _judge_members(c, [str(m) for m, _ in page])
        if cursor == 0:
            return


def _judge_members(c: Checker, members: list[str]) -> None:
    """Members whose schedule should not be due: read as ZSCORE, its hash, ZSCORE, reported
    when the member stayed put around a hash that says it should not be there."""
    if not members:
        return
    zkey = c.keys.schedules
    pipe = c.client.pipeline(transaction=False)
    for member in members:
        hkey = c.keys.schedule(member)
        pipe.zscore(zkey, member)
        pipe.type(hkey)
        pipe.hmget(hkey, *_FIELDS)
        pipe.zscore(zkey, member)
    replies = pipe.execute(raise_on_error=False)
    for i, member in enumerate(members):
        before, kind, h, after = replies[i * 4 : i * 4 + 4]
        if before is None or before != after or isinstance(h, Exception):
            continue
        why = _why_stale(str(kind), h)
        if why is None:
            continue
        c.add(
            "stale-schedule",
            zkey,
            f"{zkey} holds schedule {member!r}, but {why}: it will make no job",
            "remove it from the set",
            None,
            ("unschedule", member, "", ""),
        )


def _hashes(c: Checker) -> None:
    head = len(c.keys.schedule(""))
    page: list[str] = []
    for key in c.client.scan_iter(
        match=c.keys.match("schedule:*"), count=defaults.DOCTOR_SCAN_COUNT
    ):
        page.append(str(key))
        if len(page) == c.batch:
            _judge_hashes(c, head, page)
            page = []
    _judge_hashes(c, head, page)


def _judge_hashes(c: Checker, head: int, keys: list[str]) -> None:
    """Schedules that should be due but are not in ``<p>:schedules``: read as its hash,
    ZSCORE, its hash, reported when both reads of the hash agree."""
    if not keys:
        return
    zkey = c.keys.schedules
    pipe = c.client.pipeline(transaction=False)
    for key in keys:
        pipe.type(key)
        pipe.hmget(key, *_FIELDS)
        pipe.zscore(zkey, key[head:])
        pipe.hmget(key, *_FIELDS)
    replies = pipe.execute(raise_on_error=False)
    for i, key in enumerate(keys):
        kind, first, score, second = replies[i * 4 : i * 4 + 4]
        if kind == "none":
            continue  # removed meanwhile
        if kind != "hash":
            c.add(
                "wrong-type",
                key,
                f"{key} is a {kind}, not a hash",
                "rename or delete it (kue cannot use it as a schedule)",
            )
            continue
        if score is not None or first != second or first[0] is None:
            continue
        if first[1] == "1" or first[2] == "1":
            continue  # paused or ended: rightly out of the set
        name = key[head:]
        c.add(
            "lost-schedule",
            key,
            f"schedule {name!r} is neither paused nor ended, but is not in {zkey}: it will "
            "never make a job again",
            "put it back, due now (its next firing follows its catch-up policy)",
            None,
            ("reschedule", name, "", ""),
        )
