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
    an active job whose worker is gone: its lease in ``<p>:leases`` expired (a live worker
    renews its leases every third of their length), or it has no lease (Kue's Node workers
    take none) and its ``updated_at``, which Kue sets when a job starts and at each progress
    report, is older than ``stuck_after_ms`` (default an hour) and than its ttl. Repair: what
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
    a job's log or history list without the job. Repair: delete it.
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
``stale-record``, ``tag-count``, ``word-list``
    the job records' sets disagree with the jobs: see :mod:`kue_core.doctor_records`.
``stuck-blocked``, ``orphan-deps``, ``stale-dependent``, ``stale-awaited``
    the dependencies' keys disagree with the jobs: see :mod:`kue_core.doctor_deps`.
``stale-schedule``, ``lost-schedule``
    ``<p>:schedules`` disagrees with the schedules' hashes: see
    :mod:`kue_core.doctor_schedules`.
``bad-limits``, ``unheld-pause``, ``lost-lane``, ``lost-group-job``, ``stale-group-job``,
``stale-group``, ``lost-group-active``, ``stale-group-active``
    the flow control keys (limits, groups) disagree with the jobs: see
    :mod:`kue_core.doctor_limits`.
``lost-pinned-job``, ``unpinned-job``, ``stale-pinned-job``
    the workers' places disagree with the pinned jobs: see :mod:`kue_core.doctor_pins`.
``run-without-lease``, ``stray-run-lease``, ``orphan-runs``, ``unoffered-run-place``,
``stale-open-place``
    the runs of fan-out jobs disagree with their leases or the places they offer: see
    :mod:`kue_core.doctor_runs`.
``unread-feed``, ``bad-rules-record``, ``stuck-rules-lock``
    job event feeds no ``kue rules`` reads, and ``kue rules``' own keys: see
    :mod:`kue_core.doctor_rules`.
``old-function``
    a Redis function library an earlier kue version loaded: see
    :mod:`kue_core.doctor_functions`.
``not-a-hash``, ``wrong-type``
    a job key, or one of Kue's fixed keys, holding another Redis type. A person must look.

A hash that has a type or data is never deleted, and a job's data is never changed.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, cast

from . import (
    checks,
    defaults,
    doctor_deps,
    doctor_functions,
    doctor_limits,
    doctor_pins,
    doctor_records,
    doctor_rules,
    doctor_runs,
    doctor_schedules,
)
from .keys import zid
from .states import STATES

if TYPE_CHECKING:
    from .queue import Queue

#: A repair action: its name in ``repair.lua`` and three values ('' when unused).
Action = tuple[str, str, str, str]

#: The order repairs run in: a job's state first, then its sets, then what counts them.
_ORDER = (
    "unlimit",  # first: a type's rules that are no JSON object fail every script reading them
    "purge",
    "settle",
    "requeue",
    "sweep",  # before unlog and undepend: the dependents it tells are in the job's set
    "unblock",
    "unindex",
    "index",
    "types",
    "tokens",
    "unlog",
    "undepend",
    "unworker",
    "ids",
    "ununique",
    "unrecord",
    "recount",
    "reword",
    "unschedule",
    "reschedule",
    "hold",
    "lane",
    "ungroup",
    "ungroup_active",
    "unturn",
    "group",
    "group_active",
    "unpin",
    "pin",
    "unrunlease",
    "runlease",
    "unopen",
    "offer",
)

#: Redis types of the fixed keys (a key that does not exist is fine too).
_FIXED_TYPES = {
    "jobs": "zset",
    "leases": "zset",
    "workers": "zset",
    "types": "set",
    "ids": "string",
    "awaited": "zset",
    "schedules": "zset",
}


@dataclass(frozen=True)
class Finding:
    """One disagreement: its kind, the key concerned, what is wrong, and what repair does
    (for a finding without ``action``, what a person should do)."""

    kind: str
    key: str
    problem: str
    repair: str
    job_id: int | None = None
    action: Action | None = None

    @property
    def repairable(self) -> bool:
        return self.action is not None

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "key": self.key,
            "job_id": self.job_id,
            "problem": self.problem,
            "repair": self.repair,
            "repairable": self.repairable,
        }


@dataclass
class Report:
    """What :func:`check` found, and how much it looked at."""

    findings: list[Finding] = field(default_factory=list)
    jobs: int = 0  #: job hashes inspected
    sets: int = 0  #: index sets read (``<p>:jobs``, state sets, type state sets, leases)
    members: int = 0  #: their members
    types: int = 0  #: job types whose wake-up tokens were counted

    @property
    def healthy(self) -> bool:
        return not self.findings

    def counts(self) -> dict[str, int]:
        """Findings per kind."""
        out: dict[str, int] = {}
        for f in self.findings:
            out[f.kind] = out.get(f.kind, 0) + 1
        return out


#: What became of a finding: fixed; nothing left to do when its repair ran (the job changed,
#: or an earlier repair fixed it too); or no automatic repair (a person must look).
Status = Literal["repaired", "unchanged", "manual"]


@dataclass(frozen=True)
class Outcome:
    finding: Finding
    status: Status


# -- the rules, shared with repair.lua ------------------------------------------------------
@dataclass(frozen=True)
class _Job:
    """A job hash as the indexes see it."""

    type: str
    state: str  # '' when the hash has none
    priority: float = 0.0
    promote_at: float | None = None
    ttl: float = 0.0


def _num(value: str | None) -> float | None:
    """A finite number, read as Lua's ``tonumber`` reads it; None otherwise."""
    if value is None:
        return None
    text = value.strip()
    if "_" in text:
        return None  # Python reads 1_000; Lua does not
    try:
        x = float(text)
    except ValueError:
        try:
            x = float(int(text, 16)) if "x" in text.lower() else math.nan  # Lua reads 0x10
        except ValueError:
            return None
    return x if math.isfinite(x) else None


def _belongs(job: _Job | None, name: str) -> tuple[bool, float | None]:
    """Whether ``job`` belongs in the set named ``name`` (a key without ``<p>:``), and its
    score there (None: any). ``belongs`` in ``repair.lua`` is the same rule."""
    if job is None:
        return False, None
    if name == "jobs":
        return True, job.priority
    if name == "leases":
        return job.state == "active", None
    if not job.state:
        return False, None
    if name == f"jobs:{job.state}":
        if job.state not in STATES or job.state == "active":
            return True, None
        if job.state == "delayed":
            return True, job.promote_at
        return True, job.priority
    if name == f"jobs:{job.type}:{job.state}":
        return True, (job.priority if job.state in STATES else None)
    return False, None


def _member_id(member: str) -> int | None:
    """The job id of a zset member (``"01|7" -> 7``), or None when it is not a job's."""
    _, bar, digits = member.partition("|")
    if not bar or not digits.isascii() or not digits.isdigit() or digits.startswith("0"):
        return None
    job_id = int(digits)
    return job_id if zid(job_id) == member else None


def _type_of(name: str) -> str | None:
    """The job type of a type's state set ``jobs:<type>:<state>``; None for other names."""
    rest = name.removeprefix("jobs:")
    if rest == name or rest in STATES:
        return None
    for state in STATES:
        if rest.endswith(":" + state) and len(rest) > len(state) + 1:
            return rest[: -len(state) - 1]
    return None


def _ago(ms: float) -> str:
    """A duration for people: ``42 s``, ``5 min``, ``3 h 20 min``, ``2 d 4 h``."""
    s = max(0, int(ms // 1000))
    if s < 120:
        return f"{s} s"
    if s < 7200:
        return f"{s // 60} min"
    if s < 172800:
        return f"{s // 3600} h {s % 3600 // 60} min"
    return f"{s // 86400} d {s % 86400 // 3600} h"


def plural(count: int, thing: str) -> str:
    """``1 job``, ``2 jobs``."""
    return f"{count} {thing}{'' if count == 1 else 's'}"


def _score(x: float | None) -> str:
    if x is None:
        return "none"
    return str(int(x)) if x == int(x) else repr(x)


def _describe(job: _Job) -> str:
    if not job.state:
        return f"has no state ({job.type})"
    if job.state not in STATES:
        return f"has the unknown state {job.state!r} ({job.type})"
    return f"is {job.state} ({job.type})"


# -- check ----------------------------------------------------------------------------------
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
    return _Check(
        queue, _positive("stuck_after_ms", stuck_after_ms), _positive("grace_ms", grace_ms)
    ).run()


class _Check:
    def __init__(self, queue: Queue, stuck_after_ms: int, grace_ms: int) -> None:
        self.client = queue.client
        self.keys = queue.keys
        self.scripts = queue.scripts
        self.stall_limit = queue.stall_limit
        self.stuck_after = stuck_after_ms
        self.grace = grace_ms
        self.batch = defaults.DOCTOR_BATCH
        self.per_call = defaults.DOCTOR_JOBS_PER_CALL
        self.report = Report()
        self._seen: set[tuple[str, str, int | None, Action | None]] = set()
        #: job id -> the further sets its member is in that its hash may not call for
        self._suspects: dict[int, set[str]] = {}
        self._types: set[str] = set()
        self._typed: set[str] = set()  # types reported missing from <p>:job:types already
        self._skip: set[str] = set()  # fixed keys of the wrong Redis type
        #: set key -> members that repair will remove from it (they need no wake-up token)
        self._leaving: dict[str, int] = {}
        #: ids of the jobs seen blocked, and of those with a dependents set (doctor_deps)
        self.blocked: list[int] = []
        self.dependents: list[int] = []

    def add(
        self,
        kind: str,
        key: str,
        problem: str,
        repair: str,
        job_id: int | None = None,
        action: Action | None = None,
    ) -> None:
        mark = (kind, key, job_id, action)
        if mark not in self._seen:
            self._seen.add(mark)
            if action is not None and action[0] == "unindex":
                self._leaving[key] = self._leaving.get(key, 0) + 1
            self.report.findings.append(Finding(kind, key, problem, repair, job_id, action))

    def run(self) -> Report:
        self._fixed_keys()
        sets = self._index_sets()
        for key in sets:
            self._read_set(key)
        max_id = self._jobs()
        self._tokens(sets)
        self._workers()
        self._ids(max_id)
        self._unique_keys()
        doctor_records.check(self)
        doctor_deps.check(self)
        doctor_schedules.check(self)
        doctor_limits.check(self)
        doctor_pins.check(self)
        doctor_runs.check(self)
        doctor_rules.check(self)
        doctor_functions.check(self)
        # By job (then the rest), whatever order SCAN gave.
        self.report.findings.sort(key=lambda f: (f.job_id is None, f.job_id or 0, f.kind, f.key))
        return self.report

    # -- the fixed keys -------------------------------------------------------------------
    def _fixed_keys(self) -> None:
        pipe = self.client.pipeline(transaction=False)
        keys = {attr: getattr(self.keys, attr) for attr in _FIXED_TYPES}
        for key in keys.values():
            pipe.type(key)
        for (attr, key), kind in zip(keys.items(), pipe.execute(), strict=True):
            want = _FIXED_TYPES[attr]
            if kind not in (want, "none"):
                self._skip.add(key)
                self.add(
                    "wrong-type",
                    key,
                    f"{key} is a {kind}, not a {want}",
                    "rename or delete it (neither Kue nor kue can use it)",
                )

    # -- every index set, member by member -------------------------------------------------
    def _index_sets(self) -> list[str]:
        found = {
            str(k)
            for k in self.client.scan_iter(
                match=self.keys.match("jobs:*"), count=defaults.DOCTOR_SCAN_COUNT, _type="zset"
            )
        }
        for key in (self.keys.jobs, self.keys.leases):
            if key not in self._skip:
                found.add(key)
        return sorted(found)

    def _read_set(self, key: str) -> None:
        name = self.keys.name(key)
        cursor, read = 0, 0
        while True:
            cursor, page = self.client.zscan(key, cursor, count=self.batch)
            read += len(page)
            self._members(key, name, [str(m) for m, _ in page])
            if cursor == 0:
                break
        if read:
            self.report.sets += 1

    def _members(self, key: str, name: str, members: list[str]) -> None:
        """Note the members whose job may not belong in the set, for the job's snapshot."""
        self.report.members += len(members)
        ids: list[int] = []
        for member in members:
            job_id = _member_id(member)
            if job_id is None:
                self.add(
                    "bad-member",
                    key,
                    f"{key} holds {member!r}, which is no job's member (NN|id)",
                    "remove it from the set",
                    None,
                    ("unindex", name, member, ""),
                )
            else:
                ids.append(job_id)
        if ids:
            suspects, _ = self.scripts.screen(name, [zid(i) for i in ids], [])
            for member in suspects:
                self._suspects.setdefault(cast(int, _member_id(member)), set()).add(name)

    # -- every job hash ---------------------------------------------------------------------
    def _jobs(self) -> int:
        """Judge every job (and every suspect member without a job); the highest job id."""
        max_id = 0
        batch: list[int] = []
        lists: list[tuple[int, str]] = []
        for key in self.client.scan_iter(
            match=self.keys.match("job:*"), count=defaults.DOCTOR_SCAN_COUNT
        ):
            parsed = self.keys.job_key(str(key))
            if parsed is None:
                continue
            job_id, part = parsed
            if part == "dependents":
                self.dependents.append(job_id)
            if part:
                lists.append(parsed)
                if len(lists) >= self.batch:
                    self._lists(lists)
                    lists = []
                continue
            max_id = max(max_id, job_id)
            batch.append(job_id)
            if len(batch) >= self.per_call:
                self._inspect(batch)
                batch = []
        self._inspect(batch)
        self._lists(lists)
        rest = sorted(self._suspects)  # members of jobs without a hash (or created since)
        for i in range(0, len(rest), self.per_call):
            self._inspect(rest[i : i + self.per_call])
        return max_id

    def _inspect(self, ids: Sequence[int]) -> None:
        if not ids:
            return
        asked = [(str(i), sorted(self._suspects.pop(i, ()))) for i in dict.fromkeys(ids)]
        now, jobs, _ = self.scripts.inspect(asked, [])
        for row in jobs:
            self._judge(now, int(row[0]), str(row[1]), row[2], row[3])

    def _judge(self, now: int, job_id: int, kind: str, f: list[Any], flat: list[Any]) -> None:
        """The findings about one job, from a consistent snapshot (see ``inspect.lua``)."""
        sets = {str(flat[i]): float(flat[i + 1]) for i in range(0, len(flat), 2)}
        member, key = zid(job_id), self.keys.job(job_id)

        def orphans(why: str) -> None:
            for name in sets:
                self.add(
                    "orphan-member",
                    self.keys.named(name),
                    f"{self.keys.named(name)} holds job {job_id}, {why}",
                    "remove it from the set",
                    job_id,
                    ("unindex", name, member, ""),
                )

        if kind == "none":
            orphans("which does not exist")
            return
        if kind != "hash":
            self.add(
                "not-a-hash",
                key,
                f"{key} is a {kind}, not a job hash",
                "rename or delete it",
                job_id,
            )
            orphans(f"whose key holds a {kind}")
            return
        self.report.jobs += 1
        jtype, state, worker, stalls = f[0], f[1], f[8], f[9]
        has_data, known_type = bool(f[10]), bool(f[11])
        last = _num(f[5])
        if last is None:
            last = _num(f[6])
        young = last is not None and now - last <= self.grace
        if jtype is None:
            if young:
                return  # a Kue save may be writing it (Kue writes the type second)
            if has_data:
                repair, action = f"give it its type (HSET {key} type <type>) or delete it", None
            else:
                repair = "delete it, with its log and history"
                action = ("purge", str(job_id), str(self.grace), "")
            what = "with data" if has_data else "without data (left by writes to a removed job)"
            self.add("no-type", key, f"{key} has no type, {what}", repair, job_id, action)
            orphans("whose hash has no type")
            return
        job = _Job(jtype, state or "", _num(f[2]) or 0.0, _num(f[3]), _num(f[4]) or 0.0)
        self._types.add(jtype)
        if not known_type and jtype not in self._typed and self.keys.types not in self._skip:
            self._typed.add(jtype)
            self.add(
                "missing-type",
                self.keys.types,
                f"type {jtype!r} of job {job_id} is not in {self.keys.types}",
                "add it",
                job_id,
                ("types", jtype, "", ""),
            )
        if not job.state:
            if young:
                return  # a Kue save may be writing it (Kue writes the state last)
            delayed = (_num(f[7]) or 0) > 0
            self.add(
                "no-state",
                key,
                f"job {job_id} ({jtype}) has no state: a save that stopped half-way",
                f"finish the save: make it {'delayed' if delayed else 'inactive'}",
                job_id,
                ("settle", str(job_id), str(self.grace), ""),
            )
            required = ["jobs"]
        elif job.state not in STATES:
            self.add(
                "bad-state",
                key,
                f"job {job_id} ({jtype}) has the unknown state {job.state!r}",
                "fail it, with the reason as its error (a retry runs it)",
                job_id,
                ("settle", str(job_id), str(self.grace), ""),
            )
            required = ["jobs"]
        else:
            required = ["jobs", f"jobs:{job.state}", f"jobs:{jtype}:{job.state}"]
        described = f"job {job_id} {_describe(job)}"
        for name in required:
            score = _belongs(job, name)[1]
            where = self.keys.named(name)
            index: Action = ("index", name, member, "")
            if name not in sets:
                repair = "add it" + (f" (score {_score(score)})" if score is not None else "")
                if name == f"jobs:{jtype}:inactive":
                    repair += " with a wake-up token"
                self.add(
                    "missing-member",
                    where,
                    f"{described} but is not in {where}",
                    repair,
                    job_id,
                    index,
                )
            elif score is not None and sets[name] != score:
                self.add(
                    "wrong-score",
                    where,
                    f"{described}; its score in {where} is {_score(sets[name])}, "
                    f"not {_score(score)}",
                    f"set it to {_score(score)}",
                    job_id,
                    index,
                )
        for name in sets:
            if _belongs(job, name)[0]:
                continue
            where = self.keys.named(name)
            unindex: Action = ("unindex", name, member, "")
            if name == "leases":
                self.add(
                    "stray-lease",
                    where,
                    f"{described} but holds a lease in {where}",
                    "drop the lease",
                    job_id,
                    unindex,
                )
            else:
                self.add(
                    "extra-member",
                    where,
                    f"{described} but is also in {where}",
                    "remove it from the set",
                    job_id,
                    unindex,
                )
        if job.state == "active" and not (len(f) > 12 and f[12]):  # runs have own leases
            self._stuck(now, job_id, job, sets.get("leases"), last, worker, stalls)
        elif job.state == "blocked":
            self.blocked.append(job_id)

    def _stuck(
        self,
        now: int,
        job_id: int,
        job: _Job,
        lease: float | None,
        last: float | None,
        worker: str | None,
        stalls: str | None,
    ) -> None:
        """An active job is stuck when its lease expired, or when it has none and was not
        updated for longer than ``stuck_after`` and its ttl (``requeue`` in repair.lua)."""
        who = f"worker {worker}" if worker else "its worker"
        if lease is not None:
            if lease > now:
                return
            why = f"its lease expired {_ago(now - lease)} ago: {who} stopped renewing it"
        else:
            limit = max(self.stuck_after, job.ttl)
            if last is not None and now - last <= limit:
                return
            since = "ever" if last is None else _ago(now - last)
            why = (
                f"it has no lease (a Kue worker's job) and no update for {since}, more than "
                f"{_ago(limit)}: {who} is gone"
            )
        count = (_num(stalls) or 0) + 1
        if count > self.stall_limit:
            repair = f"fail it: stalled {int(count)} times, more than the stall limit"
        else:
            repair = "requeue it (inactive), as lease recovery does"
        self.add(
            "stuck-active",
            self.keys.job(job_id),
            f"job {job_id} ({job.type}) is active but {why}",
            repair,
            job_id,
            ("requeue", str(job_id), str(self.stuck_after), str(self.stall_limit)),
        )

    def _lists(self, lists: Sequence[tuple[int, str]]) -> None:
        """Logs and histories (and dependencies' keys) of jobs that do not exist."""
        if not lists:
            return
        _, orphans = self.scripts.screen("", [], lists)
        for job_id, part in orphans:
            if part == "runs":
                doctor_runs.orphan(self, job_id)
                continue
            if part in doctor_deps.PARTS:
                doctor_deps.orphan(self, job_id, part)
                continue
            key = self.keys.log(job_id) if part == "log" else self.keys.history(job_id)
            self.add(
                "orphan-log",
                key,
                f"{key} is the {part} of job {job_id}, which does not exist",
                "delete it",
                job_id,
                ("unlog", str(job_id), part, ""),
            )

    # -- per type, per worker, the id counter ---------------------------------------------
    def _tokens(self, sets: Iterable[str]) -> None:
        types = set(self._types)
        if self.keys.types not in self._skip:
            types.update(str(t) for t in self.client.sscan_iter(self.keys.types))
        for key in sets:
            jtype = _type_of(self.keys.name(key))
            if jtype is not None:
                types.add(jtype)
        ordered = sorted(types)
        self.report.types = len(ordered)
        for i in range(0, len(ordered), self.per_call):
            chunk = ordered[i : i + self.per_call]
            _, _, counts = self.scripts.inspect([], chunk)
            for jtype, (members, held) in zip(chunk, counts, strict=True):
                # The members repair removes need no token (it counts again as it pushes).
                leaving = self._leaving.get(self.keys.type_state(jtype, "inactive"), 0)
                waiting, tokens = int(members) - leaving, int(held)
                if tokens < waiting:
                    short = waiting - tokens
                    key = self.keys.tokens(jtype)
                    self.add(
                        "missing-tokens",
                        key,
                        f"{key} holds {plural(tokens, 'wake-up token')} for "
                        f"{plural(waiting, 'inactive job')} of type {jtype!r}: Kue's workers "
                        f"would leave {short} of them waiting",
                        f"push {plural(short, 'token')}",
                        None,
                        ("tokens", jtype, "", ""),
                    )

    def _workers(self) -> None:
        key = self.keys.workers
        if key in self._skip:
            return
        now = None
        cursor = 0
        while True:
            cursor, page = self.client.zscan(key, cursor, count=self.batch)
            pipe = self.client.pipeline(transaction=False)
            for wid, _ in page:
                pipe.exists(self.keys.worker(str(wid)))
            for (wid, beat), alive in zip(page, pipe.execute(), strict=True):
                if alive:
                    continue
                if now is None:
                    seconds, micros = self.client.time()
                    now = seconds * 1000 + micros // 1000
                worker = str(wid)
                self.add(
                    "gone-worker",
                    key,
                    f"worker {worker} is in {key} but its registration expired (last "
                    f"heartbeat {_ago(now - float(beat))} ago)",
                    "remove it from the set",
                    None,
                    ("unworker", worker, "", ""),
                )
            if cursor == 0:
                return

    def _ids(self, max_id: int) -> None:
        key = self.keys.ids
        if key in self._skip or not max_id:
            return
        current = _num(cast("str | None", self.client.get(key)))
        if current is None or current < max_id:
            now = "missing" if current is None else _score(current)
            self.add(
                "ids-behind",
                key,
                f"{key} is {now} but job {max_id} exists: Kue's save would write over it",
                f"raise it to {max_id}",
                max_id,
                ("ids", str(max_id), "", ""),
            )

    def _unique_keys(self) -> None:
        """Unique keys without an expiry naming a job that is gone or has ended, and
        kue-unique entries naming a job that is gone: left by Node Kue, which ends and removes
        jobs without our scripts."""
        reuse = self.keys.unique_jobs
        for key in self.client.scan_iter(
            match=self.keys.match("unique:*"), count=defaults.DOCTOR_SCAN_COUNT
        ):
            if key == reuse:
                continue
            pipe = self.client.pipeline(transaction=False)
            pipe.type(key)
            pipe.get(key)
            pipe.pttl(key)
            kind, holder, ttl = pipe.execute()
            if kind != "string" or not str(holder).isdigit() or ttl != -1:
                continue
            state, jtype = cast(
                "list[str | None]", self.client.hmget(self.keys.job(int(holder)), "state", "type")
            )
            if jtype is None or state in ("complete", "failed"):
                what = "is gone" if jtype is None else f"is {state}"
                name = key[len(self.keys.prefix) + len(":unique:") :]
                self.add(
                    "stale-unique",
                    key,
                    f"unique key {name!r} names job {holder}, which {what}: it blocks nothing "
                    "now but stays in Redis",
                    "delete it",
                    int(holder),
                    ("ununique", name, str(holder), ""),
                )
        if self.client.type(reuse) != "hash":
            return
        for name, holder in self.client.hscan_iter(reuse, count=self.batch):
            if str(holder).isdigit() and not self.client.exists(self.keys.job(int(holder))):
                self.add(
                    "stale-unique",
                    reuse,
                    f"kue-unique's key {name!r} names job {holder}, which is gone",
                    "delete the entry",
                    int(holder),
                    ("ununique", "", str(holder), str(name)),
                )


# -- repair ---------------------------------------------------------------------------------
def repair(queue: Queue, findings: Iterable[Finding]) -> list[Outcome]:
    """Fix ``findings`` (from :func:`check`), each only if its condition still holds (in
    ``repair.lua``); one outcome per finding, in their order."""
    findings = list(findings)
    acting = [i for i, f in enumerate(findings) if f.action is not None]
    unload = [i for i in acting if cast(Action, findings[i].action)[0] == doctor_functions.UNLOAD]
    names = [cast(Action, findings[i].action)[1] for i in unload]
    status: dict[int, Status] = {
        i: "repaired" if deleted else "unchanged"
        for i, deleted in zip(unload, doctor_functions.unload(queue.client, names), strict=True)
    }
    todo = sorted(
        (i for i in acting if i not in status),
        key=lambda i: _ORDER.index(cast(Action, findings[i].action)[0]),
    )
    batch = defaults.DOCTOR_JOBS_PER_CALL
    for start in range(0, len(todo), batch):
        chunk = todo[start : start + batch]
        done = queue.scripts.repair([cast(Action, findings[i].action) for i in chunk])
        for i, changed in zip(chunk, done, strict=True):
            status[i] = "repaired" if changed else "unchanged"
    return [Outcome(f, status.get(i, "manual")) for i, f in enumerate(findings)]
