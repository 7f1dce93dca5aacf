"""Flow control across real worker processes (``tests/integration/control_worker.py``, leases of
600 ms but where each start is counted): a rate holds over four processes, measured from the
jobs' start times; a concurrency cap holds while workers are SIGKILLed (their jobs count until
their leases expire and the sweep takes them back); small groups finish long before a big one;
``kue doctor`` finds nothing."""

from __future__ import annotations

import itertools
from typing import Any

import redis

from kue_core import Queue, doctor
from tests.conftest import wait_for
from tests.integration.test_control_faults import Workers


def _runs(queue: Queue, job_type: str, state: str = "complete") -> list[tuple[int, int]]:
    """Every attempt's (start, end) in server ms of the jobs that ended in ``state``, from
    their histories: from an ``active`` entry to the next entry (complete, failed, or back to
    inactive when taken back)."""
    out = []
    for job_id in queue.ids(state, job_type):
        entries = queue.history(job_id)
        for entry, after in itertools.pairwise(entries):
            if entry["state"] == "active":
                out.append((entry["at"], after["at"]))
    return out


def _most_at_once(runs: list[tuple[int, int]]) -> int:
    edges = sorted([(start, 1) for start, _ in runs] + [(end, -1) for _, end in runs])
    most = now = 0
    for _, step in edges:  # an end sorts before a start at the same ms
        now += step
        most = max(most, now)
    return most


def _clean(queue: Queue) -> list[Any]:
    return [f for f in doctor.check(queue).findings if f.kind != "gone-worker"]


def test_a_rate_holds_across_four_processes(queue: Queue, redis_url: str, prefix: str) -> None:
    queue.limit("t", rate=(4, 400))
    queue.save_many([queue.create_job("t", {"i": i}) for i in range(32)])
    workers = Workers(redis_url, prefix)
    try:
        for _ in range(4):
            # A lease no load outlasts: a process held up past a short one (two cores, under
            # coverage) rightly has its jobs run again, and each is to start once here.
            workers.start("thread", 3, lease_ms=30_000)
        wait_for(lambda: queue.count("complete", "t") == 32, timeout=30)
    finally:
        workers.close()
    starts = sorted(start for start, _ in _runs(queue, "t"))
    assert len(starts) == 32
    for i, start in enumerate(starts):  # every window of 400 ms from a start: at most 4
        assert len([s for s in starts[i:] if s < start + 400]) <= 4
    assert starts[-1] - starts[0] >= 7 * 400  # held back, not merely fast
    assert _clean(queue) == []


def test_a_concurrency_cap_holds_while_workers_are_killed(
    queue: Queue, r: redis.Redis, redis_url: str, prefix: str
) -> None:
    queue.limit("t", concurrency=2)
    queue.save_many([queue.create_job("t", {"sleep": 0.05}) for _ in range(40)])
    workers = Workers(redis_url, prefix)
    try:
        procs = [workers.start("thread", 2) for _ in range(3)]
        for done in (8, 20):
            wait_for(lambda n=done: queue.count("complete", "t") >= n, timeout=30)  # type: ignore[misc]
            procs.pop(0).kill()  # mid-job, perhaps
            procs.append(workers.start("thread", 2))
        ended = lambda: queue.count("complete", "t") + queue.count("failed", "t")  # noqa: E731
        wait_for(lambda: ended() == 40, timeout=40)
    finally:
        workers.close()
    runs = _runs(queue, "t") + _runs(queue, "t", "failed")
    assert len(runs) >= 40 and _most_at_once(runs) <= 2
    for job in queue.get_jobs(queue.ids("failed", "t")):  # running in both killed processes
        assert job.error is not None and job.error.startswith("stalled 2 times")
    assert queue.count("active", "t") == 0 and _clean(queue) == []


def test_small_groups_finish_long_before_a_big_one(
    queue: Queue, redis_url: str, prefix: str
) -> None:
    """One group of 10,000 jobs saved first, then ten groups of 10: the small groups are
    done while most of the big one still waits."""
    for _ in range(10):
        queue.save_many([queue.create_job("t", {}).group("big") for _ in range(1000)])
    queue.save_many(
        [queue.create_job("t", {}).group(f"small-{g}") for g in range(10) for _ in range(10)]
    )
    workers = Workers(redis_url, prefix)
    try:
        for _ in range(2):
            workers.start("thread", 2)
        wait_for(lambda: queue.count("complete", "t") == 10_100, timeout=120)
    finally:
        workers.close()
    ended: dict[bool, list[int]] = {True: [], False: []}  # big or not -> completion times
    for ids in (queue.ids("complete", "t")[i : i + 1000] for i in range(0, 10_100, 1000)):
        for job in queue.get_jobs(ids):
            ended[job.group() == "big"].append(job.updated_at)  # type: ignore[arg-type]
    last_small = max(ended[False])
    before = len([t for t in ended[True] if t <= last_small])
    assert len(ended[False]) == 100 and before <= 1000  # under a tenth of the big one ran
    assert queue.groups("t") == {"total": 0, "groups": []}
    assert _clean(queue) == []
