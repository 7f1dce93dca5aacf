"""kue doctor's look at pinned jobs (see :mod:`kue_core.features.pins`): each job in state
``pinned``
must be in ``<p>:places:<type>:<worker>`` of each worker of its ``only``, and those sets must
hold nothing else. Our scripts change them with the job in one call; hand edits, a partial
restore or a Redis that lost writes can leave them apart.

``lost-pinned-job``
    a pinned job missing from the places of one of its workers: that worker's claims do not
    see it. Repair: add it (score: its priority), and wake the worker.
``unpinned-job``
    a job in state ``pinned`` whose ``only`` names no worker: no claim can find it. Repair:
    it waits inactive, for any worker.
``stale-pinned-job``
    a member of a worker's places that is not a pinned job of that type and worker, nor an
    active fan-out job of theirs (whose open places are there: see kue_core/features/runs.py),
    nor an inactive job that prefers that worker (see kue_core/features/pins.py) (claims
    skip and drop such members, but one a worker never claims from stays). Repair: remove it.

The check reads the pinned jobs (``<p>:jobs:pinned``) and the keys ``<p>:places:*`` (one SCAN
of the keyspace, as the check of the jobs makes). Each suspect is read twice around its set
entry and reported only when both reads agree, so that a job claimed or saved while the check
runs is not reported.
"""

from __future__ import annotations

from typing import Any

from .. import defaults
from ..base.keys import zid
from ..features.pins import workers_of
from .checker import Checker, member_id, pages

_FIELDS = ("type", "state", "only", "fan_out", "prefer")


def check(c: Checker) -> None:
    """Add the pinned jobs' findings to ``c``'s report."""
    for page in pages(c, c.keys.state("pinned")):
        _jobs(c, page)
    for key in c.client.scan_iter(
        match=c.keys.match("places:*"), count=defaults.DOCTOR_SCAN_COUNT, _type="zset"
    ):
        for page in pages(c, str(key)):
            _members(c, str(key), page)


def _read(c: Checker, ids: list[int]) -> list[list[Any]]:
    pipe = c.client.pipeline(transaction=False)
    for job_id in ids:
        pipe.hmget(c.keys.job(job_id), _FIELDS)
    return pipe.execute(raise_on_error=False)


def _jobs(c: Checker, page: list[str]) -> None:
    """Pinned jobs missing from their workers' places, or with no worker."""
    ids = [i for i in map(member_id, page) if i is not None]
    first = _read(c, ids)
    pipe = c.client.pipeline(transaction=False)
    wanted: list[tuple[int, str]] = []
    for job_id, h in zip(ids, first, strict=True):
        if not isinstance(h, list) or h[1] != "pinned":
            continue  # not pinned (doctor's index check says so), or gone
        for w in workers_of(h[2]) or [""]:  # "": it has none
            wanted.append((job_id, w))
            pipe.zscore(c.keys.places(h[0], w), zid(job_id))
    found = pipe.execute(raise_on_error=False)
    again = dict(zip(ids, _read(c, ids), strict=True))
    before = dict(zip(ids, first, strict=True))
    for (job_id, w), score in zip(wanted, found, strict=True):
        if again.get(job_id) != before.get(job_id):
            continue  # it changed meanwhile
        jtype = before[job_id][0]
        if not w:
            c.add(
                "unpinned-job",
                c.keys.state("pinned"),
                f"job {job_id} is pinned but names no worker to wait for: no claim finds it",
                "make it inactive, for any worker",
                job_id,
                ("pin", str(job_id), "", ""),
            )
        elif score is None:
            key = c.keys.places(jtype, w)
            c.add(
                "lost-pinned-job",
                key,
                f"job {job_id} is pinned to {w!r} but missing from {key}: its claims miss it",
                "add it there (score: its priority)",
                job_id,
                ("pin", str(job_id), "", ""),
            )


def _members(c: Checker, key: str, page: list[str]) -> None:
    """Members of a worker's places that are not pinned jobs of that type and worker."""
    ids = {m: i for m in page if (i := member_id(m)) is not None}
    order = list(ids.values())
    first = dict(zip(order, _read(c, order), strict=True))
    pipe = c.client.pipeline(transaction=False)
    for member in page:
        pipe.zscore(key, member)
    present = pipe.execute()
    second = dict(zip(order, _read(c, order), strict=True))
    for member, score in zip(page, present, strict=True):
        job_id = ids.get(member)
        h = first.get(job_id) if job_id is not None else None
        if score is None or (job_id is not None and second.get(job_id) != h):
            continue  # gone from the set, or the job changed meanwhile
        if _belongs(c, key, h):
            continue
        c.add(
            "stale-pinned-job",
            key,
            f"{key} holds {member!r}, which is not a job pinned to that worker and waiting",
            "remove it from the set",
            job_id,
            ("unpin", c.keys.name(key), member, ""),
        )


def _belongs(c: Checker, key: str, h: Any) -> bool:
    """Whether the places ``key`` may hold the job (``h``: its _FIELDS): a pinned job of that
    worker's, an active fan-out job's open place for it (see kue_core/features/runs.py), or a job
    waiting inactive that prefers that worker (see kue_core/features/pins.py)."""
    if not isinstance(h, list) or h[0] is None:
        return False
    if h[1] == "inactive" and any(c.keys.places(h[0], w) == key for w in workers_of(h[4])):
        return True
    if h[1] != "pinned" and not (h[1] == "active" and h[3] is not None):
        return False
    return any(c.keys.places(h[0], w) == key for w in workers_of(h[2]))
