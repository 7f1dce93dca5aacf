"""kue doctor's look at the payload store (see :mod:`kue_core.base.payloads`): the values the
jobs hold there (each job's ``payloads`` field) against the values the store has under the
queue's prefix.

``orphan-payload``
    a value in the store that no job holds and that is not in the trash, written longer ago
    than the doctor's grace: a save that stopped between writing its value and saving its job,
    or a job deleted by something other than our scripts. Repair: delete it from the store.
``missing-payload``
    a job that holds a value the store does not have (deleted by hand, or a store restored from
    an older backup): its data or result cannot be read, and a worker fails it. A person must
    look: give the job new data (``update_data``), or remove it.
``payload-store``
    jobs hold values in a payload store, and this process was given none
    (``KUE_PAYLOAD_STORE``): the check needs it. Nothing to repair here.
"""

from __future__ import annotations

import json
import time
from typing import cast

from .. import defaults
from ..base.payloads import PayloadStore
from .checker import Checker

#: The repair action that deletes a value from the store (run here, not in ``repair.lua``:
#: a script cannot reach the store).
UNSTORE = "unstore"


def check(c: Checker) -> None:
    """Add the payload store's findings to ``c``'s report."""
    held = _held(c)
    store = c.offload.store if c.offload is not None else None
    if store is None:
        if held:
            c.add(
                "payload-store",
                c.keys.payload_trash,
                f"{len(held)} values of jobs are in a payload store, and this process has none",
                "none here: run kue doctor with KUE_PAYLOAD_STORE to check them",
            )
        return
    trash = {str(n) for n in c.client.lrange(c.keys.payload_trash, 0, -1)}
    present = dict(store.names(c.keys.prefix))
    for name, (job_id, field) in held.items():
        if name not in present:
            c.add(
                "missing-payload",
                c.keys.job(job_id),
                f"job {job_id} holds its {field} in the payload store as {name}, and the "
                "store does not have it",
                "none: a person must look (give the job new data, or remove it)",
                job_id=job_id,
            )
    oldest = time.time() - c.grace / 1000
    for name, at in present.items():
        if name not in held and name not in trash and at < oldest:
            c.add(
                "orphan-payload",
                name,
                f"the payload store holds {name}, which no job holds: a save that stopped "
                "after writing it, or a job deleted without kue's scripts",
                "delete it from the store",
                action=(UNSTORE, name, "", ""),
            )


def unstore(store: PayloadStore | None, names: list[str]) -> list[bool]:
    """Delete these values from the store; for each, whether it could be."""
    if store is None:
        return [False] * len(names)
    store.delete(names)
    return [True] * len(names)


def _held(c: Checker) -> dict[str, tuple[int, str]]:
    """The values the jobs hold in the store: name -> (job id, field)."""
    held: dict[str, tuple[int, str]] = {}
    ids: list[int] = []
    for key in c.client.scan_iter(match=c.keys.match("job:*"), count=defaults.DOCTOR_SCAN_COUNT):
        parsed = c.keys.job_key(str(key))
        if parsed is not None and not parsed[1]:
            ids.append(parsed[0])
    for start in range(0, len(ids), c.batch):
        chunk = ids[start : start + c.batch]
        pipe = c.client.pipeline(transaction=False)
        for job_id in chunk:
            pipe.hget(c.keys.job(job_id), "payloads")
        for job_id, text in zip(chunk, pipe.execute(raise_on_error=False), strict=True):
            if not isinstance(text, str):
                continue  # none, or not a hash (the jobs' check reports that)
            try:
                found = json.loads(text)
            except ValueError:
                continue
            if isinstance(found, dict):
                for field, name in found.items():
                    if isinstance(name, str):
                        held[name] = (job_id, cast(str, field))
    return held
