"""What ``kue rules`` keeps in Redis under the queue's prefix, and how it is read.

* ``<p>:rules:watchers`` (hash): watcher (its input list) -> JSON: its lists, its rules, the
  process running it (``holder``) and when that process was last heard of (``seen``, ms).
* ``<p>:rules:lock:<input>``: the token of the process running the watcher, expiring after
  :data:`LOCK_MS` unless renewed; one process runs a watcher at a time, and only under its
  token does an event's end get written (``make.lua``), so a process that stalls past its
  lease writes nothing once another has taken over.
* ``<p>:rules:counts`` (hash): ``<watcher>\\n<rule>\\n<counter>`` -> n (rule ``""`` for the
  watcher's own: events, replayed, unmatched, failed).
* ``<p>:rules:recent:<watcher>\\n<rule>`` (list): the rule's last :data:`RECENT` events
  and what each made (JSON), newest first.
* ``<p>:rules:failures`` (hash): ``<watcher>\\n<event>`` -> JSON {rule, kind, reason, at}: why
  an event in the failed list is there.

Resc's own lists (input, taken, failed, the tasks' queues and sets) keep their names.
"""

from __future__ import annotations

import json
import os
import socket
from importlib import resources
from typing import Any, cast

import redis

from kue_core import Keys, Queue

from .config import Watcher
from .keys import rules_key

#: How long a watcher's lock lasts unless renewed (ms); renewed every third of it.
LOCK_MS = 10_000
#: Events kept per rule, and tasks or jobs shown per event.
RECENT, RECENT_TASKS = 10, 20
#: Failures shown per watcher.
FAILURES_SHOWN = 20
#: Events moved per retry call.
RETRY_BATCH = 1000
#: Counters, the watcher's and each rule's, in the order they are shown.
WATCHER_COUNTERS = ("events", "replayed", "unmatched", "failed")
RULE_COUNTERS = ("matched", "tasks", "jobs", "duplicates", "fetch_errors", "make_errors")


def _script(client: redis.Redis, name: str) -> Any:
    text = (resources.files("kue_rules") / "scripts" / f"{name}.lua").read_text("utf-8")
    return client.register_script(text)


class Store:
    """The keys of ``kue rules`` under one queue's prefix."""

    def __init__(self, queue: Queue) -> None:
        self.queue = queue
        self.client: redis.Redis = queue.client
        keys: Keys = queue.keys
        self.watchers = rules_key(keys, "watchers")
        self.counts = rules_key(keys, "counts")
        self.failures = rules_key(keys, "failures")
        self._keys = keys
        self._make = _script(self.client, "make")
        self._lock = _script(self.client, "lock")
        self._retry = _script(self.client, "retry")

    def lock(self, input_list: str) -> str:
        return rules_key(self._keys, f"lock:{input_list}")

    def recent(self, input_list: str, rule: str) -> str:
        return rules_key(self._keys, f"recent:{input_list}\n{rule}")

    # -- the watcher's side -------------------------------------------------------------------
    def register(self, w: Watcher, holder: str, now_ms: int) -> None:
        """Describe watcher ``w``, run by ``holder``, as of ``now_ms``."""
        record = {
            "label": w.label,
            "input": w.input,
            "taken": w.taken,
            "failed": w.failed,
            "events": list(w.events) if w.events else None,
            "rules": [
                {"name": r.name, "on": r.on.pattern, "makes": "jobs" if r.make.job else "tasks"}
                for r in w.rules
            ],
            "holder": holder,
            "seen": now_ms,
        }
        self.client.hset(self.watchers, w.input, json.dumps(record))

    def take_lock(self, w: Watcher, token: str, mode: str = "take") -> bool:
        return bool(self._lock(keys=[self.lock(w.input)], args=[token, LOCK_MS, mode]))

    def finish(self, w: Watcher, token: str, event: str, plan: dict[str, Any]) -> list[int] | None:
        """Write the end of ``event`` (see ``make.lua``): per task, 1 pushed or 0 a
        duplicate; None when the lock is lost (nothing written)."""
        named = [self.lock(w.input), w.taken, self.counts, self.failures, w.failed]
        failed = plan.get("failed")
        rules = [failed["rule"]] if failed else plan.get("matched", ())
        named += [self.recent(w.input, rule) for rule in rules]
        plan["prefix"] = rules_key(self._keys, "")
        for task in plan.get("tasks", ()):
            named.append(task[1])
            if task[2]:
                named.append(task[2])
        reply = self._make(
            keys=named,
            args=[token, event, w.input, json.dumps(plan), RECENT, RECENT_TASKS],
        )
        if reply[0] == "lost":
            return None
        return [int(x) for x in reply[1:]]

    # -- the readers' side ---------------------------------------------------------------------
    def retry_failed(self, input_list: str) -> int:
        """Put the failed events of the watcher on ``input_list`` back on its input; how many."""
        record = self._record(input_list)
        if record is None:
            raise KeyError(input_list)
        moved = 0
        while True:
            n = int(
                self._retry(
                    keys=[record["failed"], record["input"], self.failures],
                    args=[input_list, RETRY_BATCH],
                )
            )
            moved += n
            if n < RETRY_BATCH:
                return moved

    def _record(self, input_list: str) -> dict[str, Any] | None:
        text = self.client.hget(self.watchers, input_list)
        return _json(text) if text else None

    def report(self, now_ms: int) -> list[dict[str, Any]]:
        """Every watcher known, with its lists' lengths, counters, rules and failures."""
        records = [
            r
            for r in (
                _json(t) for t in cast(dict[str, str], self.client.hgetall(self.watchers)).values()
            )
            if isinstance(r, dict)
        ]
        records.sort(key=lambda r: str(r.get("label")))
        counts = cast(dict[str, str], self.client.hgetall(self.counts))
        pipe = self.client.pipeline(transaction=False)
        for r in records:
            for name in ("input", "taken", "failed"):
                pipe.llen(r[name])
            for rule in r.get("rules", []):
                pipe.lrange(self.recent(r["input"], rule["name"]), 0, -1)
        replies = pipe.execute(raise_on_error=False)
        lengths, recent = [], {}
        for r in records:
            lengths += replies[:3]
            replies = replies[3:]
            for rule in r.get("rules", []):
                recent[f"{r['input']}\n{rule['name']}"] = replies.pop(0)
        failures = self._failures()
        out = []
        for i, r in enumerate(records):
            w = r["input"]
            sizes = [x if isinstance(x, int) else None for x in lengths[3 * i : 3 * i + 3]]
            out.append(
                {
                    "label": r["label"],
                    "input": w,
                    "taken": r["taken"],
                    "failed": r["failed"],
                    "events": r.get("events"),
                    "lengths": dict(zip(("input", "taken", "failed"), sizes, strict=True)),
                    "holder": r.get("holder"),
                    "seen": r.get("seen"),
                    "running": now_ms - int(r.get("seen") or 0) <= 3 * LOCK_MS,
                    "counts": _counts(counts, w, "", WATCHER_COUNTERS),
                    "rules": [
                        {
                            **rule,
                            "counts": _counts(counts, w, rule["name"], RULE_COUNTERS),
                            "recent": _recent(recent.get(f"{w}\n{rule['name']}")),
                        }
                        for rule in r.get("rules", [])
                    ],
                    "failures": failures.get(w, [])[:FAILURES_SHOWN],
                }
            )
        return out

    def _failures(self) -> dict[str, list[dict[str, Any]]]:
        out: dict[str, list[dict[str, Any]]] = {}
        for field, text in self.client.hscan_iter(self.failures, count=1000):
            w, _, event = str(field).partition("\n")
            value = _json(text)
            if isinstance(value, dict):
                out.setdefault(w, []).append({"event": event, **value})
        for rows in out.values():
            rows.sort(key=lambda f: -int(f.get("at") or 0))
        return out


def holder() -> str:
    """How a process running watchers is shown: host and pid."""
    return f"{socket.gethostname()}:{os.getpid()}"


def _json(text: Any) -> Any:
    try:
        return json.loads(text)
    except (TypeError, ValueError):
        return None


def _counts(counts: dict[str, str], w: str, rule: str, names: tuple[str, ...]) -> dict[str, int]:
    return {n: int(counts.get(f"{w}\n{rule}\n{n}", 0)) for n in names}


def _recent(texts: Any) -> list[dict[str, Any]]:
    out = []
    for e in map(_json, texts if isinstance(texts, list) else []):
        if isinstance(e, dict):  # Lua's cjson writes an empty list as {}
            e["tasks"] = e.get("tasks") or []
            e["jobs"] = e.get("jobs") or []
            out.append(e)
    return out
