"""Tags, tracking, dependencies and pins for asyncio code: part of ``AsyncQueue``
(:mod:`kue_core.aio`), each method running the operation ``Queue``'s runs
(:mod:`kue_core.jobs.record_ops`)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from .. import defaults
from ..base import payloads
from ..base.keys import Keys
from ..base.payloads import Offload
from ..features import audit, bulk, history, offloads, retention, rotation
from ..features.rotation import Rotated
from ..features.search import Found
from ..jobs import flow_tree as trees
from ..jobs import record_ops

if TYPE_CHECKING:
    from ..jobs.aio_job import AsyncJob
    from ..store.aio_transport import AsyncTransport


class AsyncRecords:
    """Mixed into ``AsyncQueue``; see ``Queue``'s methods of the same names."""

    keys: Keys
    scripts: AsyncTransport
    offload: Offload | None

    if TYPE_CHECKING:

        def _loaded(
            self, job_id: int, h: dict[str, str], runs: dict[str, str] | None
        ) -> AsyncJob: ...

    async def rotate_keys(
        self,
        *,
        steps: int | None = None,
        batch: int = defaults.ROTATE_BATCH,
        from_start: bool = False,
    ) -> Rotated:
        ring = rotation.ring_of(self, steps, batch, from_start)
        return await self.scripts.drive(
            rotation.rotate(self.keys, ring, steps, batch, from_start, self.offload)
        )

    # -- tags and tracking ------------------------------------------------------------------
    async def tagged(self, tag: str, offset: int = 0, count: int = 25) -> Found:
        return await self.scripts.drive(record_ops.tagged(self.keys, tag, offset, count))

    async def tags(self, offset: int = 0, count: int = 100) -> dict[str, int]:
        return await self.scripts.drive(record_ops.tags(self.keys, offset, count))

    async def tag_count(self) -> int:
        return await self.scripts.drive(record_ops.tag_count(self.keys))

    async def tag(self, job_id: int | str, *tags: str) -> AsyncJob:
        """Add tags to a saved job; returns it as it is now."""
        return await self._retagged(job_id, "tag", tags)

    async def untag(self, job_id: int | str, *tags: str) -> AsyncJob:
        """Remove tags from a saved job; returns it as it is now."""
        return await self._retagged(job_id, "untag", tags)

    async def track(self, job_id: int | str, on: bool = True) -> AsyncJob:
        """Track a job (or stop, with ``on=False``)."""
        return await self._retagged(job_id, "track" if on else "untrack", ())

    async def tracked(self) -> list[AsyncJob]:
        return await self.scripts.drive(record_ops.tracked(self))

    async def _retagged(self, job_id: int | str, what: str, tags: Iterable[str]) -> AsyncJob:
        return await self.scripts.drive(record_ops.retagged(self, job_id, what, tags))

    # -- dependencies, runs, pins -----------------------------------------------------------
    async def dependencies(self, job_id: int | str) -> list[dict[str, Any]]:
        return await self.scripts.drive(record_ops.dependencies(self.keys, job_id))

    async def dependents(self, job_id: int | str) -> list[dict[str, Any]]:
        return await self.scripts.drive(record_ops.dependents(self.keys, job_id))

    async def children_results(self, job_id: int | str) -> dict[int, Any]:
        stored = await self.scripts.drive(record_ops.children_results(self.keys, job_id))
        slow = self.offload is not None and self.offload.slow  # (S3: read off the loop)
        if slow and any(v.startswith(payloads.PREFIX) for v in stored.values()):
            return await asyncio.to_thread(record_ops.results_of, stored, self)
        return record_ops.results_of(stored, self)

    async def bulk_count(self, filter: dict[str, Any]) -> int:
        return await self.scripts.drive(bulk.count(self.keys, filter))

    async def bulk_match(self, filter: dict[str, Any], examples: int = 5) -> dict[str, Any]:
        matched, ids = await self.scripts.drive(bulk.match(self.keys, filter, examples))
        return {"matched": matched, "examples": ids}

    async def bulk(
        self,
        action: str,
        filter: dict[str, Any],
        *,
        reason: str = "",
        run_id: str | None = None,
        expect: int | None = None,
    ) -> dict[str, Any]:
        return await self.scripts.drive(bulk.run(self.keys, action, filter, run_id, reason, expect))

    async def bulk_status(self, run_id: str) -> dict[str, Any]:
        return await self.scripts.drive(bulk.status(self.keys, run_id))

    async def stop_bulk(self, run_id: str) -> dict[str, Any]:
        return await self.scripts.drive(bulk.stop(self.keys, run_id))

    async def stats_history(self, job_type: str | None = None, span: str = "24h") -> dict[str, Any]:
        return await self.scripts.drive(history.series(self.keys, job_type, span))

    async def sample_history(self) -> bool:
        return await self.scripts.drive(history.sample(self.keys))

    async def audit(
        self,
        count: int = 100,
        before: str | None = None,
        action: str | None = None,
        who: str | None = None,
        since: int | None = None,
    ) -> list[dict[str, Any]]:
        op = audit.entries(self.keys, count, before, action, who, since)
        return await self.scripts.drive(op)

    async def add_audit(self, entry: dict[str, Any]) -> str:
        return await self.scripts.drive(audit.add(self.keys, entry))

    async def sweep_payloads(self, batch: int = defaults.PAYLOAD_SWEEP_BATCH) -> int:
        store = self.offload.store if self.offload is not None else None
        if store is None:
            return 0
        names = await self.scripts.drive(offloads.take(self.keys, batch))
        try:
            await asyncio.to_thread(store.delete, names)
        except BaseException:
            await self.scripts.drive(offloads.put_back(self.keys, names))
            raise
        return len(names)

    async def flow_tree(
        self,
        job_id: int | str,
        start: int | str | None = None,
        offset: int = 0,
        limit: int = trees.LIMIT,
        children: int = trees.CHILDREN,
    ) -> dict[str, Any]:
        op = trees.flow_tree(self.keys, job_id, start, offset, limit, children)
        return await self.scripts.drive(op)

    async def runs(self, job_id: int | str) -> list[dict[str, Any]]:
        """The runs of a saved fan-out job (see ``Job.runs``)."""
        return await self.scripts.drive(record_ops.job_runs(self.keys, job_id))

    async def set_only(self, job_id: int | str, workers: Iterable[str] | None) -> AsyncJob:
        """Change which workers may run a saved job (None: any worker); see
        :func:`kue_core.jobs.record_ops.set_only`. Returns the job as it is now."""
        return await self.scripts.drive(record_ops.set_only(self, job_id, workers))

    # -- retention (see Queue.retention, set_retention, memory) ------------------------------
    async def retention(self) -> dict[str, dict[str, Any]]:
        return await self.scripts.drive(retention.get(self.keys))

    async def set_retention(self, **policies: Any) -> dict[str, dict[str, Any]]:
        return await self.scripts.drive(retention.put(self.keys, policies))

    async def memory(self) -> dict[str, Any]:
        return await self.scripts.drive(retention.memory())
