"""The trace id the dashboard shows, read from a job's stored trace context
(``kue_core.tracing.trace_id``): a W3C ``traceparent``, anything else gives none."""

from __future__ import annotations

import pytest

from kue_core.tracing import trace_id

TID = "4bf92f3577b34da6a3ce929d0e0e4736"


def test_the_trace_id_of_a_stored_traceparent() -> None:
    stored = f'{{"traceparent": "00-{TID}-00f067aa0ba902b7-01", "tracestate": "k=v"}}'
    assert trace_id(stored) == TID


@pytest.mark.parametrize(
    "stored",
    [
        None,
        "",
        "not json",
        "[1, 2]",
        '{"tracestate": "k=v"}',
        '{"traceparent": 7}',
        f'{{"traceparent": "00-{TID.upper()}-00f067aa0ba902b7-01"}}',
        f'{{"traceparent": "00-{TID}-00f067aa0ba902b7"}}',
        f'{{"traceparent": "00-{"0" * 32}-00f067aa0ba902b7-01"}}',
        f'{{"traceparent": "00-{TID}<script>-00f067aa0ba902b7-01"}}',
    ],
)
def test_anything_else_has_none(stored: str | None) -> None:
    assert trace_id(stored) is None
