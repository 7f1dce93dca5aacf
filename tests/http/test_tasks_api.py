"""Jobs of a typed task saved over the REST API (``POST /api/job``): ordinary Kue jobs, run by
the task's function when their data fits its parameters, failed at once naming the field when
it does not."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from flask.testing import FlaskClient

from kue_core import Queue
from tests.conftest import wait_for


@pytest.fixture
def wq(redis_url: str, prefix: str) -> Iterator[Queue]:
    # A lease no load outlasts: the attempts are counted, and a process held up past a short
    # one (two cores, under coverage) rightly has its jobs run again.
    q = Queue(redis_url, prefix=prefix, lease_ms=30_000)
    yield q
    q.close()


def test_jobs_saved_over_rest_run_the_task_or_fail_naming_the_field(
    client: FlaskClient, wq: Queue
) -> None:
    @wq.task("invoice", attempts=4)
    def invoice(customer: str, cents: int, currency: str = "EUR") -> str:
        return f"{customer}: {cents / 100:.2f} {currency}"

    wq.process_tasks()
    good = client.post(
        "/api/job", json={"type": "invoice", "data": {"customer": "ada", "cents": 1250}}
    )
    bad = client.post(
        "/api/job",
        json={
            "type": "invoice",
            "data": {"customer": "bob", "cents": "a lot"},
            "options": {"attempts": 4},
        },
    )
    assert (good.status_code, bad.status_code) == (200, 200), (good.json, bad.json)
    good_id, bad_id = good.json["id"], bad.json["id"]  # type: ignore[index]

    def state(job_id: int, wanted: str) -> dict:  # type: ignore[type-arg]
        return wait_for(  # type: ignore[no-any-return]
            lambda: (body := client.get(f"/api/job/{job_id}").json)["state"] == wanted and body,
            timeout=20,
        )

    assert state(good_id, "complete")["result"] == "ada: 12.50 EUR"
    failed = state(bad_id, "failed")
    assert failed["attempts"] == {"made": 1, "remaining": 0, "max": 4}  # failed at once, for good
    assert failed["error"].startswith(
        "NoRetry: task invoice: argument 'cents': Input should be a valid integer"
    )
