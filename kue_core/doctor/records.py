"""kue doctor's look at the job records (see :mod:`kue_core.features.records`): the tag,
search-word, tracking and finished sets, the tag counts and the word list. Our scripts keep them
exact; Node Kue clients, which know nothing of them, leave members behind when they remove or move a
job, and manual edits can do the rest.

``stale-record``
    a member of ``<p>:tag:<tag>``, ``<p>:words:<word>``, ``<p>:tracked`` or
    ``<p>:finished:<state>`` whose job is gone, or (finished sets) is no longer in that state;
    or a member that is not a job's. Repair: remove it.
``tag-count``
    a count in ``<p>:tags`` that is not the number of jobs in that tag's set (or a tag counted
    whose set is gone). Repair: count again.
``word-list``
    a word in ``<p>:words`` without its set of jobs, a set of jobs missing from it, or the
    scratch set a search left (``<p>:words:~search``, which a search deletes before it
    returns). Repair: put the list right (delete the scratch set).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import cast

from .. import defaults
from .checker import Checker

#: The scratch set search.lua writes and deletes.
SCRATCH = "~search"


def check(c: Checker) -> None:
    """Add the records findings to ``c``'s report."""
    k = c.keys
    sets = [k.tracked, k.finished("complete"), k.finished("failed")]
    tags = list(_scan(c, "tag:*"))
    words = [key for key in _scan(c, "words:*")]
    for key in [*sets, *tags, *words]:
        if key == k.word(SCRATCH):
            c.add(
                "word-list",
                key,
                "a search's scratch set was left behind",
                "delete it",
                action=("reword", SCRATCH, "", ""),
            )
        elif c.client.type(key) == "zset":
            _members(c, key)
    _tag_counts(c, tags)
    _word_list(c, words)


def _scan(c: Checker, rest: str) -> Iterator[str]:
    return cast(
        Iterator[str],
        c.client.scan_iter(match=c.keys.match(rest), count=defaults.DOCTOR_SCAN_COUNT),
    )


def _members(c: Checker, key: str) -> None:
    """Members of a record set whose job is gone (or left the finished set's state)."""
    name = c.keys.name(key)
    state = name.split(":", 1)[1] if name.startswith("finished:") else None
    batch: list[str] = []
    for member, _ in c.client.zscan_iter(key, count=c.batch):
        batch.append(member)
        if len(batch) == c.batch:
            _judge(c, key, name, state, batch)
            batch = []
    if batch:
        _judge(c, key, name, state, batch)


def _judge(c: Checker, key: str, name: str, state: str | None, members: list[str]) -> None:
    ids = [_member_id(m) for m in members]
    pipe = c.client.pipeline(transaction=False)
    for job_id in ids:
        pipe.hmget(c.keys.job(job_id or 0), "type", "state")
    for member, job_id, (jtype, jstate) in zip(members, ids, pipe.execute(), strict=True):
        if job_id is None:
            why = f"{member!r} is not a job's member"
        elif jtype is None:
            why = f"job {job_id} is gone"
        elif state is not None and jstate != state:
            why = f"job {job_id} is {jstate}, not {state}"
        else:
            continue
        c.add(
            "stale-record",
            key,
            f"{name} holds {member!r}: {why}",
            "remove the member",
            job_id,
            ("unrecord", name, member, ""),
        )


def _member_id(member: str) -> int | None:
    digits = member.partition("|")[2]
    return int(digits) if digits.isascii() and digits.isdigit() and digits[0] != "0" else None


def _tag_counts(c: Checker, tag_sets: list[str]) -> None:
    counted: dict[str, float] = {}
    if c.client.type(c.keys.tags) == "zset":
        counted = dict(c.client.zscan_iter(c.keys.tags, count=c.batch))
    head = len(c.keys.tag(""))
    names = {key[head:] for key in tag_sets} | set(counted)
    for tag in sorted(names):
        real = c.client.zcard(c.keys.tag(tag))
        if counted.get(tag, 0) != real:
            c.add(
                "tag-count",
                c.keys.tags,
                f"tag {tag!r} is counted {int(counted.get(tag, 0))} but {real} jobs have it",
                "count again",
                action=("recount", tag, "", ""),
            )


def _word_list(c: Checker, word_sets: list[str]) -> None:
    listed: set[str] = set()
    if c.client.type(c.keys.words) == "zset":
        listed = {w for w, _ in c.client.zscan_iter(c.keys.words, count=c.batch)}
    head = len(c.keys.word(""))
    present = {key[head:] for key in word_sets} - {SCRATCH}
    for word in sorted(listed ^ present):
        why = "has no jobs" if word in listed else "is not in the word list"
        c.add(
            "word-list",
            c.keys.words,
            f"search word {word!r} {why}",
            "put the word list right",
            action=("reword", word, "", ""),
        )
