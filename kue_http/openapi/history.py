"""The statistics' history in the OpenAPI document (``GET /history``)."""

from __future__ import annotations

from kue_core import HISTORY_RANGES

from .build import Schema, array, obj, ok, query_param, read, type_query

_MS = {"type": ["number", "null"], "minimum": 0}
_COUNT = {"type": "integer", "minimum": 0}
_BACKLOG = {
    "type": ["integer", "null"],
    "minimum": 0,
    "description": "Jobs waiting (or delayed) when sampled; the highest of its minutes for an "
    "hour or a day; null when no sample was taken",
}
_TIMES = obj(
    {
        "count": _COUNT,
        "mean_ms": _MS,
        "p50_ms": _MS,
        "p95_ms": _MS,
        "p99_ms": _MS,
    }
)
_FIGURES = {
    "complete": _COUNT,
    "failed": _COUNT,
    "waiting": _BACKLOG,
    "delayed": _BACKLOG,
    "wait": _TIMES,
    "run": _TIMES,
}
_VERSIONS = array({"type": "string"})


def paths() -> Schema:
    return {
        "/history": {
            "get": read(
                "watching",
                "A type's history (or all types'): per minute, hour or day, jobs completed and "
                "failed, the backlog, and wait and run percentiles (estimated from buckets); "
                "with the changes of the versions serving it (deploys)",
                ok(
                    obj(
                        {
                            "type": {"type": ["string", "null"]},
                            "range": {"enum": list(HISTORY_RANGES)},
                            "step_ms": {"enum": [60_000, 3_600_000, 86_400_000]},
                            "points": array(
                                obj({"at": {"type": "integer"}, **_FIGURES}), min_items=1
                            ),
                            "deploys": array(
                                obj(
                                    {
                                        "at": {"type": "integer"},
                                        "versions": _VERSIONS,
                                        "was": _VERSIONS,
                                    }
                                )
                            ),
                            "total": obj(_FIGURES),
                        }
                    )
                ),
                400,
                parameters=[
                    type_query("Of this type only (else all types)."),
                    query_param(
                        "range",
                        {"enum": list(HISTORY_RANGES)},
                        "How far back: 1h and 24h a point a minute, 7d an hour, 30d a day "
                        "(default 24h).",
                    ),
                ],
            )
        }
    }
