"""``kue rules`` (``kue_http/rules.py``) in the OpenAPI document; the package merges them
in."""

from __future__ import annotations

from kue_rules.store import FAILURES_SHOWN, RECENT, RECENT_TASKS, RULE_COUNTERS, WATCHER_COUNTERS

from .build import COUNT, MS, Schema, array, json_body, obj, ok, read, ref, write

_NAME = {"type": "string", "minLength": 1}
_LENGTH = {
    "type": ["integer", "null"],
    "minimum": 0,
    "description": "Its length; null when the key holds something other than a list",
}
_RECENT_EVENT = obj(
    {
        "at": MS,
        "event": {"type": "string", "description": "The event, as taken from the input"},
        "tasks": array(
            {
                "type": "array",
                "prefixItems": [
                    {"type": "string", "description": "The queue (list) it went to"},
                    {"type": "string", "description": "The task"},
                    {
                        "type": "boolean",
                        "description": "Pushed (false: its dedupe set held it already)",
                    },
                ],
                "items": False,
                "minItems": 3,
            },
            f"Tasks made, the first {RECENT_TASKS}.",
            max_items=RECENT_TASKS,
        ),
        "jobs": array(
            {
                "type": "array",
                "prefixItems": [
                    {"type": "integer", "minimum": 1, "description": "The job's id"},
                    {
                        "type": "boolean",
                        "description": "Deduplicated: no new job, the one holding the key",
                    },
                ],
                "items": False,
                "minItems": 2,
            },
            f"Jobs made, the first {RECENT_TASKS}.",
            max_items=RECENT_TASKS,
        ),
        "duplicates": {**COUNT, "description": "Tasks or jobs a dedupe held already"},
        "more": {**COUNT, "description": "Tasks and jobs made beyond those listed"},
        "error": {"type": "string", "description": "Why the event failed (it made nothing)"},
    },
    optional="tasks jobs duplicates more error",
)


def paths() -> Schema:
    return {
        "/rules": {
            "get": read(
                "rules",
                "Every watcher a kue rules process has run under this prefix: its lists and "
                "their lengths, whether a process runs it now, its counters, its rules with "
                "their counters and recent events, and its failed events with their reasons",
                ok(obj({"watchers": array(ref("Watcher"), "Sorted by label.")})),
            )
        },
        "/rules/retry": {
            "post": write(
                "rules",
                "Put the failed events of a watcher back on its input, the oldest first, to be "
                "handled again; their failure reasons are forgotten",
                ok(obj({"moved": {**COUNT, "description": "Events moved back to the input"}})),
                400,
                404,
                413,
                body=json_body(
                    obj(
                        {
                            "watcher": {
                                **_NAME,
                                "description": "The watcher: its input list's name",
                            }
                        }
                    ),
                    "The watcher whose failed events to retry.",
                ),
            )
        },
    }


def schemas() -> Schema:
    return {
        "Watcher": obj(
            {
                "label": {
                    "type": "string",
                    "description": "Its input list, or '<event> of <type>' on job events",
                },
                "input": {"type": "string", "description": "The list events come from"},
                "taken": {"type": "string", "description": "Events being handled"},
                "failed": {"type": "string", "description": "Events that failed (dead letters)"},
                "events": {
                    "oneOf": [
                        {"type": "null"},
                        {
                            "type": "array",
                            "prefixItems": [_NAME, _NAME],
                            "items": False,
                            "minItems": 2,
                        },
                    ],
                    "description": "[job type, event] of a watcher on job events, else null",
                },
                "lengths": obj({"input": _LENGTH, "taken": _LENGTH, "failed": _LENGTH}),
                "holder": {
                    "type": ["string", "null"],
                    "description": "The process that ran it last ('' when it could not take "
                    "the watcher's lock)",
                },
                "seen": {
                    "type": ["integer", "null"],
                    "minimum": 0,
                    "description": "When that process was last heard of (ms)",
                },
                "running": {
                    "type": "boolean",
                    "description": "Whether a process was heard of running it lately",
                },
                "counts": obj({name: COUNT for name in WATCHER_COUNTERS}),
                "rules": array(ref("WatcherRule")),
                "failures": array(
                    obj(
                        {
                            "event": {"type": "string"},
                            "rule": {"type": "string", "description": "'' for none"},
                            "kind": {"enum": ["fetch", "make"]},
                            "reason": {"type": "string"},
                            "at": MS,
                        }
                    ),
                    f"Failed events, the newest first, at most {FAILURES_SHOWN}.",
                    max_items=FAILURES_SHOWN,
                ),
            }
        ),
        "WatcherRule": obj(
            {
                "name": _NAME,
                "on": {"type": "string", "description": "Its regular expression"},
                "makes": {"enum": ["tasks", "jobs"]},
                "counts": obj({name: COUNT for name in RULE_COUNTERS}),
                "recent": array(
                    _RECENT_EVENT, f"Its last {RECENT} events, newest first.", max_items=RECENT
                ),
            }
        ),
    }
