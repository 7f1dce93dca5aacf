"""Fan-out jobs: a job that must succeed on ``k`` distinct worker processes, each a *run*
(``job.fan_out(3)``, ``job.fan_out("all")``).

* **Options**, given before the save: ``k`` (1..``defaults.MAX_PINS``, at most the workers of
  ``only`` when given) or ``"all"``; ``at_once`` (how many runs at a time; default all),
  ``max_failed_runs`` (failed runs tolerated; default 0), ``late_joiners`` (``"all"`` only).
  A fan-out job has no group.
* ``fan_out("all")`` is resolved by the save: the targets are the live workers serving the
  type (registered, heartbeat within their lease, not stopping; among ``only`` when given),
  and the job is saved pinned to them with ``k`` = their number. With none alive it completes
  at once with the result ``{}``. With ``late_joiners``, a worker serving the type that claims
  it while the job is unfinished joins: it becomes a target and ``k`` grows by one.
* **Runs** (``<p>:job:<id>:runs``, worker id -> JSON): each has its own token (the job's
  ``lease`` counter, bumped per run) and lease (``<p>:run-leases``), so a worker runs its run
  as any job. A worker never holds two runs of one job, and one that completed does not run
  it again. The job completes once ``k`` runs have, with the result ``{worker: result}``;
  past ``max_failed_runs`` failed runs it fails for good and its other runs stop. A run lost
  (lease expired, worker shut down) opens its place again.

The scripts keep all of this (see the fan-out blocks of ``scripts/lib/runs.lua``); here are the
options' checks and the reading of a job's runs.
"""

from __future__ import annotations

import json
from typing import Any, TypeVar

from .. import defaults
from ..base import checks
from ..base.errors import InvalidJob

ALL = "all"
_UNSET: Any = object()
_F = TypeVar("_F", bound="FanOutOptions")


def options(
    k: object,
    at_once: object,
    max_failed_runs: object,
    late_joiners: object,
    only: list[str] | None,
    group: str | None,
) -> dict[str, Any]:
    """The checked options of ``fan_out``, as ``to_dict`` shows them; else ``InvalidJob``."""
    if k != ALL:
        k = checks.integer(k, "fan_out", 1, defaults.MAX_PINS)
        if only is not None and k > len(only):
            raise InvalidJob(f"fan_out({k}) needs {k} workers, but only names {len(only)}")
    if at_once is not None:
        at_once = checks.integer(at_once, "at_once", 1, k if isinstance(k, int) else None)
    max_failed_runs = checks.integer(max_failed_runs, "max_failed_runs", 0)
    if not isinstance(late_joiners, bool):
        raise InvalidJob(f"late_joiners must be true or false, got {late_joiners!r:.60}")
    if late_joiners and k != ALL:
        raise InvalidJob('late_joiners goes with fan_out("all") only')
    if group is not None:
        raise InvalidJob("a fan-out job cannot have a group")
    return {
        "k": k,
        "atOnce": at_once,
        "maxFailedRuns": max_failed_runs,
        "lateJoiners": late_joiners,
    }


def save_value(opts: dict[str, Any]) -> dict[str, Any]:
    """The options as the save's records object carries them (see ``save_job`` in
    lib/saving.lua)."""
    out: dict[str, Any] = {"fan_out": opts["k"], "mfr": opts["maxFailedRuns"]}
    if opts["atOnce"] is not None:
        out["at_once"] = opts["atOnce"]
    if opts["lateJoiners"]:
        out["late"] = 1
    return out


def from_hash(h: dict[str, str]) -> dict[str, Any] | None:
    """The options of a stored job (``k`` resolved), or None for a job that does not fan out."""
    if "fan_out" not in h:
        return None

    def number(name: str) -> int | None:
        text = h.get(name)
        return int(text) if text is not None and text.isdigit() else None

    return {
        "k": number("fan_out"),
        "atOnce": number("at_once"),
        "maxFailedRuns": number("max_failed_runs") or 0,
        "lateJoiners": h.get("late") == "1",
    }


#: The keys of ``fan_out`` given as a JSON object (the REST API, schedules, kue rules), and
#: the keyword of ``Job.fan_out`` each stands for.
_JSON_KEYS = {
    "atOnce": "at_once",
    "maxFailedRuns": "max_failed_runs",
    "lateJoiners": "late_joiners",
    "resetRuns": "reset_runs",
}


def apply_json(job: Any, value: object) -> Any:
    """Apply ``fan_out`` as JSON gives it to ``job``: ``k`` (an integer), ``"all"``, or an
    object ``{"k", "atOnce", "maxFailedRuns", "lateJoiners", "resetRuns"}`` with ``k``
    required; else ``InvalidJob``."""
    if isinstance(value, dict):
        unknown = set(value) - {"k", *_JSON_KEYS}
        if "k" not in value or unknown:
            raise InvalidJob(
                'a fan-out is k, "all", or {"k", "atOnce", "maxFailedRuns", "lateJoiners", '
                f'"resetRuns"}} with k required, got {value!r:.100}'
            )
        given = {_JSON_KEYS[name]: v for name, v in value.items() if name != "k"}
        return job.fan_out(value["k"], **given)
    return job.fan_out(value)


#: The keys of a run as ``job.runs()`` gives it.
_RUN_KEYS = ("state", "started_at", "ended_at", "result", "error", "tries")


def parse(raw: dict[str, str]) -> list[dict[str, Any]]:
    """A runs hash (worker id -> JSON) as a list of runs, ordered by start (absent keys left
    out; the token is the worker's business)."""
    out: list[dict[str, Any]] = []
    for worker, text in raw.items():
        try:
            run = json.loads(text)
        except ValueError:
            continue
        if isinstance(run, dict):
            entry: dict[str, Any] = {"worker": worker}
            entry.update((k, run[k]) for k in _RUN_KEYS if k in run)
            out.append(entry)
    out.sort(key=lambda run: (run.get("started_at") or 0, run["worker"]))
    return out


class FanOutOptions:
    """Part of a job: ``fan_out``. A plain job sets nothing here."""

    id: int | None
    _records: bool
    _only: list[str] | None
    _group: str | None
    _unique: Any
    _fan_out: dict[str, Any] | None = None
    _reset_runs = False
    _runs: list[dict[str, Any]] | None = None

    def fan_out(
        self,
        k: Any = _UNSET,
        *,
        at_once: int | None = None,
        max_failed_runs: int = 0,
        late_joiners: bool = False,
        reset_runs: bool = False,
    ) -> Any:
        """Run the job on ``k`` distinct worker processes (or ``"all"``: every live worker
        serving its type when it is saved) and complete it once each completed its run, with
        the result ``{worker id: result}``; see :mod:`kue_core.features.runs`. ``at_once``: how many
        runs at a time (default: all); ``max_failed_runs``: failed runs tolerated before the
        job fails for good; ``late_joiners`` (``"all"`` only): workers that start serving the
        type while it is unfinished join it. ``fan_out("all")`` with no worker alive
        completes the job at once with the result ``{}``. A fan_out("all") job keeps the
        targets and ``k`` resolved at its save when it waits again (by hand, a retry, a
        ``reuse`` save): it starts over with no runs, and needs ``k`` new ones.
        ``reset_runs`` (with a unique key; an option of this publish, stored nowhere): when
        the save is deduplicated onto an active fan-out job of the key, that job's failed
        runs are cleared, so their workers may try again within a fresh
        ``max_failed_runs``; its complete and running runs stay. Given before the save;
        without arguments, the options as a dict (``k``, ``atOnce``, ``maxFailedRuns``,
        ``lateJoiners``) or None."""
        if k is _UNSET:
            return dict(self._fan_out) if self._fan_out is not None else None
        if self.id is not None:
            raise InvalidJob("fan_out is given before the job is saved")
        if not isinstance(reset_runs, bool):
            raise InvalidJob(f"reset_runs must be true or false, got {reset_runs!r:.60}")
        self._fan_out = options(k, at_once, max_failed_runs, late_joiners, self._only, self._group)
        self._reset_runs = reset_runs
        self._records = True
        return self

    def _fan_out_value(self) -> dict[str, Any] | None:
        """The records object's fan-out entries, checked again against ``only`` and the group
        as they are at the save."""
        f = self._fan_out
        if f is None:
            return None
        f = options(
            f["k"], f["atOnce"], f["maxFailedRuns"], f["lateJoiners"], self._only, self._group
        )
        out = save_value(f)
        if self._reset_runs:
            if self._unique is None:
                raise InvalidJob("reset_runs goes with a unique key (job.unique(key))")
            out["reset"] = 1
        return out

    def running_on(self) -> list[str]:
        """The workers whose run of this job was running when it was read (``get_job``,
        ``page``); none for a job that does not fan out."""
        return [run["worker"] for run in self._runs or () if run.get("state") == "running"]
