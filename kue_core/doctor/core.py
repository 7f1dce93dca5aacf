"""The doctor's check of the jobs and their index sets: the fixed keys' types, every member
of every index set, every job hash (judged on a consistent snapshot taken by
``inspect.lua``), stuck active jobs, and logs and histories of jobs that do not exist. Its
``Check`` holds the check's state; the other checks add their findings to it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, cast

from .. import defaults
from ..base.keys import zid
from ..base.states import STATES
from ..store import calls
from ..store.calls import JobFields, JobSnapshot
from . import deps, runs
from .findings import FIXED_TYPES, Action, Finding, Report
from .judging import (
    JobView,
    ago,
    belongs,
    describe,
    job_of_member,
    kue_worker,
    lua_number,
    score_text,
)

if TYPE_CHECKING:
    from ..queue import Queue


class Check:
    def __init__(self, queue: Queue, stuck_after_ms: int, grace_ms: int) -> None:
        self.client = queue.client
        self.keys = queue.keys
        self.scripts = queue.scripts
        self.stall_limit = queue.stall_limit
        self.stuck_after = stuck_after_ms
        self.grace = grace_ms
        self.offload = queue.offload
        self.batch = defaults.DOCTOR_BATCH
        self.per_call = defaults.DOCTOR_JOBS_PER_CALL
        self.report = Report()
        self._seen: set[tuple[str, str, int | None, Action | None]] = set()
        #: job id -> the further sets its member is in that its hash may not call for
        self._suspects: dict[int, set[str]] = {}
        self.types_seen: set[str] = set()
        self.typed: set[str] = set()  # types reported missing from <p>:job:types already
        self.skip: set[str] = set()  # fixed keys of the wrong Redis type
        #: set key -> members that repair will remove from it (they need no wake-up token)
        self.leaving: dict[str, int] = {}
        #: ids of the jobs seen blocked, and of those with a dependents set (deps)
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
                self.leaving[key] = self.leaving.get(key, 0) + 1
            self.report.findings.append(Finding(kind, key, problem, repair, job_id, action))

    # -- the fixed keys -------------------------------------------------------------------
    def fixed_keys(self) -> None:
        pipe = self.client.pipeline(transaction=False)
        keys = {attr: getattr(self.keys, attr) for attr in FIXED_TYPES}
        for key in keys.values():
            pipe.type(key)
        for (attr, key), kind in zip(keys.items(), pipe.execute(), strict=True):
            want = FIXED_TYPES[attr]
            if kind not in (want, "none"):
                self.skip.add(key)
                self.add(
                    "wrong-type",
                    key,
                    f"{key} is a {kind}, not a {want}",
                    "rename or delete it (neither Kue nor kue can use it)",
                )

    # -- every index set, member by member -------------------------------------------------
    def index_sets(self) -> list[str]:
        found = {
            str(k)
            for k in self.client.scan_iter(
                match=self.keys.match("jobs:*"), count=defaults.DOCTOR_SCAN_COUNT, _type="zset"
            )
        }
        for key in (self.keys.jobs, self.keys.leases):
            if key not in self.skip:
                found.add(key)
        return sorted(found)

    def read_set(self, key: str) -> None:
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
            job_id = job_of_member(member)
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
            screened = self.scripts.call(calls.screen(self.keys, name, [zid(i) for i in ids], []))
            for member in screened.suspects:
                self._suspects.setdefault(cast(int, job_of_member(member)), set()).add(name)

    # -- every job hash ---------------------------------------------------------------------
    def jobs(self) -> int:
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
        snapshot = self.scripts.call(calls.inspect(self.keys, asked, []))
        for job in snapshot.jobs:
            self._judge(snapshot.now, job)

    def _judge(self, now: int, snapshot: JobSnapshot) -> None:
        """The findings about one job, from a consistent snapshot (see ``inspect.lua``)."""
        job_id, kind, sets = snapshot.id, snapshot.kind, snapshot.sets
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
        f = cast(JobFields, snapshot.fields)  # a hash's
        jtype, state = f.type, f.state
        last = lua_number(f.updated_at)
        if last is None:
            last = lua_number(f.created_at)
        young = last is not None and now - last <= self.grace
        if jtype is None:
            if young:
                return  # a Kue save may be writing it (Kue writes the type second)
            if f.has_data:
                repair, action = f"give it its type (HSET {key} type <type>) or delete it", None
            else:
                repair = "delete it, with its log, history and stream"
                action = ("purge", str(job_id), str(self.grace), "")
            what = "with data" if f.has_data else "without data (left by writes to a removed job)"
            self.add("no-type", key, f"{key} has no type, {what}", repair, job_id, action)
            orphans("whose hash has no type")
            return
        job = JobView(
            jtype,
            state or "",
            lua_number(f.priority) or 0.0,
            lua_number(f.promote_at),
            lua_number(f.ttl) or 0.0,
        )
        self.types_seen.add(jtype)
        if not f.known_type and jtype not in self.typed and self.keys.types not in self.skip:
            self.typed.add(jtype)
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
            delayed = (lua_number(f.delay) or 0) > 0
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
        described = f"job {job_id} {describe(job)}"
        for name in required:
            score = belongs(job, name)[1]
            where = self.keys.named(name)
            index: Action = ("index", name, member, "")
            if name not in sets:
                repair = "add it" + (f" (score {score_text(score)})" if score is not None else "")
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
                    f"{described}; its score in {where} is {score_text(sets[name])}, "
                    f"not {score_text(score)}",
                    f"set it to {score_text(score)}",
                    job_id,
                    index,
                )
        for name in sets:
            if belongs(job, name)[0]:
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
        if job.state == "active" and not f.fans_out:  # runs have own leases
            self._stuck(now, job_id, job, sets.get("leases"), last, f)
        elif job.state == "blocked":
            self.blocked.append(job_id)

    def _stuck(
        self,
        now: int,
        job_id: int,
        job: JobView,
        lease: float | None,
        last: float | None,
        f: JobFields,
    ) -> None:
        """An active job is stuck when the lease that holds it expired: its worker process's
        (``<p>:worker-leases``), or its own in ``<p>:leases`` (claimed by a worker of the
        version before); when a claim of ours made it active (it has a fencing token, and no
        Node Kue worker's id: a Kue worker's claim leaves the token of an earlier claim of
        ours) and its worker holds no lease; or, claimed by a Kue Node worker (which takes no
        lease), when it was not updated for longer than ``stuck_after`` and its ttl
        (``requeue`` in repair.lua)."""
        worker, stalls = f.worker_id, f.stalls
        who = f"worker {worker}" if worker else "its worker"
        if lease is not None:
            if lease > now:
                return
            why = f"its lease expired {ago(now - lease)} ago: {who} stopped renewing it"
        elif f.worker_lease is not None:
            if f.worker_lease > now:
                return
            why = (
                f"the lease of {who} expired {ago(now - f.worker_lease)} ago (it stopped "
                "renewing it), and recovery has not requeued the job"
            )
        elif f.lease is not None and not kue_worker(worker):
            why = f"{who} holds no lease: its process is gone"
        else:
            limit = max(self.stuck_after, job.ttl)
            if last is not None and now - last <= limit:
                return
            since = "ever" if last is None else ago(now - last)
            why = (
                f"it has no lease (a Kue worker's job) and no update for {since}, more than "
                f"{ago(limit)}: {who} is gone"
            )
        count = (lua_number(stalls) or 0) + 1
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
        screened = self.scripts.call(calls.screen(self.keys, "", [], lists))
        for job_id, part in screened.orphans:
            if part == "runs":
                runs.orphan(self, job_id)
                continue
            if part in deps.PARTS:
                deps.orphan(self, job_id, part)
                continue
            key = {"log": self.keys.log, "stream": self.keys.stream}.get(part, self.keys.history)(
                job_id
            )
            self.add(
                "orphan-log",
                key,
                f"{key} is the {part} of job {job_id}, which does not exist",
                "delete it",
                job_id,
                ("unlog", str(job_id), part, ""),
            )
