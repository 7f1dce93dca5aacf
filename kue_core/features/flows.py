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


#: What ``depends_on`` takes, in its messages.
DEPENDS_ON_FORMS = (
    "a saved job, a job id (an integer or a string of digits), or a non-empty list or tuple of them"
)


def dependency_ids(
    value: object, name: str = "depends_on", forms: str = DEPENDS_ON_FORMS
) -> list[int]:
    """The ids of the jobs ``value`` names: a saved job (of either client), a job id (an
    integer or a string of digits) or a non-empty list or tuple of them. Anything else
    raises ``InvalidJob`` naming what was given and the accepted forms (``name`` is the
    option's name, ``forms`` those forms, in the message). An empty list is refused: "depend
    on nothing" is said by leaving the option out, and a list that came out empty by mistake
    would otherwise make a job run before the jobs it was meant to wait for."""
    items = list(value) if isinstance(value, list | tuple) else [value]
    if not items:
        raise InvalidJob(
            f"{name} takes {forms}; got an empty {type(value).__name__} (to depend on no "
            f"job, leave {name} out)"
        )
    ids = []
    for item in items:
        if is_job(item):
            job_id = getattr(item, "id", None)
            if job_id is None:
                raise InvalidJob(
                    f"{name}: {item!r:.100} is not saved yet: save it first, or save both in "
                    "one queue.flow()"
                )
            ids.append(int(job_id))
            continue
        try:
            ids.append(checks.job_id(item))
        except InvalidJob:
            within = f" (in {value!r:.100})" if item is not value else ""
            raise InvalidJob(f"{name} takes {forms}; got {item!r:.100}{within}") from None
    return ids


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

    def depends_on(
        self: _J, *jobs: Saved | int | str | list[Saved | int | str] | tuple[Saved | int | str, ...]
    ) -> _J:
        """Wait, once saved, until each of ``jobs`` completes: saved jobs, their ids (ints or
        strings of digits), or lists or tuples of them (``depends_on(a, b)`` and
        ``depends_on([a, b])`` are the same); an unknown id is refused by ``save()``. Given
        again, adds to them. Anything else raises ``InvalidJob`` naming it."""
        if self.id is not None:
            raise InvalidJob("dependencies are given before the job is saved")
        if not jobs:
            raise InvalidJob(f"depends_on takes {DEPENDS_ON_FORMS}; got nothing")
        ids = [i for given in jobs for i in dependency_ids(given)]
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
