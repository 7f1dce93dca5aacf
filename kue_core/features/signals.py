"""Signals (issue 55, second step): a job that waits for something outside it (a person's
approval, a webhook) without holding a worker's slot.

A handler raises :class:`~kue_core.base.errors.WaitForSignal` (``"approval"``, a timeout):
its attempt ends, no attempt counted, and the job is ``suspended`` (``suspend.lua``): out of
``active``, indexed like Kue's states (``<p>:jobs:suspended``, ``<p>:jobs:<type>:suspended``:
counts, lists, the dashboard's tab), holding no slot and no lease. ``queue.signal(job_id,
"approval", payload)`` (``signal.lua``) keeps the payload on the job (hash field
``signal:<name>``) and, when the job waits for that signal, puts it back to wait for a worker
(``resumed``); one sent before the job waits is kept, and resumes it as soon as it waits. Only
the first signal of a name counts (a second is told ``already``): one resumption per signal,
whatever runs at once. The job's next attempt reads ``job.signals[name]``. When the wait's
deadline passes first, the promoter (``promote.lua``) resumes the job without the signal
(``job.resumed.by == "timeout"``) or fails it, as the handler chose (``on_timeout``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from .. import defaults
from ..base.errors import InvalidJob
from ..base.errors import check_signal_name as check_name
from ..base.sealing import Keyring
from ..base.values import to_json

#: The prefix of a signal's field in its job's hash.
FIELD = "signal:"
#: How ``queue.signal()`` went: the job waited for it and waits for a worker now; it is kept
#: until the job waits for it; the job had that signal already (nothing changed).
OUTCOMES = ("resumed", "kept", "already")
#: What each outcome tells a person (the API's message, the command line's line).
TOLD = {
    "resumed": "job {id} resumed by signal {name}",
    "kept": "signal {name} kept for job {id}",
    "already": "job {id} had signal {name} already: nothing changed",
}

__all__ = [
    "FIELD",
    "OUTCOMES",
    "TOLD",
    "Resumed",
    "SignalFields",
    "SignalState",
    "Waiting",
    "check_name",
]


@dataclass(frozen=True)
class Waiting:
    """What a suspended job waits for: the signal's name, its deadline (ms; None: none) and
    what its timeout does (``resume`` or ``fail``)."""

    name: str
    until: int | None
    on_timeout: str


@dataclass(frozen=True)
class Resumed:
    """How a job's last wait ended: the signal waited for, ``by`` ``signal``, ``timeout`` or
    ``doctor`` (``kue doctor --repair`` ended a wait that could not end), and when (ms)."""

    name: str
    by: str
    at: int


@dataclass(frozen=True)
class SignalState:
    """A job's signals (name -> payload), its wait, and how its last wait ended."""

    received: dict[str, Any]
    waiting: Waiting | None
    resumed: Resumed | None


class SignalFields:
    """Part of a job: what it was signalled, and its waits."""

    _signal_state: SignalState | None = None

    @property
    def signals(self) -> dict[str, Any]:
        """The signals the job was given: name -> payload (``queue.signal()``), as read with
        it; a handler reads them in the attempt after its wait."""
        return dict(self._signal_state.received) if self._signal_state else {}

    @property
    def waiting_for(self) -> Waiting | None:
        """What the job waits for while ``suspended``; else None."""
        return self._signal_state.waiting if self._signal_state else None

    @property
    def resumed(self) -> Resumed | None:
        """How its last wait for a signal ended (``by`` ``signal``, ``timeout`` or ``doctor``);
        None for a job that never waited."""
        return self._signal_state.resumed if self._signal_state else None


def has_signals(h: dict[str, str]) -> bool:
    """Whether a job's hash holds anything of signals (a plain job's never does)."""
    return "signals" in h or "suspended" in h or "resumed" in h


def from_hash(h: dict[str, str], opened: Any) -> SignalState:
    """A job's signal fields; ``opened(text, field)`` opens a sealed payload."""
    received = {}
    for key, text in h.items():
        if key.startswith(FIELD):
            received[key[len(FIELD) :]] = _json(opened(text, key), text)
    wait = _json(h.get("suspended"), None)
    waiting = None
    if isinstance(wait, dict):
        until = wait.get("until")
        waiting = Waiting(str(wait.get("name")), until if isinstance(until, int) else None,
                          str(wait.get("on_timeout", "resume")))  # fmt: skip
    done = _json(h.get("resumed"), None)
    resumed = None
    if isinstance(done, dict):
        resumed = Resumed(str(done.get("name")), str(done.get("by")), int(done.get("at") or 0))
    return SignalState(received, waiting, resumed)


def as_json(state: SignalState | None) -> dict[str, Any]:
    """A job's JSON's signal fields (none for a job that has none)."""
    if state is None:
        return {}
    out: dict[str, Any] = {}
    if state.received:
        out["signals"] = dict(state.received)
    if state.waiting is not None:
        w = state.waiting
        out["waiting_for"] = {"name": w.name, "until": w.until, "on_timeout": w.on_timeout}
    if state.resumed is not None:
        r = state.resumed
        out["resumed"] = {"name": r.name, "by": r.by, "at": r.at}
    return out


def payload_text(name: str, payload: Any, ring: Keyring | None) -> str:
    """Signal ``name``'s payload as stored: JSON, at most ``SIGNAL_PAYLOAD_BYTES``, sealed
    when the queue has keys (under its field's name: a payload copied to another signal's
    field does not open)."""
    text = to_json(payload, "signal payload")
    most = defaults.SIGNAL_PAYLOAD_BYTES
    if len(text.encode()) > most:
        raise InvalidJob(f"a signal's payload is at most {most:,} bytes of JSON")
    return text if ring is None else ring.seal(text, FIELD + name)


def _json(text: str | None, default: Any) -> Any:
    if text is None:
        return default
    try:
        return json.loads(text)
    except ValueError:
        return text if default is None else default
