"""Jobs a worker process holds in Redis without knowing it: a claim that ran, but whose reply
never came back (the connection was cut at that moment, or Redis restarted with the claim in
its append-only file). Such a job is ``active`` under this process's id, and the process's
lease, which it renews, holds it: nothing else would ever give it back while the process
lives. So once a call of this process has failed for want of Redis, and a lease has passed
since (a claim on its way is by then either a job running here or one of these), the keeper
looks at the active jobs once (:func:`strays`) and gives back each one that is this process's,
claimed before that lease, and not running here (``release.lua``: fenced by its token, no
attempt counted)."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from ..base.keys import Keys, job_id_from_zid
from ..base.values import text
from ..store.calls import Op, read, server_now


def strays(
    keys: Keys, worker_id: str, running: Collection[int], older_ms: int
) -> Op[list[tuple[int, str]]]:
    """The (job id, token) of the active jobs claimed for ``worker_id`` at least
    ``older_ms`` ago that are not among ``running`` (an operation: two plain reads)."""
    now = yield from server_now()
    (members,) = yield read(("ZRANGE", keys.state("active"), 0, -1))
    ids = [job_id_from_zid(text(m)) for m in members]
    if not ids:
        return []
    rows: list[Any] = yield read(
        *(("HMGET", keys.job(i), "workerId", "lease", "started_at", "fan_out") for i in ids)
    )
    found = []
    for job_id, (worker, token, started, fan_out) in zip(ids, rows, strict=True):
        if worker is None or token is None or fan_out is not None or job_id in running:
            continue  # a fan-out job's runs have leases of their own
        # At least ``older_ms`` ago (not more): both times are whole ms of the server's clock,
        # and a keeper that looks a lease after the failure, to the ms, sees a claim made just
        # before it as exactly a lease old; it looks once.
        if text(worker) == worker_id and int(text(started or "0")) <= now - older_ms:
            found.append((job_id, text(token)))
    return found
