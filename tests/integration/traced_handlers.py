"""Handlers for the worker process of tests/integration/test_tracing.py, run by ``kue worker
--otel``: importing this module sets the process's tracer provider, which writes each span it
ends as a JSON line to the file ``$KUE_TEST_SPANS``."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

from kue_core import Job


class _ToFile(SpanExporter):  # type: ignore[misc]
    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        with open(os.environ["KUE_TEST_SPANS"], "a") as out:
            for s in spans:
                line = {
                    "name": s.name,
                    "trace": s.context.trace_id,
                    "span": s.context.span_id,
                    "parent": s.parent.span_id if s.parent else None,
                    "attributes": dict(s.attributes or {}),
                }
                out.write(json.dumps(line) + "\n")
        return SpanExportResult.SUCCESS


_provider = TracerProvider()
_provider.add_span_processor(SimpleSpanProcessor(_ToFile()))
trace.set_tracer_provider(_provider)


def remote(job: Job) -> Any:
    return {"seen": job.data}
