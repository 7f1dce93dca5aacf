"""Dependencies and flows: a job that waits for others to complete, and trees of jobs.

A job saved with ``depends_on(...)`` starts ``blocked`` unless every job it depends on is
complete. The script that completes its last dependency (``complete.lua``, or ``set_state``
by hand, or the sweep for a job a Node Kue worker completed) moves it to inactive, or delayed
while it has a due time, in the same call: exactly once, whoever completed it. A dependency
that fails for good applies the job's policy (``on_dependency_failure``): ``wait`` (stays
blocked, "blocked by failed job N", until N is retried and completes), ``fail`` (fails at once,
and its own dependents follow theirs) or ``ignore`` (counts as done).

``queue.flow(parent, children)`` saves a tree of new jobs in one call, all or nothing: each
parent depends on its children, and reads their results with ``job.children_results()``.
A job can only depend on jobs saved before it (or before it in the same call), so no cycle
can be made. Keys and fields: see lib/deps.lua (Dependencies) and keys.py.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, TypeVar, overload

from ..base import checks
from ..base.errors import InvalidJob


class Saved(Protocol):
    """A job as ``depends_on`` takes it: by its id, once saved."""

    @property
    def id(self) -> int | None: ...


#: What a job does when a job it depends on fails for good; ``wait`` is the default.
POLICIES = ("wait", "fail", "ignore")

_UNSET: Any = object()
_J = TypeVar("_J", bound="DependencyOptions")


def is_job(value: object) -> bool:
    """Whether ``value`` is a job (of either client; not imported here: it is built on this
    module)."""
    return hasattr(value, "_save_row") and hasattr(value, "queue")


def _job_id(value: object, what: str) -> int:
    """The id of a saved job given as a Job or an id."""
    if is_job(value):
        job_id = getattr(value, "id", None)
        if job_id is None:
            raise InvalidJob(
                f"{what} is not saved: save it first, or save both in one queue.flow()"
            )
        return int(job_id)
    return checks.job_id(value, what)


class DependencyOptions:
    """Mixed into ``Job``: its dependencies, given before the save, and read once saved."""

    id: int | None
    _depends: list[int] | None = None
    if TYPE_CHECKING:  # Job's

        def _saved_id(self) -> int: ...

    _on_dep_fail = "wait"
    #: How many jobs it depends on (once saved or loaded).
    depends_count = 0
    #: Whether jobs depend on it.
    has_dependents = False
    #: A job it waits for that failed for good (policy ``wait``), else None.
    blocked_by: int | None = None

    def depends_on(self: _J, *jobs: Saved | int | str) -> _J:
        """Wait, once saved, until each of ``jobs`` (saved jobs or their ids) completes;
        an unknown id is refused by ``save()``. Given again, adds to them."""
        if self.id is not None:
            raise InvalidJob("dependencies are given before the job is saved")
        if not jobs:
            raise InvalidJob("depends_on takes at least one job or id")
        ids = [_job_id(j, "a job this one depends on") for j in jobs]
        self._depends = list(dict.fromkeys([*(self._depends or []), *ids]))
        return self

    @overload
    def on_dependency_failure(self) -> str: ...
    @overload
    def on_dependency_failure(self: _J, policy: str) -> _J: ...
    def on_dependency_failure(self, policy: Any = _UNSET) -> Any:
        """When a job it depends on fails for good: ``"wait"`` (default: stay blocked until
        that job is retried and completes), ``"fail"`` (fail at once) or ``"ignore"`` (count
        it as done)."""
        if policy is _UNSET:
            return self._on_dep_fail
        if policy not in POLICIES:
            raise InvalidJob(f"on_dependency_failure must be one of {', '.join(POLICIES)}")
        if self.id is not None:
            raise InvalidJob("the dependency failure policy is given before the job is saved")
        self._on_dep_fail = policy
        return self

    def _load_deps(self, h: dict[str, str]) -> None:
        """Read the dependency fields of a job hash."""
        count = h.get("depends")
        if count is not None and count.isdigit():
            self.depends_count = int(count)
        if h.get("on_dep_fail") in POLICIES:
            self._on_dep_fail = h["on_dep_fail"]
        self.has_dependents = "dependents" in h
        by = h.get("blocked_by")
        if by is not None and by.isdigit():
            self.blocked_by = int(by)

    def _deps_dict(self) -> dict[str, Any]:
        """The dependency keys of the job's JSON (none for a job without dependencies)."""
        out: dict[str, Any] = {}
        if self.depends_count:
            out["depends"] = self.depends_count
            out["onDependencyFailure"] = self._on_dep_fail
        if self.blocked_by is not None:
            out["blockedBy"] = self.blocked_by
        if self.has_dependents:
            out["hasDependents"] = True
        return out
