"""kue doctor's look at the runs of fan-out jobs (see :mod:`kue_core.features.runs`): a running run
holds a lease in ``<p>:run-leases`` (member ``<id>@<worker>``) and a lease there is a running
run's. Our scripts change them with the run in one call; hand edits, a partial restore or a
Redis that lost writes can leave them apart.

``run-without-lease``
    a running run of an active fan-out job with no lease: lease recovery never finds it lost,
    and its place stays taken. Repair: give it an expired lease (recovery then makes it lost
    and opens its place again).
``stray-run-lease``
    a run lease whose run is not running (or whose job is gone). Repair: drop it.
``orphan-runs``
    the runs hash of a job that does not exist (found with the jobs' other keys, see
    ``doctor._lists``). Repair: delete it.
``unoffered-run-place``
    an active fan-out job with a place open (fewer runs complete and running than it needs,
    and than ``at_once``) that is offered to no one who may take it: not in
    ``<p>:open:<type>`` (a job for any worker), or missing from the places of one of its
    workers that may run it (no run of theirs, or a failed or lost one). No claim sees it and
    it never ends. Repair: offer its places again (waking those workers).
``stale-open-place``
    a member of ``<p>:open:<type>`` that is not an active fan-out job of that type for any
    worker, or of ``<p>:late:<type>`` that is not an unfinished late-joiners job of that type
    (claims drop such members as they meet them, but a type no one claims keeps them).
    Repair: remove it.

An active fan-out job has no job lease (its runs have theirs): the check of stuck jobs leaves
it to these. Each suspect is read twice and reported only when both reads agree.
"""

from __future__ import annotations

import json
from typing import Any

from .. import defaults
from ..base.keys import zid
from ..features.pins import workers_of
from .checker import Checker, member_id, pages

#: The fields of a job its offered places are checked with.
_FIELDS = ("state", "type", "fan_out", "at_once", "runs_done", "only", "late")


def check(c: Checker) -> None:
    """Add the runs' findings to ``c``'s report."""
    leases = {str(m): s for m, s in c.client.zscan_iter(c.keys.run_leases, count=c.batch)}
    for member in leases:
        job_id, _, worker = member.partition("@")
        if not _running(c, job_id, worker) and not _running(c, job_id, worker):
            if c.client.zscore(c.keys.run_leases, member) is None:
                continue  # recovered or ended meanwhile
            c.add(
                "stray-run-lease",
                c.keys.run_leases,
                f"{c.keys.run_leases} holds {member!r}, whose run is not running",
                "drop the lease",
                int(job_id) if job_id.isdigit() else None,
                ("unrunlease", member, "", ""),
            )
    for key in c.client.scan_iter(
        match=c.keys.match("job:*:runs"), count=defaults.DOCTOR_SCAN_COUNT
    ):
        parsed = c.keys.job_key(str(key))
        if parsed is None or parsed[1] != "runs":
            continue
        job_id = str(parsed[0])
        for worker, run in _runs(c, job_id).items():
            if run.get("state") != "running":
                continue
            member = f"{job_id}@{worker}"
            if c.client.zscore(c.keys.run_leases, member) is not None:
                continue
            if not _running(c, job_id, worker):
                continue  # it ended meanwhile
            if c.client.zscore(c.keys.run_leases, member) is not None:
                continue
            c.add(
                "run-without-lease",
                str(key),
                f"the run of job {job_id} on {worker!r} is running but has no lease in "
                f"{c.keys.run_leases}: recovery never finds it lost",
                "give it an expired lease (recovery then opens its place again)",
                int(job_id),
                ("runlease", job_id, worker, ""),
            )
        missing = _unoffered(c, job_id) and _unoffered(c, job_id)
        if missing:
            c.add(
                "unoffered-run-place",
                missing,
                f"job {job_id} has a run place open that {missing} does not offer: no claim "
                "sees it, and it never ends",
                "offer its open places again",
                int(job_id),
                ("offer", job_id, "", ""),
            )
    for kind in ("open", "late"):
        for key in c.client.scan_iter(
            match=c.keys.match(f"{kind}:*"), count=defaults.DOCTOR_SCAN_COUNT, _type="zset"
        ):
            for page in pages(c, str(key)):
                _stale(c, str(key), page)


def orphan(c: Checker, job_id: int) -> None:
    """The runs hash of job ``job_id``, which does not exist."""
    key = c.keys.runs(job_id)
    c.add(
        "orphan-runs",
        key,
        f"{key} holds the runs of job {job_id}, which does not exist",
        "delete it",
        job_id,
        ("unlog", str(job_id), "runs", ""),
    )


def _runs(c: Checker, job_id: str) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    if c.client.type(c.keys.runs(int(job_id))) != "hash":
        return out
    for worker, text in c.client.hgetall(c.keys.runs(int(job_id))).items():
        try:
            run = json.loads(text)
        except ValueError:
            continue
        if isinstance(run, dict):
            out[str(worker)] = run
    return out


def _running(c: Checker, job_id: str, worker: str) -> bool:
    """Whether the run of ``worker`` of job ``job_id`` runs, in an active job."""
    if not job_id.isdigit() or c.client.hget(c.keys.job(int(job_id)), "state") != "active":
        return False
    return _runs(c, job_id).get(worker, {}).get("state") == "running"


def _unoffered(c: Checker, job_id: str) -> str | None:
    """The key that should offer a place of active fan-out job ``job_id`` and does not (see
    lib/runs.lua ``runs_offer``), or None."""
    h: Any = c.client.hmget(c.keys.job(int(job_id)), *_FIELDS)
    if h[0] != "active" or h[1] is None or not str(h[2] or "").isdigit():
        return None
    runs = _runs(c, job_id)
    k = int(h[2])
    at_once = int(h[3]) if str(h[3] or "").isdigit() else k
    done = int(h[4]) if str(h[4] or "").isdigit() else 0
    running = sum(1 for run in runs.values() if run.get("state") == "running")
    if min(k - done, at_once) - running <= 0:
        return None
    member = zid(int(job_id))
    if h[5] is None:
        key = c.keys.open(h[1])
        return None if c.client.zscore(key, member) is not None else key
    for w in workers_of(h[5]):
        if runs.get(w, {}).get("state") in (None, "failed", "lost"):
            key = c.keys.places(h[1], w)
            if c.client.zscore(key, member) is None:
                return key
    return None


def _belongs(c: Checker, key: str, job_id: int | None) -> bool:
    """Whether open or late set ``key`` may hold job ``job_id`` (see repair.lua unopen)."""
    if job_id is None:
        return False
    h: Any = c.client.hmget(c.keys.job(job_id), *_FIELDS)
    if h[1] is None or h[2] is None:
        return False
    if key == c.keys.open(h[1]):
        return h[0] == "active" and h[5] is None
    return key == c.keys.late(h[1]) and h[0] not in ("complete", "failed") and h[6] is not None


def _stale(c: Checker, key: str, page: list[str]) -> None:
    """Members of open or late set ``key`` whose job does not belong there (read twice)."""
    for member in page:
        job_id = member_id(member)
        if _belongs(c, key, job_id) or _belongs(c, key, job_id):
            continue
        if c.client.zscore(key, member) is None:
            continue  # a claim took it out meanwhile
        c.add(
            "stale-open-place",
            key,
            f"{key} holds {member!r}, which is not a fan-out job that may be offered there",
            "remove it",
            job_id,
            ("unopen", c.keys.name(key), member, ""),
        )
