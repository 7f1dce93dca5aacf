"""kue doctor's look at job dependencies (see :mod:`kue_core.features.flows`): blocked jobs, each
job's ``deps``, ``dependents`` and ``results`` keys, and ``<p>:awaited``. Our scripts keep them
exact; Node Kue clients, which know nothing of them, leave keys behind when they remove a job, and
end jobs others wait for without telling those (the dependencies sweep finds them later).

``stuck-blocked``
    a job blocked that waits for no job: every job it depends on is done (each member of
    ``<p>:job:<id>:deps`` scored 1), or that zset is gone. The script that did the last of them
    should have released it. Repair: release it as that script does (inactive, or delayed while
    its due time is ahead).
``orphan-deps``
    ``<p>:job:<id>:deps``, ``:dependents`` or ``:results`` of a job that does not exist (Node
    Kue removes a job's hash, log and history only). Repair: delete it.
``stale-dependent``
    a member of ``<p>:job:<id>:dependents`` whose job is gone, or does not list job ``<id>`` in
    its deps. Repair: remove the member.
``stale-awaited``
    a member of ``<p>:awaited`` whose job has ended (complete, failed) or is gone: a Node Kue
    client ended it, and the dependencies sweep, which every worker runs now and then, has not
    seen it yet (or no worker runs); the jobs waiting for it wait meanwhile. Repair: what the
    sweep does for it: they follow it (released when it completed; their failure policy when it
    failed or is gone).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Protocol, cast

from ..base.keys import zid
from ..store import calls
from . import checker
from .judging import job_of_member

if TYPE_CHECKING:
    pass

#: The parts of a job's keys that hold its dependencies (``orphan-deps``), as Keys names them.
PARTS = ("deps", "dependents", "results")


class Checker(checker.Checker, Protocol):
    """What this module needs of ``doctor._Check`` besides the common part."""

    #: ids of the jobs the check saw blocked
    blocked: list[int]
    #: ids of the jobs with a ``dependents`` key
    dependents: list[int]


def check(c: Checker) -> None:
    """Add the dependency findings to ``c``'s report (orphan keys are found with the logs,
    by ``doctor._Check._lists``: see :func:`orphan`)."""
    _blocked(c)
    _dependents(c)
    _awaited(c)


def orphan(c: Checker, job_id: int, part: str) -> None:
    """A dependencies key (``part``, one of :data:`PARTS`) of a job that does not exist."""
    key = cast(str, getattr(c.keys, part)(job_id))
    c.add(
        "orphan-deps",
        key,
        f"{key} holds the {part} of job {job_id}, which does not exist",
        "delete it",
        job_id,
        ("unlog", str(job_id), part, ""),
    )


def _chunks(items: Sequence[int], size: int) -> Iterator[Sequence[int]]:
    for i in range(0, len(items), size):
        yield items[i : i + size]


def _blocked(c: Checker) -> None:
    for chunk in _chunks(sorted(set(c.blocked)), c.batch):
        screen = calls.screen(c.keys, "blocked", [zid(i) for i in chunk], [])
        for member in c.scripts.call(screen).suspects:
            job_id = cast(int, job_of_member(member))
            c.add(
                "stuck-blocked",
                c.keys.job(job_id),
                f"job {job_id} is blocked but waits for no job: every job it depends on is "
                "done (or its list of them is gone)",
                "release it (inactive, or delayed while its due time is ahead)",
                job_id,
                ("unblock", str(job_id), "", ""),
            )


def _dependents(c: Checker) -> None:
    """The members of the ``dependents`` sets of existing jobs (those of jobs that do not
    exist are orphans, deleted whole)."""
    for chunk in _chunks(sorted(set(c.dependents)), c.batch):
        pipe = c.client.pipeline(transaction=False)
        for owner in chunk:
            pipe.exists(c.keys.job(owner))
            pipe.type(c.keys.dependents(owner))
        replies = pipe.execute()
        for owner, exists, kind in zip(chunk, replies[::2], replies[1::2], strict=True):
            if exists and kind == "set":
                key = c.keys.dependents(owner)
                page: list[str] = []
                for member in c.client.sscan_iter(key, count=c.batch):
                    page.append(str(member))
                    if len(page) == c.batch:
                        _judge_dependents(c, owner, key, page)
                        page = []
                _judge_dependents(c, owner, key, page)


def _judge_dependents(c: Checker, owner: int, key: str, members: list[str]) -> None:
    if not members:
        return
    suspects = c.scripts.call(calls.screen(c.keys, c.keys.name(key), members, [])).suspects
    for member in suspects:
        if not (member.isascii() and member.isdigit()):
            why = "which is no job's id"
        elif c.client.hget(c.keys.job(int(member)), "type") is None:
            why = "which does not exist"
        else:
            why = f"which does not depend on job {owner}"
        c.add(
            "stale-dependent",
            key,
            f"{key} lists job {member} among the jobs that depend on job {owner}, {why}",
            "remove it from the set",
            owner,
            ("undepend", str(owner), member, ""),
        )


def _awaited(c: Checker) -> None:
    key = c.keys.awaited
    if c.client.type(key) != "zset":
        return  # a wrong type is doctor's wrong-type finding
    page: list[str] = []
    for member, _ in c.client.zscan_iter(key, count=c.batch):
        page.append(str(member))
        if len(page) == c.batch:
            _judge_awaited(c, key, page)
            page = []
    _judge_awaited(c, key, page)


def _judge_awaited(c: Checker, key: str, members: list[str]) -> None:
    if not members:
        return
    suspects = c.scripts.call(calls.screen(c.keys, "awaited", members, [])).suspects
    for member in suspects:
        job_id = job_of_member(member)
        if job_id is None:
            c.add(
                "stale-awaited",
                key,
                f"{key} holds {member!r}, which is no job's member (NN|id)",
                "remove it",
                None,
                ("sweep", member, "", ""),
            )
            continue
        state = cast("str | None", c.client.hget(c.keys.job(job_id), "state"))
        what = "is gone" if state is None else f"is {state}"
        c.add(
            "stale-awaited",
            key,
            f"job {job_id} {what}, but is still in {key}: the jobs that depend on it have not "
            "followed it yet (the dependencies sweep has not seen it)",
            "let them follow it, as the sweep does (released if it completed; else their "
            "failure policy)",
            job_id,
            ("sweep", member, "", ""),
        )
