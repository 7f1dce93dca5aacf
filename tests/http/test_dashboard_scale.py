"""With 100 000 jobs in a state, a page of the dashboard costs Redis the same few commands as
with ten: it reads one window of the state's set and that window's jobs, never every job."""

from __future__ import annotations

import re

import pytest
import redis
from flask.testing import FlaskClient

from kue_core import Queue

JOBS = 100_000


def _calls(r: redis.Redis) -> dict[str, int]:
    stats = r.info("commandstats")
    calls = {name.removeprefix("cmdstat_"): int(s["calls"]) for name, s in stats.items()}
    calls["bytes out"] = int(r.info("stats")["total_net_output_bytes"])
    return calls


def _cost(r: redis.Redis, client: FlaskClient, url: str) -> dict[str, int]:
    """Redis commands run while the app answers ``url`` (the suite runs nothing else then)."""
    before = _calls(r)
    response = client.get(url)
    after = _calls(r)
    assert response.status_code == 200, response.data[:500]
    spent = {name: n - before.get(name, 0) for name, n in after.items()}
    spent["info"] -= 2  # our own INFO calls
    return {name: n for name, n in spent.items() if n}


@pytest.mark.timeout(180)  # 100,000 saves: 10-30 s alone, more under coverage and load
def test_pages_cost_the_same_with_100k_jobs(
    client: FlaskClient, app: object, r: redis.Redis
) -> None:
    queue: Queue = app.extensions["kue"]  # type: ignore[attr-defined]
    for start in range(0, JOBS, 20_000):
        queue.save_many(
            queue.create_job("bulk", {"title": f"job {n}"}) for n in range(start, start + 20_000)
        )
    assert queue.count("inactive") == JOBS

    last = client.get("/jobs/inactive?size=100&page=1000")
    ids = [int(i) for i in re.findall(r'data-job="(\d+)"', last.get_data(as_text=True))]
    assert ids == queue.ids("inactive")[-100:]  # the last page, in queue order

    for url in ("/jobs/inactive?size=100&page=500", "/jobs/inactive?type=bulk&order=desc", "/"):
        cost = _cost(r, client, url)
        sent = cost.pop("bytes out")
        assert sent < 200_000, (url, sent)  # 100 jobs, not 100 000 ids (over 1 MB)
        assert sum(cost.values()) < 150, (url, cost)
        assert cost.get("hgetall", 0) <= 100, (url, cost)  # the page's jobs, no more
        for scan in ("scan", "keys", "hscan", "sscan", "zscan"):
            assert scan not in cost, (url, cost)
