"""``GET /openapi.json``: the JSON API described in OpenAPI 3.1, for clients, API browsers and
the fuzz test (``tests/http/test_openapi.py``), which also checks that every route is here.

The document is built per request: its server is where the API is mounted (script root and
``KUE_API_PREFIX``), its security follows ``KUE_AUTH`` and its page size ``KUE_MAX_PAGE``.
Paths are relative to the server, as in the blueprint (``/job/{id}``). ``GET /metrics`` is
Prometheus text outside the API prefix, so it is not described here.

Kue's ``/jobs/...`` listings are one Flask route that tells its forms apart by where the
``from..to`` segment is; here each form is a path of its own. What every route may answer:
401 (``KUE_AUTH``), 503 (Redis unavailable), and for writes 403 (foreign ``Origin``), 405
(``KUE_READONLY``) and 415 (a body that is not JSON, or a POST without JSON).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from flask import Response, current_app, jsonify, request

from ..api import api
from . import (
    audit,
    bulk,
    control,
    flows,
    history,
    interactive,
    jobs,
    limits,
    records,
    rules,
    runs,
    schedules,
)
from .build import ERRORS, Schema, error_response
from .schemas import schemas

OPENAPI_VERSION = "3.1.0"
#: ``KUE_AUTH``'s scheme -> what every route but the health check requires (none without it).
_SECURITY: dict[str, list[Schema]] = {"basic": [{"basicAuth": []}], "bearer": [{"bearerAuth": []}]}


@api.get("/openapi.json")
def openapi() -> Response:
    server = request.script_root + current_app.config["KUE_API_PREFIX"]
    return jsonify(document(server, current_app.config))


def document(server: str, settings: Mapping[str, Any]) -> Schema:
    """The OpenAPI document of the API mounted at ``server``, for the app's ``settings``
    (only the scheme of ``KUE_AUTH`` is read, never its secret)."""
    scheme = (settings.get("KUE_AUTH") or "").partition(":")[0]
    return {
        "openapi": OPENAPI_VERSION,
        "info": {
            "title": "kue JSON API",
            "version": "1.0.0",
            "description": (
                "Kue's JSON API (same routes, field names and shapes) with real status codes, "
                "and routes Kue lacks: history, job control, bulk actions, pausing, workers, "
                "throughput, wait and run timings, 30 days of history with deploy markers, "
                "search through an index, tags, tracking, retention, dependencies and flows, "
                "schedules, flow control (limits, groups), "
                "kue rules (watchers, their counters and failed events), events, an audit log, "
                "health. "
                'Every error answer is {"error": "..."}.'
            ),
        },
        "servers": [{"url": server or "/"}],
        "security": _SECURITY.get(scheme, []),
        "tags": [
            {"name": name}
            for name in (
                "jobs",
                "control",
                "records",
                "flows",
                "schedules",
                "limits",
                "rules",
                "audit",
                "listing",
                "bulk",
                "pausing",
                "watching",
            )
        ],
        "paths": {
            **jobs.paths(settings.get("KUE_MAX_PAGE", 1000)),
            **control.paths(),
            **records.paths(),
            **runs.paths(),
            **interactive.paths(),
            **flows.paths(),
            **schedules.paths(),
            **limits.paths(),
            **rules.paths(),
            **audit.paths(),
            **history.paths(),
            **bulk.paths(),
        },
        "components": {
            "schemas": schemas(),
            "responses": {name: error_response(code) for code, (name, _) in ERRORS.items()},
            "securitySchemes": {
                "basicAuth": {
                    "type": "http",
                    "scheme": "basic",
                    "description": "When KUE_AUTH is basic:<user>:<password>.",
                },
                "bearerAuth": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "When KUE_AUTH is bearer:<token>.",
                },
            },
        },
    }
