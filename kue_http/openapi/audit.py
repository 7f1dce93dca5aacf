"""The audit log in the OpenAPI document (``kue_http/audit.py``)."""

from __future__ import annotations

from .build import Schema, array, obj, ok, query_param, read


def paths() -> Schema:
    return {
        "/audit": {
            "get": read(
                "audit",
                "The changes made through this API and the dashboard, newest first: when, what, "
                "by whom, from where, and how many jobs",
                ok(obj({"entries": array(_ENTRY)})),
                400,
                parameters=[
                    query_param(
                        "count",
                        {"type": "integer", "minimum": 1, "maximum": 1000},
                        "Most entries (default 100).",
                    ),
                    query_param(
                        "before",
                        {"type": "string", "pattern": "^[0-9]{1,20}-[0-9]{1,20}$"},
                        "An entry's id: the entries older than it (the next page).",
                    ),
                    query_param(
                        "action", {"type": "string", "maxLength": 100}, "Of this action only."
                    ),
                    query_param(
                        "who",
                        {"type": "string", "maxLength": 500},
                        "By this user, or from this address.",
                    ),
                    query_param(
                        "since",
                        {"type": "integer", "minimum": 0, "maximum": 10**15},
                        "None before this time (ms).",
                    ),
                ],
            )
        }
    }


_TEXT = {"type": "string"}
_ENTRY: Schema = obj(
    {
        "id": {"type": "string", "description": "The entry's id: <ms>-<seq>"},
        "at": {"type": "integer", "description": "When (ms)"},
        "action": {
            **_TEXT,
            "description": "The route's name (create, remove, retry_all...); a bulk action's, "
            "bulk_retry...",
        },
        "method": _TEXT,
        "path": {**_TEXT, "description": "The request's path and query"},
        "who": {**_TEXT, "description": "The user (basic auth), token, or empty"},
        "from": {**_TEXT, "description": "The client's address"},
        "status": {"type": ["integer", "null"]},
        "jobs": {"type": ["integer", "null"], "description": "Jobs touched, when told"},
        "detail": {
            **_TEXT,
            "description": "What the path does not say (a bulk action's filter), or empty",
        },
    }
)
