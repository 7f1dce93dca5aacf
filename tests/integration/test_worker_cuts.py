"""A worker process whose connections Redis cuts again and again while it drains (``CLIENT
KILL``), its slots on the loop's connection or on their own: a claim whose reply was cut
leaves a job active under a live process, which renews its lease; its keeper gives such a
job back once Redis answers again (:mod:`kue_core.worker.strays`). Every job completes, none
is left active, and ``kue doctor`` finds nothing."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time

import psutil
import pytest
import redis

from kue_core import Queue, doctor
from tests.conftest import wait_for
from tests.integration.test_worker_faults import WORKER

JOBS = 1_500
CUTS = 25


def _cut(r: redis.Redis, pid: int) -> int:
    """Kill the Redis connections of process ``pid`` (those of the other tests that share the
    server are left alone): how many there were."""
    proc = psutil.Process(pid)
    listed = getattr(proc, "net_connections", None) or proc.connections  # psutil < 6
    theirs = {f"{c.laddr.ip}:{c.laddr.port}" for c in listed(kind="inet") if c.laddr}
    killed = 0
    for client in r.client_list():
        if client.get("addr") in theirs:
            killed += r.client_kill_filter(_id=client["id"])
    return killed


@pytest.mark.single_node
def test_connections_cut_under_a_draining_worker_strand_no_job(
    redis_url: str, prefix: str, queue: Queue, r: redis.Redis
) -> None:
    # A handler's own call (it records its run) may be cut too: that attempt fails, the next
    # one runs.
    jobs = queue.save_many([queue.create_job("t", {"i": i}).attempts(20) for i in range(JOBS)])
    argv = [sys.executable, "-c", textwrap.dedent(WORKER), redis_url, prefix, "4", "1000"]
    worker = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
    try:
        assert worker.stdout is not None and worker.stdout.readline().strip() == "ready"
        cut = 0
        for _ in range(CUTS):  # while it drains: claims and completions cut on their way
            cut += _cut(r, worker.pid)
            time.sleep(0.02)  # the pace of the cuts, not a wait for anything
            if queue.count("complete") == JOBS:
                break
        assert cut >= 1
        # A job whose claim's reply was cut comes back a lease after Redis answers again.
        wait_for(lambda: queue.count("complete") == JOBS, timeout=60)
        assert queue.count("active") == 0 and queue.count("inactive") == 0
        ran = {int(entry.split(":")[0]) for entry in r.lrange(f"{prefix}:ran", 0, -1)}
        assert ran == {j.id for j in jobs}
        wait_for(lambda: doctor.check(queue).findings == [], timeout=10)
    finally:
        worker.terminate()
        worker.wait(timeout=15)
