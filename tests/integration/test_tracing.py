"""OpenTelemetry traces (kue_core/tracing.py), read from the SDK's in-memory exporter: a
producer span at save on either client, a consumer span per attempt in the same trace, the
handler's own spans inside it, nothing at all when traces are off, and one trace across a real
worker process."""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from kue_core import NoRetry, Queue, tracing
from tests.cli.running import ROOT, Kue
from tests.conftest import wait_for

trace = pytest.importorskip("opentelemetry.trace")
sdk_trace = pytest.importorskip("opentelemetry.sdk.trace")
export = pytest.importorskip("opentelemetry.sdk.trace.export")
in_memory = pytest.importorskip("opentelemetry.sdk.trace.export.in_memory_span_exporter")

_EXPORTER = in_memory.InMemorySpanExporter()


def _provider() -> Any:
    """The process's tracer provider, set once (OpenTelemetry allows one global provider)."""
    current = trace.get_tracer_provider()
    if getattr(current, "_kue_test", False):
        return current
    provider = sdk_trace.TracerProvider()
    provider.add_span_processor(export.SimpleSpanProcessor(_EXPORTER))
    provider._kue_test = True
    trace.set_tracer_provider(provider)
    return trace.get_tracer_provider()


@pytest.fixture
def spans() -> Iterator[Any]:
    """Traces on, into an emptied in-memory exporter; off again after the test."""
    _provider()
    _EXPORTER.clear()
    tracing.enable()
    yield _EXPORTER
    tracing.disable()
    _EXPORTER.clear()


def _named(exporter: Any, name: str) -> list[Any]:
    return [s for s in exporter.get_finished_spans() if s.name == name]


def test_save_opens_a_producer_span_under_the_current_one(
    client: Any, spans: Any, r: redis.Redis
) -> None:
    tracer = trace.get_tracer("test")
    with tracer.start_as_current_span("request") as request:
        job = client.create_job("email", {"to": "ada"}).save()
    (send,) = _named(spans, "send email")
    assert send.kind == trace.SpanKind.PRODUCER
    assert send.parent.span_id == request.get_span_context().span_id
    assert send.context.trace_id == request.get_span_context().trace_id
    assert send.attributes["messaging.system"] == "kue"
    assert send.attributes["messaging.destination.name"] == "email"
    assert send.attributes["messaging.message.id"] == str(job.id)
    # Its context goes with the job, in a field of our own that Kue's JSON does not show.
    stored = json.loads(r.hget(client.keys.job(job.id), "trace"))
    assert stored["traceparent"].split("-")[1:3] == [
        f"{send.context.trace_id:032x}",
        f"{send.context.span_id:016x}",
    ]
    assert "trace" not in client.get_job(job.id).to_dict()
    # Its trace id, for the dashboard's link to the trace.
    assert client.get_job(job.id).trace_id == job.trace_id == f"{send.context.trace_id:032x}"


def test_a_batch_and_a_flow_are_one_send_each(client: Any, spans: Any, r: redis.Redis) -> None:
    jobs = client.save_many([client.create_job("bulk", {"i": i}) for i in range(5)])
    (batch,) = _named(spans, "send bulk")
    assert batch.attributes["messaging.batch.message_count"] == 5
    assert "messaging.message.id" not in batch.attributes
    contexts = {r.hget(client.keys.job(j.id), "trace") for j in jobs}
    assert len(contexts) == 1 and f"{batch.context.span_id:016x}" in contexts.pop()
    parent = client.create_job("report")
    client.flow(parent, [client.create_job("part"), client.create_job("part")])
    (flow,) = _named(spans, "send jobs")  # of two types
    assert flow.attributes["messaging.batch.message_count"] == 3
    assert f"{flow.context.span_id:016x}" in r.hget(client.keys.job(parent.id), "trace")


def test_each_attempt_is_a_consumer_span_in_the_producers_trace(queue: Queue, spans: Any) -> None:
    tracer = trace.get_tracer("test")
    tries: list[int] = []

    def handler(job: Any) -> Any:
        with tracer.start_as_current_span("inner"):
            tries.append(1)
            if len(tries) == 1:
                raise ValueError("first try fails")
            return {"ok": True}

    job = queue.create_job("t").attempts(2).save()
    queue.process("t", handler)
    assert job.wait(10) == {"ok": True}
    wait_for(lambda: len(_named(spans, "process t")) == 2)
    (send,) = _named(spans, "send t")
    first, second = sorted(_named(spans, "process t"), key=lambda s: s.start_time)
    for span, attempt in ((first, 1), (second, 2)):
        assert span.kind == trace.SpanKind.CONSUMER
        assert span.context.trace_id == send.context.trace_id
        assert span.parent.span_id == send.context.span_id
        assert span.attributes["messaging.message.id"] == str(job.id)
        assert span.attributes["messaging.destination.name"] == "t"
        assert span.attributes["kue.job.attempt"] == attempt
    assert first.attributes["kue.job.outcome"] == "failed"
    assert first.status.status_code == trace.StatusCode.ERROR
    (event,) = first.events
    assert event.name == "exception" and event.attributes["exception.type"] == "ValueError"
    assert "first try fails" in event.attributes["exception.stacktrace"]
    assert second.attributes["kue.job.outcome"] == "complete"
    assert second.status.status_code == trace.StatusCode.UNSET
    inner = sorted(_named(spans, "inner"), key=lambda s: s.start_time)
    assert [s.parent.span_id for s in inner] == [first.context.span_id, second.context.span_id]


def test_an_async_handler_runs_inside_its_span(queue: Queue, spans: Any) -> None:
    tracer = trace.get_tracer("test")

    async def handler(job: Any) -> None:
        with tracer.start_as_current_span("inner async"):
            raise NoRetry("refused")

    job = queue.create_job("a").save()
    queue.process("a", handler)
    with pytest.raises(Exception, match="refused"):
        job.wait(10)
    wait_for(lambda: _named(spans, "process a"))
    (process,) = _named(spans, "process a")
    (inner,) = _named(spans, "inner async")
    assert inner.parent.span_id == process.context.span_id
    assert process.attributes["kue.job.outcome"] == "failed"


def test_off_nothing_is_traced_or_stored(queue: Queue, r: redis.Redis) -> None:
    _provider()
    _EXPORTER.clear()
    assert not tracing.enabled
    job = queue.create_job("t").save()
    queue.process("t", lambda job: None)
    job.wait(10)
    assert _EXPORTER.get_finished_spans() == ()
    assert r.hget(queue.keys.job(job.id), "trace") is None
    assert queue.get_job(job.id).trace_id is None
    assert queue.create_job("t")._extras() == ""  # a plain job's save row is as before


def test_one_trace_from_the_producer_to_a_worker_process(
    redis_url: str, prefix: str, spans: Any, tmp_path: Path
) -> None:
    # kue worker --otel, in a process of its own whose handlers module sets its tracer
    # provider (tests/integration/traced_handlers.py): the trace goes on there.
    out = tmp_path / "spans.jsonl"
    worker = Kue(
        "worker", "tests.integration.traced_handlers:remote", "--type", "remote", "--otel",
        "--redis", redis_url, "--prefix", prefix, env={"KUE_TEST_SPANS": str(out)},
    )  # fmt: skip
    try:
        worker.wait_for_line(rf"worker pid {worker.proc.pid}, id ")
        tracer = trace.get_tracer("test")
        with Queue(redis_url, prefix=prefix) as queue:
            with tracer.start_as_current_span("request") as request:
                job = queue.create_job("remote", {"n": 1}).save()
            assert job.wait(15) == {"seen": {"n": 1}}
        wait_for(lambda: out.exists() and "process remote" in out.read_text(), timeout=10)
        worker.send(signal.SIGTERM)
        assert worker.wait() == 0, worker.output
    finally:
        worker.kill()
    (send,) = _named(spans, "send remote")
    exported = [json.loads(line) for line in out.read_text().splitlines()]
    (process,) = [s for s in exported if s["name"] == "process remote"]
    assert process["trace"] == request.get_span_context().trace_id == send.context.trace_id
    assert process["parent"] == send.context.span_id
    assert process["attributes"]["messaging.message.id"] == str(job.id)
    assert process["attributes"]["kue.job.attempt"] == 1
    assert process["attributes"]["kue.job.outcome"] == "complete"


def test_the_worker_command_without_opentelemetry_says_how_to_get_it(
    redis_url: str, prefix: str, tmp_path: Path
) -> None:
    # A Python whose opentelemetry cannot be imported: a module of that name that fails.
    blocker = tmp_path / "opentelemetry"
    blocker.mkdir()
    (blocker / "__init__.py").write_text("raise ImportError('not installed here')\n")
    worker = Kue(
        "worker", "kue_example.handlers:send_email", "--type", "email", "--otel",
        "--redis", redis_url, "--prefix", prefix,
        env={"PYTHONPATH": f"{tmp_path}{os.pathsep}{ROOT}"},
    )  # fmt: skip
    try:
        assert worker.wait() == 2
        assert 'pip install "kue[otel]"' in worker.output
    finally:
        worker.kill()


def test_jobs_saved_over_the_http_api_carry_the_trace_too(
    redis_url: str, prefix: str, spans: Any, r: redis.Redis
) -> None:
    from kue_http import create_app

    app = create_app({"KUE_REDIS_URL": redis_url, "KUE_PREFIX": prefix})
    tracer = trace.get_tracer("test")
    with app.test_client() as web, tracer.start_as_current_span("POST /api/job") as request:
        reply = web.post("/api/job", json={"type": "email", "data": {"to": "ada"}})
    assert reply.status_code == 200, reply.get_data(as_text=True)
    job_id = reply.get_json()["id"]
    (send,) = _named(spans, "send email")
    assert send.parent.span_id == request.get_span_context().span_id
    assert f"{send.context.span_id:016x}" in r.hget(f"{prefix}:job:{job_id}", "trace")
