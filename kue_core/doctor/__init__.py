"""kue doctor: find every place where Redis's indexes disagree with the job hashes, and fix it.

The job hash is the truth. :func:`check` reads, never writes, and is safe beside running
workers: it walks the keys with SCAN and the sets with ZSCAN, a batch at a time, and judges
each job on a consistent snapshot of its hash and of every set its member is in, taken by the
read-only ``inspect.lua`` script (a batch of jobs per call, about a millisecond), so a job that
a worker moves while the check runs is not reported. :func:`repair` runs each finding's fix in
``repair.lua``, which checks the finding's condition again first: a job that changed since the
check is left as it now is.

What is checked (the finding kinds):

``orphan-member``
    a member of ``<p>:jobs``, a state set, a type's state set or ``<p>:leases`` whose job has
    no hash (or a hash without a type, which is no job). Repair: remove the member.
``bad-member``
    a member that is not a job's (``NN|id``). Repair: remove it.
``extra-member``
    a job in a set other than those of its state and type (in two state sets, in another
    type's set...). Repair: remove it from that set.
``stray-lease``
    a lease in ``<p>:leases`` for a job that is not active. Repair: drop the lease.
``missing-member``
    a job missing from ``<p>:jobs``, from its state's set or from its type's state set.
    Repair: add it (to its type's inactive set: with a wake-up token, as any enqueue).
``wrong-score``
    a member scored otherwise than its hash says (priority; ``promote_at`` in the delayed
    set; an active job's score in ``<p>:jobs:active`` is not checked). Repair: re-score it.
``missing-type``
    a job's type missing from ``<p>:job:types``. Repair: add it.
``missing-tokens``
    fewer wake-up tokens in ``<p>:<type>:jobs`` than jobs in ``<p>:jobs:<type>:inactive``:
    a Kue worker takes a token before each job, so the jobs past the tokens wait for ever
    (a Kue worker that stopped between its two steps leaves this). Repair: push the missing
    tokens.
``stuck-active``
    an active job whose worker is gone: its worker process's lease in ``<p>:worker-leases``
    expired (a live worker renews it every third of its length) and recovery has not
    requeued it yet; or a claim of ours made it active (it has a fencing token) and its
    worker holds no lease; or its own lease in ``<p>:leases`` (a worker of the version
    before) expired; or it has no lease (Kue's Node workers take none) and its
    ``updated_at``, which Kue sets when a job starts and at each progress report, is older
    than ``stuck_after_ms`` (default an hour) and than its ttl. Repair: what
    lease recovery does: back to inactive with one more stall, or failed when that makes more
    stalls than the queue's stall limit.
``no-state``
    a job hash with a type but no state, untouched for a minute: a Kue save that stopped
    half-way (Kue writes the fields one at a time, the state last). Repair: finish the save:
    inactive, or delayed when it has a delay.
``bad-state``
    a job whose state is none of the five (Kue stores any state it is given). Repair: fail
    it, with the reason as its error; retrying it from the dashboard or the API runs it.
``no-type``
    a hash at ``<p>:job:<id>`` without a type, untouched for a minute: no handler can run it.
    Without ``data`` it is what Kue leaves when it writes to a job removed meanwhile (progress,
    complete): repair deletes it, with its log and history. With ``data`` a person must look
    (give it its type, or remove it): repair leaves it.
``orphan-log``
    a job's log or history list, or its stream of partial output, without the job. Repair:
    delete it.
``gone-worker``
    a worker in ``<p>:workers`` whose registration ``<p>:worker:<id>`` has expired. Repair:
    remove it.
``ids-behind``
    ``<p>:ids`` below the id of an existing job: Kue's save would write over that job.
    Repair: raise the counter to that id.
``stale-unique``
    a unique key (``<p>:unique:<key>``, without an expiry) naming a job that is gone or has
    ended, or an entry of kue-unique's ``<p>:unique:jobs`` naming a job that is gone: Node Kue
    ends and removes jobs without releasing them. They block nothing (a save takes such a key
    over) but stay in Redis. Repair: delete them.
``unbounded-history``
    a key of the statistics' history (``<p>:history:m|h|d:...``) without an expiry. Repair:
    give it the expiry its kind of point has.
``unbounded-bulk``
    a bulk action's record (``<p>:bulk:<run id>``) without an expiry. Repair: give it the
    expiry a record has (``BULK_KEEP_MS``).
``long-audit``
    the audit log ``<p>:audit`` more than twice as long as ``AUDIT_MAX_ENTRIES``. Repair:
    trim it to about that.
``stale-record``, ``tag-count``, ``word-list``
    the job records' sets disagree with the jobs: see :mod:`kue_core.doctor.records`.
``stuck-blocked``, ``orphan-deps``, ``stale-dependent``, ``stale-awaited``
    the dependencies' keys disagree with the jobs: see :mod:`kue_core.doctor.deps`.
``stale-schedule``, ``lost-schedule``
    ``<p>:schedules`` disagrees with the schedules' hashes: see
    :mod:`kue_core.doctor.schedules`.
``bad-limits``, ``unheld-pause``, ``lost-lane``, ``lost-group-job``, ``stale-group-job``,
``stale-group``, ``lost-group-active``, ``stale-group-active``
    the flow control keys (limits, groups) disagree with the jobs: see
    :mod:`kue_core.doctor.limits`.
``lost-pinned-job``, ``unpinned-job``, ``stale-pinned-job``
    the workers' places disagree with the pinned jobs: see :mod:`kue_core.doctor.pins`.
``run-without-lease``, ``stray-run-lease``, ``orphan-runs``, ``unoffered-run-place``,
``stale-open-place``
    the runs of fan-out jobs disagree with their leases or the places they offer: see
    :mod:`kue_core.doctor.runs`.
``unread-feed``, ``bad-rules-record``, ``stuck-rules-lock``
    job event feeds no ``kue rules`` reads, and ``kue rules``' own keys: see
    :mod:`kue_rules.doctor`, which plugs in (:data:`PLUGINS`).
``old-function``
    a Redis function library an earlier kue version loaded: see
    :mod:`kue_core.doctor.functions`.
``lost-wait``
    a suspended job whose wait for a signal can never end: see :mod:`kue_core.doctor.signals`.
``orphan-payload``, ``missing-payload``, ``payload-store``
    values in the payload store no job holds, and jobs holding values the store lacks: see
    :mod:`kue_core.doctor.payloads`.
``not-a-hash``, ``wrong-type``
    a job key, or one of Kue's fixed keys, holding another Redis type. A person must look.

A hash that has a type or data is never deleted, and a job's data is never changed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, cast

from .. import defaults
from ..base import checks
from ..store import calls
from . import (
    deps,
    functions,
    housekeeping,
    limits,
    payloads,
    pins,
    records,
    runs,
    schedules,
    signals,
)
from .checker import Checker
from .core import Check
from .findings import REPAIR_ORDER, Action, Finding, Outcome, Report, Status, plural

if TYPE_CHECKING:
    from ..queue import Queue

__all__ = [
    "PLUGINS",
    "Action",
    "Checker",
    "Finding",
    "Outcome",
    "Report",
    "Status",
    "check",
    "plural",
    "repair",
]

#: The entry point group through which other packages add checks of their own keys: each
#: names a function that takes a :class:`Checker` and adds findings to it (``kue rules``
#: adds its own, from ``kue_rules.doctor``).
PLUGINS = "kue.doctor"


def _positive(name: str, value: object) -> int:
    return checks.integer(value, name, 0)


def check(
    queue: Queue,
    *,
    stuck_after_ms: int = defaults.DOCTOR_STUCK_AFTER_MS,
    grace_ms: int = defaults.DOCTOR_GRACE_MS,
) -> Report:
    """Every place where the indexes disagree with the job hashes (see the module's doc).
    Reads only; safe beside running workers and producers."""
    return _run(
        Check(queue, _positive("stuck_after_ms", stuck_after_ms), _positive("grace_ms", grace_ms))
    )


def _run(c: Check) -> Report:
    c.fixed_keys()
    sets = c.index_sets()
    for key in sets:
        c.read_set(key)
    max_id = c.jobs()
    housekeeping.tokens(c, sets)
    housekeeping.workers(c)
    housekeeping.ids(c, max_id)
    housekeeping.unique_keys(c)
    housekeeping.bounds(c)
    records.check(c)
    deps.check(c)
    schedules.check(c)
    limits.check(c)
    pins.check(c)
    runs.check(c)
    signals.check(c)
    payloads.check(c)
    for plugged in _plugged_in():
        plugged(c)
    functions.check(c)
    # By job (then the rest), whatever order SCAN gave.
    c.report.findings.sort(key=lambda f: (f.job_id is None, f.job_id or 0, f.kind, f.key))
    return c.report


def _plugged_in() -> list[Callable[[Checker], None]]:
    """The checks other packages add (:data:`PLUGINS`), in the order of their names."""
    found = sorted(entry_points(group=PLUGINS), key=lambda ep: ep.name)
    return [cast("Callable[[Checker], None]", ep.load()) for ep in found]


def repair(queue: Queue, findings: Iterable[Finding]) -> list[Outcome]:
    """Fix ``findings`` (from :func:`check`), each only if its condition still holds (in
    ``repair.lua``); one outcome per finding, in their order."""
    findings = list(findings)
    acting = [i for i, f in enumerate(findings) if f.action is not None]
    unload = [i for i in acting if cast(Action, findings[i].action)[0] == functions.UNLOAD]
    names = [cast(Action, findings[i].action)[1] for i in unload]
    status: dict[int, Status] = {
        i: "repaired" if deleted else "unchanged"
        for i, deleted in zip(unload, functions.unload(queue.client, names), strict=True)
    }
    unstore = [i for i in acting if cast(Action, findings[i].action)[0] == payloads.UNSTORE]
    store = queue.offload.store if queue.offload is not None else None
    names = [cast(Action, findings[i].action)[1] for i in unstore]
    for i, deleted in zip(unstore, payloads.unstore(store, names), strict=True):
        status[i] = "repaired" if deleted else "unchanged"
    todo = sorted(
        (i for i in acting if i not in status),
        key=lambda i: REPAIR_ORDER.index(cast(Action, findings[i].action)[0]),
    )
    batch = defaults.DOCTOR_JOBS_PER_CALL
    for start in range(0, len(todo), batch):
        chunk = todo[start : start + batch]
        actions = [cast(Action, findings[i].action) for i in chunk]
        done = queue.scripts.call(calls.repair(queue.keys, actions))
        for i, changed in zip(chunk, done, strict=True):
            status[i] = "repaired" if changed else "unchanged"
    return [Outcome(f, status.get(i, "manual")) for i, f in enumerate(findings)]
