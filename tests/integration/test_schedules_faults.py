"""Schedules under crashes: three worker processes on one queue, each with a promotion timer
planning every tick of a 200 ms schedule, while some are SIGKILLed and replaced. Each tick made
exactly one job: no gap, no duplicate; and ``kue doctor`` finds nothing."""

from __future__ import annotations

import redis

from kue_core import Queue, doctor
from tests.conftest import wait_for
from tests.integration.test_control_faults import Workers


def test_each_tick_makes_one_job_across_processes_and_kills(
    queue: Queue, r: redis.Redis, redis_url: str, prefix: str
) -> None:
    workers = Workers(redis_url, prefix)
    try:
        procs = [workers.start("thread", 2) for _ in range(3)]
        # Every tick, also one reached late: a planner more than a tick late (a loaded machine,
        # all three killed at once) would otherwise make only the latest, by design.
        queue.every("beat", 200, "t", catch_up="all")
        for runs in (6, 12, 18):
            wait_for(lambda n=runs: queue.schedule("beat")["runs"] >= n, timeout=10)  # type: ignore[misc]
            procs.pop(0).kill()  # mid-flight, perhaps while planning a tick
            procs.append(workers.start("thread", 2))
        wait_for(lambda: queue.schedule("beat")["runs"] >= 25, timeout=10)
        queue.pause_schedule("beat")
        wait_for(lambda: queue.count("inactive", "t") + queue.count("active", "t") == 0, timeout=20)
    finally:
        workers.close()
    jobs = queue.get_jobs(sorted(queue.ids("complete", "t")))
    ticks = sorted(j.tick for j in jobs)  # type: ignore[type-var]
    assert len(ticks) == queue.schedule("beat")["runs"] >= 25
    assert ticks == list(range(ticks[0], ticks[0] + 200 * len(ticks), 200))  # no gap, no twin
    ran = {int(x.split(":")[0]) for x in r.lrange(f"{prefix}:ran", 0, -1)}  # type: ignore[union-attr]
    assert ran == {j.id for j in jobs}
    assert [f for f in doctor.check(queue).findings if f.kind != "gone-worker"] == []
