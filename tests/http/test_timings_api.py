"""Wait and run statistics (issue 18 §5) outside the core: ``GET /api/timings[/<type>]``,
the ``kue_job_wait_seconds`` and ``kue_job_run_seconds`` histograms of ``/metrics``, and the
overview's panel. Real jobs run through ``queue.process`` in a worker queue, which is shut
down (it adds its figures to Redis then) before anything is read."""

from __future__ import annotations

import math
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
import redis
from flask import Flask
from flask.testing import FlaskClient
from prometheus_client.parser import text_string_to_metric_families

from kue_core import Job, NoRetry, Queue, defaults
from tests.conftest import wait_for

#: A type whose name is markup, and one with a slash (the route's ``<rest:>`` argument).
MARKUP = "<b>bold</b>"
SLASHED = "mail/out"
#: Jobs run per type: (type, how many, whether they fail).
RUNS = (("email", 3, False), (MARKUP, 2, True), (SLASHED, 1, False))


@pytest.fixture
def worked(redis_url: str, prefix: str, queue: Queue) -> Iterator[Queue]:
    """Each type of ``RUNS`` ran its jobs in a worker, now shut down (its figures flushed);
    a type ``idle`` was saved but nothing of it started."""
    # A lease no load outlasts: the waits and runs are counted exactly, and a process held
    # up past a short lease (two cores, under coverage) rightly has its jobs claimed again.
    worker = Queue(redis_url, prefix=prefix, lease_ms=30_000)

    def handler(job: Job) -> Any:
        if job.data.get("fail"):
            raise NoRetry("asked to fail")
        return {"ok": True}

    ids = []
    for job_type, n, fail in RUNS:
        ids += [queue.create_job(job_type, {"fail": fail}).save().id for _ in range(n)]
        worker.process(job_type, 2, handler)
    queue.create_job("idle").delay(3_600_000).save()
    ended = ("complete", "failed")
    wait_for(lambda: all(j.state in ended for j in queue.get_jobs(ids)), timeout=10)
    worker.shutdown()
    yield queue
    worker.close()


def _today(r: redis.Redis) -> str:
    seconds, _ = r.time()
    return datetime.fromtimestamp(seconds, UTC).date().isoformat()


def _check_summary(summary: dict[str, Any], count: int) -> None:
    assert summary["count"] == count
    bounds = [b for b, _ in summary["buckets"]]
    assert bounds == [*defaults.DURATION_BUCKETS_MS, None]
    assert sum(n for _, n in summary["buckets"]) == count
    if count:
        assert summary["mean_ms"] >= 0 and summary["stddev_ms"] >= 0
    else:
        assert summary["mean_ms"] is None and summary["stddev_ms"] is None


# -- REST --------------------------------------------------------------------------------------
def test_timings_of_every_type_and_of_one(worked: Queue, client: FlaskClient) -> None:
    res = client.get("/api/timings")
    assert res.status_code == 200 and res.mimetype == "application/json"
    body: dict[str, Any] = res.json  # type: ignore[assignment]
    day = body["day"]
    assert set(body) == {"day", "types"}
    assert list(body["types"]) == sorted(worked.types())
    assert body == worked.timings(day=day)
    for job_type, n, _ in RUNS:
        _check_summary(body["types"][job_type]["wait"], n)
        _check_summary(body["types"][job_type]["run"], n)
    _check_summary(body["types"]["idle"]["wait"], 0)
    for job_type, _, _ in RUNS:
        for url in (f"/api/timings/{job_type}", f"/api/timings/{job_type}/"):
            one = client.get(url, query_string={"day": day})
            assert one.status_code == 200, (url, one.json)
            assert one.json == {"type": job_type, "day": day, **body["types"][job_type]}
    assert client.get("/api/timings/", query_string={"day": day}).json == body


def test_answers_match_the_openapi_document(worked: Queue, client: FlaskClient) -> None:
    """With real figures (the fuzz meets mostly zeros: its worker has not flushed yet). The
    minimum-versions run has no schema validator: the OpenAPI tests run in the main one."""
    jsonschema_rs = pytest.importorskip("jsonschema_rs")
    components = client.get("/api/openapi.json").json["components"]  # type: ignore[index]
    for url, name in (("/api/timings", "Timings"), (f"/api/timings/{SLASHED}", "TypeTimings")):
        schema = {"$ref": f"#/components/schemas/{name}", "components": components}
        body = client.get(url).json
        jsonschema_rs.validator_for(schema).validate(body)
        one = body["types"][SLASHED] if name == "Timings" else body
        assert one["run"]["count"] == 1 and one["run"]["mean_ms"] is not None


def test_another_day_has_its_own_figures(worked: Queue, client: FlaskClient) -> None:
    res = client.get("/api/timings?day=2000-02-29")  # a leap day, long before these jobs
    assert res.status_code == 200
    body: dict[str, Any] = res.json  # type: ignore[assignment]
    assert body["day"] == "2000-02-29" and set(body["types"]) == set(worked.types())
    for figures in body["types"].values():
        _check_summary(figures["wait"], 0)
        _check_summary(figures["run"], 0)
    one = client.get("/api/timings/email?day=2000-02-29").json
    assert one["run"]["count"] == 0  # type: ignore[index]


def test_today_is_the_redis_servers_utc_day(
    worked: Queue, client: FlaskClient, r: redis.Redis
) -> None:
    before = _today(r)
    day = client.get("/api/timings/email").json["day"]  # type: ignore[index]
    assert day in {before, _today(r)}


@pytest.mark.parametrize(
    "url",
    [
        "/api/timings?day=2024-02-30",
        "/api/timings?day=2023-02-29",
        "/api/timings?day=yesterday",
        "/api/timings?day=2024-1-01",
        "/api/timings?day=2024-01-01T00:00",
        "/api/timings?day=",
        "/api/timings/email?day=20240101",
        "/api/timings/email/?day=%0A2024-01-01",
        "/api/timings/a%01b",
        "/api/timings/%20",
        "/api/timings/" + "x" * (defaults.MAX_TYPE_LENGTH + 1),
    ],
)
def test_a_bad_day_or_type_is_400(client: FlaskClient, url: str) -> None:
    res = client.get(url)
    assert res.status_code == 400 and res.mimetype == "application/json", res.data
    assert set(res.json) == {"error"} and res.json["error"]  # type: ignore[arg-type,index]


# -- Prometheus --------------------------------------------------------------------------------
def _histograms(text: str) -> dict[str, Any]:
    return {f.name: f for f in text_string_to_metric_families(text) if f.type == "histogram"}


def test_metrics_have_wait_and_run_histograms_per_type(worked: Queue, client: FlaskClient) -> None:
    res = client.get("/metrics")
    assert res.status_code == 200
    text = res.get_data(as_text=True)
    families = _histograms(text)
    today = worked.timings()
    for kind, name in (("wait", "kue_job_wait_seconds"), ("run", "kue_job_run_seconds")):
        family = families[name]
        assert "midnight UTC" in family.documentation
        assert f"# TYPE {name} histogram" in text
        for job_type, n, _ in RUNS:
            samples = [s for s in family.samples if s.labels.get("type") == job_type]
            by_le = [(s.labels["le"], s.value) for s in samples if s.name == f"{name}_bucket"]
            bounds = [str(b / 1000) for b in defaults.DURATION_BUCKETS_MS]
            assert [le for le, _ in by_le] == [*bounds, "+Inf"]
            counts = [v for _, v in by_le]
            assert counts == sorted(counts) and counts[-1] == n  # cumulative
            summary = today["types"][job_type][kind]
            running = 0
            for (_, value), (_, own) in zip(by_le, summary["buckets"], strict=True):
                running += own
                assert value == running
            [count] = [s.value for s in samples if s.name == f"{name}_count"]
            [total] = [s.value for s in samples if s.name == f"{name}_sum"]
            assert count == n
            assert math.isclose(total, summary["mean_ms"] * n / 1000, abs_tol=1e-9)
        idle = [s for s in family.samples if s.labels.get("type") == "idle"]
        assert {s.value for s in idle} == {0}  # a known type without jobs today: zeros


def test_metrics_escape_a_type_as_a_label(worked: Queue, client: FlaskClient) -> None:
    """A type with a quote and a backslash is a label value, not broken text."""
    odd = 'a"b\\c'
    worked.create_job(odd).save()
    families = _histograms(client.get("/metrics").get_data(as_text=True))
    labels = {s.labels["type"] for s in families["kue_job_run_seconds"].samples}
    assert odd in labels and MARKUP in labels


# -- the dashboard -----------------------------------------------------------------------------
def test_the_overview_shows_each_type_that_ran_today(worked: Queue, client: FlaskClient) -> None:
    page = client.get("/").get_data(as_text=True)
    assert 'aria-labelledby="timings-h"' in page and 'data-live="timings"' in page
    assert 'data-timing="email"' in page and f'data-timing="{SLASHED}"' in page
    assert 'data-timing="idle"' not in page  # nothing of it started today
    assert "&lt;b&gt;bold&lt;/b&gt;" in page and MARKUP not in page
    row = page.split('data-timing="email"', 1)[1].split("</tr>", 1)[0]
    assert '<td class="num" data-kind="wait-count">3</td>' in row
    assert '<td class="num" data-kind="run-count">3</td>' in row
    assert row.count(" ± ") == 2 and "ms" in row
    assert row.count("<rect class=") == 2 * 2 * (len(defaults.DURATION_BUCKETS_MS) + 1)
    assert worked.timings()["day"] in page


def test_the_overview_says_when_nothing_ran_today(queue: Queue, client: FlaskClient) -> None:
    queue.create_job("email").save()
    page = client.get("/").get_data(as_text=True)
    assert "No job has started today (UTC)." in page and "data-timing=" not in page


@pytest.mark.parametrize(
    ("ms", "text"),
    [
        (None, ""),
        (0.25, "0.2ms"),
        (12.4, "12ms"),
        (2400, "2.4s"),
        (185_000, "3m 5s"),
    ],
)
def test_means_are_in_human_units(app: Flask, ms: float | None, text: str) -> None:
    from kue_http.dashboard.filters import ms_text

    assert ms_text(ms) == text
