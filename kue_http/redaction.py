"""What of a job's payload a user is shown (docs/security.md, "Who sees payloads").

A job's payload is its data, its result, its progress data, its runs' results, the signals it
was given, its steps' results and the parts it streamed (the error
and the log lines are what an operator works with, and are shown to every role: a handler
should keep payloads out of them). Every answer and page that holds a payload passes it
through here:

- a user whose role may not see payloads (below ``admin``) gets each of those fields as
  :data:`HIDDEN`;
- fields declared sensitive (``KUE_SENSITIVE_FIELDS``: ``<type>:<path>``, comma-separated,
  ``*`` for every type, a path of keys joined by dots) are :data:`HIDDEN` for every role,
  ``admin`` included, wherever the path leads in the data, the result, the progress data, a
  signal's payload, a step's result or a streamed part;
- a job's JSON names what it hides in ``"hidden"`` (``["data"]``, ``["data.card.number"]``);
- ``POST /job/<id>/reveal`` shows it whole to a role from ``KUE_REVEAL_ROLE`` (``admin``
  unless set), and records who, which job and when in the audit log first.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from flask import current_app

from kue_core import Job

from . import security
from .users import ROLES

#: What a hidden value is shown as.
HIDDEN = "[hidden]"
#: The fields of a job's JSON that are its payload.
PAYLOAD = ("data", "result", "progress_data", "signals", "steps")
#: Those of them that map names to payloads (a signal's, a step's result; so does a fan-out
#: job's result, worker -> its run's result): a sensitive path leads into each payload, as
#: into the data.
BY_NAME = ("signals", "steps")
#: The role from which payloads are shown unless declared sensitive.
SEES_PAYLOADS = "admin"
#: Events on the stream whose arguments after the first are a payload (a result; progress,
#: then its data).
_EVENT_PAYLOAD = {"complete": 1, "progress": 2}


class SensitiveError(ValueError):
    """``KUE_SENSITIVE_FIELDS`` cannot be read: the message says which entry and why."""


def parse_sensitive(text: str | None) -> dict[str, tuple[tuple[str, ...], ...]]:
    """``type -> paths`` of ``KUE_SENSITIVE_FIELDS`` (``<type>:<path>``, comma-separated;
    the type may hold colons, the path is the part after the last one)."""
    out: dict[str, list[tuple[str, ...]]] = {}
    for n, entry in enumerate((text or "").split(","), 1):
        entry = entry.strip()
        if not entry:
            continue
        job_type, colon, path = entry.rpartition(":")
        parts = tuple(path.split("."))
        if not colon or not job_type or not all(parts):
            raise SensitiveError(
                f"KUE_SENSITIVE_FIELDS, entry {n} ({entry!r:.100}): written <type>:<path>, "
                "a path of keys joined by dots (card.number), the type * for every type"
            )
        out.setdefault(job_type, []).append(parts)
    return {t: tuple(paths) for t, paths in out.items()}


@dataclass(frozen=True)
class View:
    """What one user is shown: payloads or not, and which paths are masked anyway."""

    payloads: bool
    sensitive: dict[str, tuple[tuple[str, ...], ...]] = field(default_factory=dict)

    def paths(self, job_type: str | None) -> tuple[tuple[str, ...], ...]:
        """The sensitive paths of a type (None: of every type, for a value whose job's type
        is not read)."""
        if job_type is None:
            return tuple(p for paths in self.sensitive.values() for p in paths)
        return self.sensitive.get(job_type, ()) + self.sensitive.get("*", ())

    def value(self, value: Any, name: str, job_type: str | None, hidden: list[str]) -> Any:
        """``value`` (the job's ``name`` field) as shown; what was hidden is added to
        ``hidden``. The value itself is never changed."""
        if not self.payloads:
            hidden.append(name)
            return HIDDEN
        paths = self.paths(job_type)
        if not paths or not isinstance(value, dict):
            return value
        shown = None
        for path in paths:
            if _has(value, path):
                shown = shown if shown is not None else copy.deepcopy(value)
                _mask(shown, path)
                hidden.append(".".join((name, *path)))
        return value if shown is None else shown

    @property
    def whole(self) -> bool:
        """Whether this view shows every payload as it is."""
        return self.payloads and not self.sensitive


#: What a reader without roles sees (the command line: whoever reads Redis reads it all).
WHOLE = View(payloads=True)


def view() -> View:
    """What the user of the current request is shown."""
    return View(
        payloads=security.user().may(SEES_PAYLOADS),
        sensitive=current_app.config["kue_sensitive"],
    )


def may_reveal() -> bool:
    """Whether the user of the current request may reveal a job's payload."""
    return security.user().may(current_app.config["KUE_REVEAL_ROLE"])


def job_dict(job: Job, shown: View | None = None) -> dict[str, Any]:
    """A job's JSON (``Job.to_dict``) with its payload as ``shown`` (the current user's view
    unless given) lets it be seen, and ``"hidden"`` naming what it hides."""
    out = job.to_dict()
    shown = shown or view()
    if shown.whole:
        return out
    hidden: list[str] = []
    for name in PAYLOAD:
        if name not in out:
            continue
        value = out[name]
        by_name = name in BY_NAME or (name == "result" and "fanOut" in out)
        if by_name and shown.payloads and isinstance(value, dict):
            # Each signal's payload, each step's result, a fan-out job's result of each
            # worker, is masked as data is.
            out[name] = {
                k: shown.value(v, f"{name}.{k}", job.type, hidden) for k, v in value.items()
            }
        else:
            out[name] = shown.value(value, name, job.type, hidden)
    for run in out.get("runs", ()):
        if "result" in run:
            where = f"runs.{run.get('worker')}"
            run["result"] = shown.value(run["result"], where, job.type, hidden)
    if hidden:
        out["hidden"] = hidden
    return out


def title(job: Job, shown: View | None = None) -> Any:
    """The job's ``data.title`` as the user of the current request may see it (``shown``: as
    that view shows it; ``WHOLE`` outside a request: the command line's), ``""`` when it has
    none."""
    data = job.data if isinstance(job.data, dict) else None
    if data is None or "title" not in data:
        return ""
    shown = shown or view()
    if shown.whole:
        return data["title"]
    if not shown.payloads or any(p[0] == "title" for p in shown.paths(job.type)):
        return HIDDEN
    return data["title"]


def results(found: dict[int, Any], shown: View | None = None) -> dict[int, Any]:
    """The results of a job's dependencies (``{id: result}``), as the user may see them; their
    types are not read, so every type's sensitive paths apply."""
    shown = shown or view()
    if shown.whole:
        return found
    ignored: list[str] = []
    return {k: shown.value(v, "result", None, ignored) for k, v in found.items()}


def event(message: dict[str, Any], shown: View) -> dict[str, Any]:
    """An event of the stream as the user may see it: the result of ``complete`` and the data
    of ``progress`` go as a job's would."""
    args = message.get("args")
    at = _EVENT_PAYLOAD.get(str(message.get("event")))
    if shown.whole or at is None or not isinstance(args, list) or len(args) <= at:
        return message
    ignored: list[str] = []
    job_type = message.get("type") if isinstance(message.get("type"), str) else None
    name = "result" if at == 1 else "progress_data"
    args = [*args[:at], shown.value(args[at], name, job_type, ignored), *args[at + 1 :]]
    return {**message, "args": args}


def schedule_data(data: Any, job_type: str, shown: View | None = None) -> Any:
    """A schedule's data (what each job it makes gets) as the user may see it."""
    shown = shown or view()
    return data if shown.whole else shown.value(data, "data", job_type, [])


def check_role(text: str) -> str:
    """``KUE_REVEAL_ROLE``: one of the roles."""
    if text not in ROLES:
        raise SensitiveError(f"KUE_REVEAL_ROLE must be one of {', '.join(ROLES)}, got {text!r:.40}")
    return text


def _has(value: Any, path: tuple[str, ...]) -> bool:
    for key in path:
        if not isinstance(value, dict) or key not in value:
            return False
        value = value[key]
    return True


def _mask(value: dict[str, Any], path: tuple[str, ...]) -> None:
    for key in path[:-1]:
        value = value[key]
    value[path[-1]] = HIDDEN
