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

from tests.conftest import (
    CLUSTER_ARGS,
    replica_in_sync,
    start_cluster,
    start_redis,
    stop,
    wait_for,
)
from tests.integration.failover import survives_failover

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

    def fail_over() -> None:
        ha_cluster.kill(old)
        wait_for(lambda: ha_cluster.owner() == new, timeout=30, interval=0.1)
        ha_cluster.restart(old)
        wait_for(lambda: replica_in_sync(old), timeout=30, interval=0.1)

    survives_failover(ha_cluster.url + "?replicas=1", PREFIX, fail_over, new)
