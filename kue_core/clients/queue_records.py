"""The queue's side of job records (see :mod:`kue_core.features.records`): search, tags, tracking,
retention. Part of ``Queue``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import redis

from .. import defaults
from ..base.keys import Keys
from ..base.payloads import Offload
from ..features import audit, bulk, history, offloads, retention, rotation, search
from ..features.rotation import Rotated
from ..features.search import Found
from ..jobs import flow_tree as trees
from ..jobs import journal, record_ops
from ..store.transport import Transport

if TYPE_CHECKING:
    from ..jobs.job import Job


class QueueRecords:
    """Mixed into ``Queue``."""

    client: redis.Redis
    keys: Keys
    scripts: Transport
    offload: Offload | None

    if TYPE_CHECKING:  # Queue's

        def get_job(self, job_id: int | str) -> Job: ...
        def get_jobs(self, ids: Sequence[int]) -> list[Job]: ...

    def search(
        self,
        text: str,
        *,
        state: str | None = None,
        job_type: str | None = None,
        offset: int = 0,
        count: int = 25,
    ) -> Found:
        """Ids of the jobs found by every word of ``text`` (the last may be a word's start),
        newest first, from rank ``offset``: words of their type, ``data.title``, search keys
        and tags (see :mod:`kue_core.features.search`); optionally only in ``state`` and of
        ``job_type``. A job id typed as the text comes first. ``.total`` counts them all."""
        return self.scripts.drive(search.query(self.keys, text, state, job_type, offset, count))

    def rotate_keys(
        self,
        *,
        steps: int | None = None,
        batch: int = defaults.ROTATE_BATCH,
        from_start: bool = False,
    ) -> Rotated:
        """Put every stored job's encrypted values under the queue's newest key (the first of
        its ``encryption_keys``), ``batch`` jobs a step, up to ``steps`` steps (None: to the
        last job), going on from where the last rotation to that key stopped (unless
        ``from_start``). Safe beside running workers and producers, and to interrupt (see
        :mod:`kue_core.features.rotation`)."""
        ring = rotation.ring_of(self, steps, batch, from_start)
        return self.scripts.drive(
            rotation.rotate(self.keys, ring, steps, batch, from_start, self.offload)
        )

    def history(self, job_id: int | str) -> list[dict[str, Any]]:
        """The job's recent transitions, oldest first: ``{"state", "at", ...}`` each."""
        return self.scripts.drive(journal.history(self, job_id))  # type: ignore[arg-type]

    # -- records: tags, tracking, retention (see kue_core.features.records) ------------------------
    def tagged(self, tag: str, offset: int = 0, count: int = 25) -> Found:
        """Ids of the jobs with ``tag``, most recently tagged first, from rank ``offset``."""
        return self.scripts.drive(record_ops.tagged(self.keys, tag, offset, count))

    def tags(self, offset: int = 0, count: int = 100) -> dict[str, int]:
        """Tags in use and how many jobs have each, most used first, from rank ``offset``;
        ``tag_count()`` tells how many tags there are."""
        return self.scripts.drive(record_ops.tags(self.keys, offset, count))

    def tag_count(self) -> int:
        """How many distinct tags are in use."""
        return self.scripts.drive(record_ops.tag_count(self.keys))

    def tag(self, job_id: int | str, *tags: str) -> Job:
        """Add tags to a saved job; returns it as it is now."""
        return self.scripts.drive(record_ops.retagged(self, job_id, "tag", tags))  # type: ignore[arg-type]

    def untag(self, job_id: int | str, *tags: str) -> Job:
        """Remove tags from a saved job; returns it as it is now."""
        return self.scripts.drive(record_ops.retagged(self, job_id, "untag", tags))  # type: ignore[arg-type]

    def track(self, job_id: int | str, on: bool = True) -> Job:
        """Track a job (or stop, with ``on=False``); see :meth:`Job.track`."""
        what = "track" if on else "untrack"
        return self.scripts.drive(record_ops.retagged(self, job_id, what))  # type: ignore[arg-type]

    def tracked(self) -> list[Job]:
        """The tracked jobs, most recently tracked first."""
        return self.scripts.drive(record_ops.tracked(self))  # type: ignore[arg-type]

    def runs(self, job_id: int | str) -> list[dict[str, Any]]:
        """The runs of a saved fan-out job (see ``Job.runs``)."""
        return self.scripts.drive(record_ops.job_runs(self.keys, job_id))

    # -- dependencies (see kue_core.features.flows) ------------------------------------------------
    def dependencies(self, job_id: int | str) -> list[dict[str, Any]]:
        """The jobs job ``job_id`` depends on: ``{"id", "state", "done"}`` each, by id."""
        return self.scripts.drive(record_ops.dependencies(self.keys, job_id))

    def dependents(self, job_id: int | str) -> list[dict[str, Any]]:
        """The jobs that depend on job ``job_id``: ``{"id", "state"}`` each, by id."""
        return self.scripts.drive(record_ops.dependents(self.keys, job_id))

    def children_results(self, job_id: int | str) -> dict[int, Any]:
        """``{id: result}`` of the completed jobs that job ``job_id`` depends on."""
        stored = self.scripts.drive(record_ops.children_results(self.keys, job_id))
        return record_ops.results_of(stored, self)

    def flow_tree(
        self,
        job_id: int | str,
        start: int | str | None = None,
        offset: int = 0,
        limit: int = trees.LIMIT,
        children: int = trees.CHILDREN,
    ) -> dict[str, Any]:
        """The whole flow of job ``job_id`` as a tree, from its root (or from job ``start``
        of it) down, in pages of ``limit`` nodes and ``children`` children a node (see
        :func:`kue_core.jobs.flow_tree.flow_tree`)."""
        op = trees.flow_tree(self.keys, job_id, start, offset, limit, children)
        return self.scripts.drive(op)

    # -- bulk actions on a filter (see kue_core.features.bulk) ----------------------------------
    def bulk_count(self, filter: dict[str, Any]) -> int:
        """How many jobs ``filter`` matches: ``{"state": ..., "type": ..., "tag": ...,
        "words": "...", "min_age_ms": ...}``, the state required."""
        return self.scripts.drive(bulk.count(self.keys, filter))

    def bulk_match(self, filter: dict[str, Any], examples: int = 5) -> dict[str, Any]:
        """As :meth:`bulk_count`, with some of the jobs: ``{"matched": n, "examples": [ids of
        up to examples (at most 100) of them]}``, in the one walk counting takes; what an
        operator is shown before an action."""
        matched, ids = self.scripts.drive(bulk.match(self.keys, filter, examples))
        return {"matched": matched, "examples": ids}

    def bulk(
        self,
        action: str,
        filter: dict[str, Any],
        *,
        reason: str = "",
        run_id: str | None = None,
        expect: int | None = None,
    ) -> dict[str, Any]:
        """``retry``, ``remove``, ``promote`` or ``cancel`` (with ``reason``) every job
        ``filter`` matches (see :meth:`bulk_count`), in batches; what it did: ``matched``,
        ``done``, ``state`` (``done``, or ``stopped`` on :meth:`stop_bulk`). With ``run_id``
        (32 hex digits) its progress is recorded for :meth:`bulk_status`. With ``expect``,
        the count an operator confirmed: when the filter matches another number as the
        action starts, nothing is done and ``BulkCountChanged`` says the new ``matched``;
        else it acts on ``expect`` jobs at most."""
        return self.scripts.drive(bulk.run(self.keys, action, filter, run_id, reason, expect))

    def bulk_status(self, run_id: str) -> dict[str, Any]:
        """The progress of a recorded bulk action: ``action``, ``filter``, ``matched``,
        ``done``, ``state`` (``running``, ``done``, ``stopped``, or ``interrupted`` when its
        process went silent), ``started_at``, ``updated_at``; ``BulkNotFound`` if none."""
        return self.scripts.drive(bulk.status(self.keys, run_id))

    def stop_bulk(self, run_id: str) -> dict[str, Any]:
        """Ask a running bulk action to stop after its batch; its status."""
        return self.scripts.drive(bulk.stop(self.keys, run_id))

    def stats_history(self, job_type: str | None = None, span: str = "24h") -> dict[str, Any]:
        """The statistics' history of ``job_type`` (or of all types) over ``span`` (``1h``,
        ``24h``: a point a minute; ``7d``: an hour; ``30d``: a day): per point, jobs
        completed and failed, the backlog (waiting, delayed) and the wait and run times
        (count, mean, p50, p95, p99 in ms); with the changes of the versions serving it
        (``deploys``) and the whole span's ``total`` (see :mod:`kue_core.features.history`)."""
        return self.scripts.drive(history.series(self.keys, job_type, span))

    def sample_history(self) -> bool:
        """Write the history's sample of the minute that just ended, unless another process
        did: whether this call wrote it. Workers' keepers call it every few seconds, and so
        does the dashboard's server (so that the backlog is kept while no worker runs); a
        process of its own may too."""
        return self.scripts.drive(history.sample(self.keys))

    # -- the audit log (see kue_core.features.audit) --------------------------------------------
    def audit(
        self,
        count: int = 100,
        before: str | None = None,
        action: str | None = None,
        who: str | None = None,
        since: int | None = None,
    ) -> list[dict[str, Any]]:
        """The latest ``count`` entries of the audit log, newest first (older than entry
        ``before``; of ``action``; by ``who``, a user or an address; none before ``since``,
        ms): the changes made through the HTTP API and the dashboard."""
        return self.scripts.drive(audit.entries(self.keys, count, before, action, who, since))

    def add_audit(self, entry: dict[str, Any]) -> str:
        """Record a change in the audit log (``kue_http`` does, for every write it serves);
        the entry's id."""
        return self.scripts.drive(audit.add(self.keys, entry))

    def retention(self) -> dict[str, dict[str, Any]]:
        """The retention in force for completed and failed jobs: ``{"complete": {"count",
        "age", "source"}, "failed": {...}}``; count and age (ms) None for no bound, source
        ``"queue"`` (set here) or ``"default"``. See :mod:`kue_core.features.retention`."""
        return self.scripts.drive(retention.get(self.keys))

    def set_retention(self, **policies: Any) -> dict[str, dict[str, Any]]:
        """Set the queue's retention, for every process: ``complete=`` and ``failed=`` each
        ``{"count": n, "age": ms}`` (either may be left out), a count, ``None`` to keep every
        job, or ``"default"``. Returns :meth:`retention`."""
        return self.scripts.drive(retention.put(self.keys, policies))

    def sweep_payloads(self, batch: int = defaults.PAYLOAD_SWEEP_BATCH) -> int:
        """Delete from the payload store up to ``batch`` values no job holds any more (see
        :mod:`kue_core.features.offloads`; every worker does, every few seconds); how many. A
        queue without a store deletes nothing."""
        store = self.offload.store if self.offload is not None else None
        if store is None:
            return 0
        names = self.scripts.drive(offloads.take(self.keys, batch))
        try:
            store.delete(names)
        except BaseException:
            self.scripts.drive(offloads.put_back(self.keys, names))
            raise
        return len(names)

    def memory(self) -> dict[str, Any]:
        """Redis memory in use (see :func:`kue_core.features.retention.memory`)."""
        return self.scripts.drive(retention.memory())
