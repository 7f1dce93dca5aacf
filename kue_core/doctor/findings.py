"""What the doctor reports: findings, the report, the outcome of a repair, and the order
repairs run in."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

#: A repair action: its name in ``repair.lua`` and three values ('' when unused).
Action = tuple[str, str, str, str]

#: The order repairs run in: a job's state first, then its sets, then what counts them.
REPAIR_ORDER = (
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
    "bound",
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
    "resume",  # last: a job resumed waits inactive, in sets the actions before mended
)

#: Redis types of the fixed keys (a key that does not exist is fine too).
FIXED_TYPES = {
    "jobs": "zset",
    "leases": "zset",
    "worker_leases": "zset",
    "recovering": "hash",
    "workers": "zset",
    "types": "set",
    "ids": "string",
    "awaited": "zset",
    "schedules": "zset",
    "rotation": "hash",
    "payload_trash": "list",
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


def plural(count: int, thing: str) -> str:
    """``1 job``, ``2 jobs``."""
    return f"{count} {thing}{'' if count == 1 else 's'}"
