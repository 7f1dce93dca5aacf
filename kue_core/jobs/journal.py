"""What a job's journal says, read for either client: its log lines and its history
(operations as in :mod:`kue_core.jobs.ops`), each opened under the queue's keys when the
queue encrypts them (:mod:`kue_core.base.sealing`; one under a key it lacks stays as stored).
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from .. import defaults
from ..base import checks, sealing
from ..base.keys import Keys
from ..base.sealing import Keyring
from ..base.values import num
from ..features import records
from ..store.calls import Op, read
from .log_lines import LogLine
from .log_lines import parse as parse_log_line
from .ops import Side
from .spec import JobSpec


def get_log(keys: Keys, job_id: int | str, ring: Keyring | None = None) -> Op[list[str]]:
    """The job's log lines as its handlers wrote them (empty for an unknown job, as Kue)."""
    lines = yield from get_log_lines(keys, job_id, ring)
    return [line.text for line in lines]


def get_log_lines(keys: Keys, job_id: int | str, ring: Keyring | None = None) -> Op[list[LogLine]]:
    """The job's log lines with when each was written and in which attempt (see
    :mod:`kue_core.jobs.log_lines`)."""
    (lines,) = yield read(("LRANGE", keys.log(checks.job_id(job_id)), 0, -1))
    parsed = [parse_log_line(str(line)) for line in lines]
    if ring is None:
        return parsed
    return [dataclasses.replace(p, text=sealing.opened_text(ring, p.text, "log")) for p in parsed]


def history(side: Side[JobSpec], job_id: int | str) -> Op[list[dict[str, Any]]]:
    """The job's recent transitions, oldest first (see ``Queue.history``)."""
    jid = checks.job_id(job_id)
    keys = side.keys
    listed, (created_at, delay, trail, worker) = yield read(
        ("LRANGE", keys.history(jid), 0, -1),
        ("HMGET", keys.job(jid), "created_at", "delay", "trail", "workerId"),
    )
    entries = [json.loads(e) for e in listed]
    ring = sealing.of(side)
    if ring is not None:
        for entry in entries:
            if isinstance(entry.get("error"), str):
                entry["error"] = sealing.opened_text(ring, entry["error"], "error")
    if not entries and created_at is not None:
        # Saved waiting and not moved since: its save entry is implied (lib/events.lua saved_entry).
        state = "delayed" if (num(delay) or 0) > 0 else "inactive"
        entries.append({"state": state, "at": num(created_at)})
    if trail:
        entries += records.trail_entries(trail, worker)
    return entries[-defaults.HISTORY_LENGTH :]
