"""kue doctor's look at the runs of fan-out jobs (see :mod:`kue_core.runs`): a running run
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

An active fan-out job has no job lease (its runs have theirs): the check of stuck jobs leaves
it to these. Each suspect is read twice and reported only when both reads agree.
"""

from __future__ import annotations

import json
from typing import Any

from .doctor_checker import Checker


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
    for key in c.client.scan_iter(match=c.keys.match("job:*:runs"), count=c.batch):
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
