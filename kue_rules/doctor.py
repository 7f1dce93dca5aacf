"""kue doctor's look at the keys of job event feeds (:mod:`kue_core.features.feeds`) and of
``kue rules`` (``<p>:rules:*``, see kue_rules/store.py).

``unread-feed``
    a type's feed that no ``kue rules`` watcher has read from (none in
    ``<p>:rules:watchers`` takes from its list): its entries pile up for ever. A person
    decides: run ``kue rules`` with a watcher on it, or stop the feed (``queue.unfeed``).
``bad-rules-record``
    a field of ``<p>:rules:watchers`` that is not a watcher's JSON: the Rules page and
    ``GET /api/rules`` skip it. A person removes it (HDEL; its watcher writes it again when it
    runs).
``stuck-rules-lock``
    a watcher's lock (``<p>:rules:lock:<input>``) without an expiry: no process can take
    the watcher over when its holder is gone. A person deletes it (a live holder takes it
    again within a second): kue doctor cannot tell a lock set so on purpose.

The check reads the types' rules in ``<p>:limits``, the hash ``<p>:rules:watchers`` and one
key per watcher: it scans no keyspace.
"""

from __future__ import annotations

import json
from typing import Any

from kue_core.doctor import Checker

from .keys import rules_key


def check(c: Checker) -> None:
    """Add the feeds' and rules' findings to ``c``'s report."""
    watchers = _watchers(c)
    read = {str(w.get("input")) for w in watchers}
    if c.client.type(c.keys.limits) == "hash":  # else the doctor's limits check reports it
        for job_type, text in c.client.hscan_iter(c.keys.limits, count=c.batch):
            for event in _feeds(str(text)):
                key = c.keys.feed(event, str(job_type))
                if key not in read:
                    n = c.client.llen(key) if c.client.type(key) == "list" else 0
                    c.add(
                        "unread-feed",
                        key,
                        f"the {event} events of type {str(job_type)!r} go to {key} ({n} "
                        "waiting) but no kue rules watcher has read it",
                        f"run kue rules with a watcher on them, or queue.unfeed({str(job_type)!r},"
                        f" {event!r})",
                    )
    pipe = c.client.pipeline(transaction=False)
    locks = [rules_key(c.keys, f"lock:{w['input']}") for w in watchers]
    for key in locks:
        pipe.pttl(key)
    for key, ttl in zip(locks, pipe.execute(), strict=True):
        if ttl == -1:
            c.add(
                "stuck-rules-lock",
                key,
                f"{key} has no expiry: no kue rules process can take its watcher over",
                "delete it (DEL): a live holder takes it again within a second",
            )


def _feeds(text: str) -> list[str]:
    try:
        rules = json.loads(text)
    except ValueError:
        return []
    fed = rules.get("feeds") if isinstance(rules, dict) else None
    return sorted(fed) if isinstance(fed, dict) else []


def _watchers(c: Checker) -> list[dict[str, Any]]:
    key = rules_key(c.keys, "watchers")
    kind = c.client.type(key)
    if kind != "hash":
        if kind != "none":
            c.add("wrong-type", key, f"{key} is a {kind!s}, not what kue keeps there", "delete it")
        return []
    out = []
    for field, text in c.client.hscan_iter(key, count=c.batch):
        try:
            value = json.loads(text)
        except ValueError:
            value = None
        if isinstance(value, dict) and isinstance(value.get("input"), str):
            out.append(value)
        else:
            c.add(
                "bad-rules-record",
                key,
                f"{key} holds {str(text)!r:.200} for watcher {str(field)!r}: not a watcher's JSON",
                "remove it",
            )
    return out
