"""kue doctor's look at suspended jobs (see :mod:`kue_core.features.signals`): a job waits in
state ``suspended`` for the signal its ``suspended`` field names, until that signal or the
wait's deadline. Our scripts write both in one call; a hand edit, a partial restore or a Redis
that lost writes can leave a job whose wait can never end.

``lost-wait``
    a suspended job whose ``suspended`` field is gone or unreadable (no signal can resume it,
    its timeout cannot tell what to do), or that has the signal it waits for already (the
    signal came, and nothing resumed it). Repair: it waits for a worker again (its history
    says ``by: doctor``); its handler sees its signals and decides.

Each suspect is read twice, and reported only when both reads agree, so that a job resumed
or suspended while the check runs is not reported.
"""

from __future__ import annotations

import json
from typing import Any

from ..features.signals import FIELD
from .checker import Checker, member_id, pages


def check(c: Checker) -> None:
    """Add the suspended jobs' findings to ``c``'s report."""
    for page in pages(c, c.keys.state("suspended")):
        ids = [i for i in map(member_id, page) if i is not None]
        first = _read(c, ids)
        again = _read(c, ids)
        for job_id, h, h2 in zip(ids, first, again, strict=True):
            if h != h2 or not isinstance(h, list) or h[0] != "suspended":
                continue  # it moved meanwhile, or is not suspended (the index check says so)
            problem = _stuck(h[1], h[2])
            if problem:
                c.add(
                    "lost-wait",
                    c.keys.job(job_id),
                    f"job {job_id} is suspended but {problem}: nothing will resume it",
                    "make it wait for a worker again",
                    job_id,
                    ("resume", str(job_id), "", ""),
                )


def _read(c: Checker, ids: list[int]) -> list[Any]:
    """Each job's state, its wait, and the signal it waits for (None: not there)."""
    pipe = c.client.pipeline(transaction=False)
    for job_id in ids:
        pipe.hmget(c.keys.job(job_id), ["state", "suspended"])
    waits = pipe.execute(raise_on_error=False)
    pipe = c.client.pipeline(transaction=False)
    for job_id, h in zip(ids, waits, strict=True):
        pipe.hget(c.keys.job(job_id), FIELD + str(_name(h[1] if isinstance(h, list) else None)))
    found = pipe.execute(raise_on_error=False)
    return [[*h, got] if isinstance(h, list) else h for h, got in zip(waits, found, strict=True)]


def _name(text: str | None) -> str | None:
    try:
        wait = json.loads(text) if text else None
    except ValueError:
        return None
    name = wait.get("name") if isinstance(wait, dict) else None
    return name if isinstance(name, str) and name else None


def _stuck(wait: str | None, signal: str | None) -> str:
    """Why a suspended job's wait cannot end ('' when it can)."""
    if _name(wait) is None:
        return "its wait (field suspended) is gone or unreadable"
    if signal is not None:
        return f"it has the signal {_name(wait)} it waits for"
    return ""
