"""kue doctor's look at flow control (see :mod:`kue_core.features.limits`): the rules in
``<p>:limits``, the paused types, and the groups' sets of the types with groups. Our scripts change
them with the jobs in one call; hand edits, a partial restore, a Redis that lost writes or a Node
Kue client (which knows nothing of groups) can leave them apart.

``bad-limits``
    a field of ``<p>:limits`` that is not a JSON object: every claim of its type fails.
    Repair: remove it, keeping what other keys tell (paused when the type is in
    ``<p>:paused``, groups when ``<p>:groups:<type>`` exists).
``unheld-pause``
    a type in ``<p>:paused`` whose rules lack ``"paused": true``: the claim reads the flag
    only, so its workers go on. Repair: set the flag, as ``pause.lua`` does.
``lost-lane``
    a type whose rules have ``groups`` but whose ``<p>:groups:<type>`` lacks the member
    ``"\\0"`` that stands for its jobs in no group: they are never served while groups wait;
    or a type with groups waiting whose rules lack ``groups``: its claims do not take turns.
    Repair: add the member (score 0) and the flag.
``lost-group-job``
    an inactive job of group ``g`` missing from ``<p>:group:<type>:<g>``, or ``g`` missing
    from ``<p>:groups:<type>``: the group's claims do not see it. Repair: add it (score: its
    priority); a group added to the rotation takes the last turn.
``stale-group-job``
    a member of ``<p>:group:<type>:<g>`` that is not an inactive job of that type and group.
    Repair: remove it (and the group from the rotation when nothing is left in it).
``stale-group``
    a group in ``<p>:groups:<type>`` with no job waiting. Repair: remove it.
``lost-group-active``
    an active job of group ``g`` missing from ``<p>:group-active:<type>:<g>``: the group's
    concurrency limit does not count it. Repair: add it (score: its start).
``stale-group-active``
    a member of ``<p>:group-active:<type>:<g>`` that is not an active job of that type and
    group: the group's concurrency limit counts it for ever. Repair: remove it.

The check reads the types of ``<p>:job:types`` and ``<p>:limits``, and for those with groups
their inactive and active jobs, the groups of their rotation and those sets' members: it
scans no keyspace. Each suspect is read twice around its set entry and reported only when
both reads agree, so that a job claimed or saved while the check runs is not reported.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from ..features.limits import LANE
from .checker import Checker, member_id, pages

if TYPE_CHECKING:
    pass

#: The job fields the check reads of each suspect.
_FIELDS = ("type", "state", "group")


def check(c: Checker) -> None:
    """Add the flow control findings to ``c``'s report."""
    rules = _rules(c)
    _paused(c, rules)
    types = set(rules)
    if c.client.type(c.keys.types) == "set":  # else doctor's wrong-type
        types.update(str(t) for t in c.client.sscan_iter(c.keys.types, count=c.batch))
    ordered = sorted(types)
    pipe = c.client.pipeline(transaction=False)
    for t in ordered:
        pipe.type(c.keys.groups(t))
        pipe.zscore(c.keys.groups(t), LANE)
        pipe.zcard(c.keys.groups(t))
    replies = pipe.execute(raise_on_error=False)
    for i, t in enumerate(ordered):
        kind, lane, count = replies[3 * i : 3 * i + 3]
        if kind not in ("zset", "none"):
            _wrong_type(c, c.keys.groups(t), str(kind))
            continue
        flagged = bool((rules.get(t) or {}).get("groups"))
        has_groups = kind == "zset" and int(count) > (lane is not None)
        bad = t in rules and rules[t] is None  # bad-limits: its repair does it
        if not bad and ((flagged and lane is None) or (has_groups and not flagged)):
            _lost_lane(c, t, flagged)
        if flagged or kind == "zset":
            _groups(c, t)


# -- the rules --------------------------------------------------------------------------------
def _decode(text: str) -> dict[str, Any] | None:
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _rules(c: Checker) -> dict[str, dict[str, Any] | None]:
    """Every type's rules (None: not a JSON object, reported)."""
    key = c.keys.limits
    kind = c.client.type(key)
    if kind == "none":
        return {}
    if kind != "hash":
        _wrong_type(c, key, str(kind))
        return {}
    out: dict[str, dict[str, Any] | None] = {}
    for field, text in c.client.hscan_iter(key, count=c.batch):
        t, text = str(field), str(text)
        out[t] = _decode(text)
        if out[t] is None:
            c.add(
                "bad-limits",
                key,
                f"{key} holds {text!r:.200} for type {t!r}: not a JSON object, so every "
                f"claim of {t!r} fails",
                "remove it (keeping the type's paused flag and groups, read from "
                f"{c.keys.paused} and {c.keys.groups(t)})",
                None,
                ("unlimit", t, text, ""),
            )
    return out


def _paused(c: Checker, rules: dict[str, dict[str, Any] | None]) -> None:
    key = c.keys.paused
    kind = c.client.type(key)
    if kind != "set":
        if kind != "none":
            _wrong_type(c, key, str(kind))
        return
    for member in c.client.sscan_iter(key, count=c.batch):
        t = str(member)
        if t in rules and rules[t] is None:
            continue  # bad-limits: its repair sets the flag
        rule = rules.get(t) or {}
        if rule.get("paused") is not True:
            c.add(
                "unheld-pause",
                c.keys.limits,
                f"type {t!r} is in {key} but its rules in {c.keys.limits} lack the paused "
                "flag: its workers go on claiming",
                "set the flag, as pausing does",
                None,
                ("hold", t, "", ""),
            )


def _lost_lane(c: Checker, t: str, flagged: bool) -> None:
    key = c.keys.groups(t)
    if flagged:
        problem = (
            f'type {t!r} has groups but {key} lacks the turn of its jobs in no group ("\\0"): '
            "they wait while any group has jobs"
        )
        repair = 'add "\\0" (score 0)'
    else:
        problem = (
            f"{key} holds groups but the rules of type {t!r} lack the groups flag: its claims "
            "do not take turns between the groups"
        )
        repair = 'set the flag and add "\\0" (score 0)'
    c.add("lost-lane", key, problem, repair, None, ("lane", t, "", ""))


def _wrong_type(c: Checker, key: str, kind: str) -> None:
    c.add("wrong-type", key, f"{key} is a {kind}, not what kue keeps there", "rename or delete it")


# -- the groups of one type -------------------------------------------------------------------
def _groups(c: Checker, t: str) -> None:
    rot = c.keys.groups(t)
    turns = {str(g) for g, _ in c.client.zscan_iter(rot, count=c.batch)} - {LANE}
    waiting: set[str] = set()  # the groups of the type's inactive jobs
    for page in pages(c, c.keys.type_state(t, "inactive")):
        waiting.update(_lost(c, t, "inactive", page))
    running: set[str] = set()
    for page in pages(c, c.keys.type_state(t, "active")):
        running.update(_lost(c, t, "active", page))
    items: list[tuple[str, str, str]] = []  # (group, state, member) to judge
    for chunk in _chunks(sorted(turns | waiting | running), c.batch):
        pipe = c.client.pipeline(transaction=False)
        for g in chunk:
            pipe.zrange(c.keys.group(t, g), 0, c.batch - 1)
            pipe.zrange(c.keys.group_active(t, g), 0, c.batch - 1)
        replies = pipe.execute(raise_on_error=False)
        for n, g in enumerate(chunk):
            for state, got in (("inactive", replies[2 * n]), ("active", replies[2 * n + 1])):
                key = _set_of(c, t, g, state)
                if isinstance(got, Exception):
                    _wrong_type(c, key, str(c.client.type(key)))
                elif len(got) < c.batch:
                    items.extend((g, state, str(m)) for m in got)
                else:  # a big set: page through it
                    for page in pages(c, key):
                        items.extend((g, state, m) for m in page)
                        if len(items) >= c.batch:
                            _stale(c, t, items)
                            items = []
            if len(items) >= c.batch:
                _stale(c, t, items)
                items = []
    _stale(c, t, items)
    for chunk in _chunks(sorted(turns - waiting), c.batch):
        _stale_turns(c, t, chunk)


def _chunks(items: list[str], size: int) -> Iterator[list[str]]:
    for i in range(0, len(items), size):
        yield items[i : i + size]


def _set_of(c: Checker, t: str, g: str, state: str) -> str:
    """The set of group ``g``'s jobs in ``state`` (inactive or active)."""
    return c.keys.group(t, g) if state == "inactive" else c.keys.group_active(t, g)


def _lost(c: Checker, t: str, state: str, members: list[str]) -> set[str]:
    """Jobs of ``members`` (of the type's ``state`` set) missing from their group's sets; the
    groups of the jobs read."""
    ids = [(m, i) for m in members if (i := member_id(m)) is not None]
    pipe = c.client.pipeline(transaction=False)
    for _, i in ids:
        pipe.hmget(c.keys.job(i), *_FIELDS)
    first = pipe.execute()
    grouped = [
        (m, i, str(h[2]))
        for (m, i), h in zip(ids, first, strict=True)
        if h[0] == t and h[1] == state and h[2]
    ]
    for m, i, g in grouped:
        pipe.zscore(_set_of(c, t, g, state), m)
        pipe.zscore(c.keys.groups(t), g)
        pipe.hmget(c.keys.job(i), *_FIELDS)
    replies = pipe.execute(raise_on_error=False)
    for n, (_, i, g) in enumerate(grouped):
        score, turn, again = replies[3 * n : 3 * n + 3]
        if any(isinstance(x, Exception) for x in (score, turn)) or again != [t, state, g]:
            continue  # a key of another type (a person must look), or the job moved on
        key = _set_of(c, t, g, state)
        if state == "active":
            if score is None:
                c.add(
                    "lost-group-active",
                    key,
                    f"job {i} is active in group {g!r} ({t}) but is not in {key}: the group's "
                    "concurrency limit does not count it",
                    "add it (score: its start)",
                    i,
                    ("group_active", str(i), "", ""),
                )
            continue
        if score is not None and turn is not None:
            continue
        where = key if score is None else c.keys.groups(t)
        c.add(
            "lost-group-job",
            where,
            f"job {i} is inactive in group {g!r} ({t}) but "
            + (f"is not in {key}" if score is None else f"its group is not in {where}")
            + ": the type's claims do not see it",
            "add it" + (" (score: its priority)" if score is None else " (its turn comes last)"),
            i,
            ("group", str(i), "", ""),
        )
    return {g for _, _, g in grouped}


def _stale(c: Checker, t: str, items: list[tuple[str, str, str]]) -> None:
    """Members of the groups' sets (``items``: group, state, member) that are not jobs of
    ``t`` in that group and state: read as ZSCORE, the job, ZSCORE; reported when the member
    stayed put."""
    if not items:
        return
    pipe = c.client.pipeline(transaction=False)
    for g, state, m in items:
        i = member_id(m)
        pipe.zscore(_set_of(c, t, g, state), m)
        pipe.hmget(c.keys.job(i if i is not None else 0), *_FIELDS)
        pipe.zscore(_set_of(c, t, g, state), m)
    replies = pipe.execute()
    for n, (g, state, m) in enumerate(items):
        key = _set_of(c, t, g, state)
        before, h, after = replies[3 * n : 3 * n + 3]
        if before is None or after is None:
            continue
        i = member_id(m)
        if i is not None and h == [t, state, g]:
            continue
        if i is None:
            why = "which is no job's member (NN|id)"
        elif h[0] is None:
            why = "whose job does not exist"
        else:
            why = f"whose job is {h[1]} ({h[0]}" + (f", group {h[2]!r})" if h[2] else ", no group)")
        inactive = state == "inactive"
        kind = "stale-group-job" if inactive else "stale-group-active"
        c.add(
            kind,
            key,
            f"{key} holds {m!r} among the jobs of group {g!r} "
            f"{'waiting' if inactive else 'running'}, {why}",
            "remove it from the set",
            i,
            ("ungroup" if inactive else "ungroup_active", m, t, g),
        )


def _stale_turns(c: Checker, t: str, groups: list[str]) -> None:
    """Groups in the rotation with no job waiting: read as ZSCORE, EXISTS, ZSCORE."""
    rot = c.keys.groups(t)
    pipe = c.client.pipeline(transaction=False)
    for g in groups:
        pipe.zscore(rot, g)
        pipe.exists(c.keys.group(t, g))
        pipe.zscore(rot, g)
    replies = pipe.execute()
    for n, g in enumerate(groups):
        before, exists, after = replies[3 * n : 3 * n + 3]
        if before is None or before != after or exists:
            continue
        c.add(
            "stale-group",
            rot,
            f"{rot} holds group {g!r}, which has no job waiting",
            "remove it from the rotation",
            None,
            ("unturn", t, g, ""),
        )
