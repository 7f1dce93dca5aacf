"""Redis Cluster failover: the primary serving a queue's slot dies while workers and a
producer run; the cluster promotes its replica, and everything carries on against the new
primary without losing a job whose save was acknowledged (``?replicas=1``)."""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import redis
from redis.crc import key_slot

from kue_core import Queue, doctor
from kue_http import create_app
from tests.conftest import (
    CLUSTER_ARGS,
    Producer,
    replica_in_sync,
    start_cluster,
    start_redis,
    stop,
    wait_for,
)

PREFIX = "{failover}"


@dataclass
class HaCluster:
    """Three primaries, each with one replica."""

    tmp: Path
    url: str
    procs: dict[int, subprocess.Popen[bytes]]

    def owner(self) -> int:
        """The port of the primary serving ``PREFIX``'s slot, as a live node sees it."""
        slot = key_slot(PREFIX.encode())
        for port, proc in self.procs.items():
            if proc.poll() is not None:
                continue
            with redis.Redis(port=port) as node:
                try:
                    rows = node.execute_command("CLUSTER SLOTS")
                except redis.ConnectionError:
                    continue
            return next(int(row[2][1]) for row in rows if row[0] <= slot <= row[1])
        raise AssertionError("no live node")

    def replica_of(self, primary: int) -> int:
        with redis.Redis(port=primary, decode_responses=True) as node:
            info = node.info("replication")
        return int(info["slave0"]["port"])

    def kill(self, port: int) -> None:
        """As a crash would: SIGKILL, nothing flushed."""
        os.kill(self.procs[port].pid, signal.SIGKILL)
        self.procs[port].wait()

    def restart(self, port: int) -> None:
        """Bring a dead node back (empty: it persists no data, only its cluster config), the
        way a rebooted machine would; the cluster makes it a replica of the new primary."""
        self.procs[port] = start_redis(self.tmp / str(port), port, *CLUSTER_ARGS)


@pytest.fixture
def ha_cluster(tmp_path: Path) -> Iterator[HaCluster]:
    url, procs = start_cluster(tmp_path, primaries=3, replicas=1)
    ports = [int(node.rpartition(":")[2]) for node in url.partition("://")[2].split(",")]
    cluster = HaCluster(tmp_path, url, dict(zip(ports, procs, strict=True)))
    try:
        yield cluster
    finally:
        stop(list(cluster.procs.values()))


def test_workers_producer_and_api_survive_a_failover_without_losing_a_job(
    ha_cluster: HaCluster,
) -> None:
    old = ha_cluster.owner()
    new = ha_cluster.replica_of(old)
    url = ha_cluster.url + "?replicas=1"
    worker = Queue(url, prefix=PREFIX, lease_ms=2000)
    producer_queue = Queue(url, prefix=PREFIX)
    app = create_app({"KUE_REDIS_URL": url, "KUE_PREFIX": PREFIX, "KUE_REDIS_TIMEOUT": 2})
    api = app.test_client()
    done: set[int] = set()
    worker.process("task", 4, lambda job: done.add(job.id) or job.data["n"])
    producer = Producer(producer_queue)
    producer.start()
    try:
        wait_for(lambda: len(done) >= 50, timeout=30)
        assert api.get("/api/stats").status_code == 200

        ha_cluster.kill(old)
        wait_for(lambda: ha_cluster.owner() == new, timeout=30, interval=0.1)
        ha_cluster.restart(old)
        wait_for(lambda: replica_in_sync(old), timeout=30, interval=0.1)
        after = len(producer.acked)
        wait_for(lambda: len(producer.acked) >= after + 50, timeout=30)
    finally:
        producer.stop()

    try:
        acked = producer.acked

        # Every acknowledged job is on the new primary and gets done, exactly as saved (one
        # active when the primary died comes back through its lease).
        def states() -> list[str]:
            return [j.state for j in producer_queue.get_jobs(acked)]

        wait_for(lambda: states() == ["complete"] * len(acked), timeout=60, interval=0.1)
        jobs = producer_queue.get_jobs(acked)
        assert all(j.result == j.data["n"] for j in jobs)
        assert set(acked) <= done
        # The API, made before the failover, answers from the new primary.
        res = wait_for(lambda: (r := api.get(f"/api/job/{acked[-1]}")).status_code == 200 and r)
        assert res.json["state"] == "complete"
        with redis.Redis(port=new) as node:
            assert node.hget(f"{PREFIX}:job:{acked[-1]}", "state") == b"complete"
        for queue in (worker, producer_queue):
            assert queue.client.connection_pool.slot_owner.address() == ("127.0.0.1", new)
        # Once everything saved has run, the indexes agree with the job hashes.
        wait_for(lambda: producer_queue.count("inactive") + producer_queue.count("active") == 0)
        assert doctor.check(producer_queue).findings == []
    finally:
        worker.close()
        producer_queue.close()
