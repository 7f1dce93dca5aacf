"""Redis Sentinel: a primary, a replica and a sentinel on loopback; the primary dies while
workers, a producer and the API run, the sentinel promotes the replica, and everything carries
on against the new primary without losing a job whose save was acknowledged."""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import redis

from kue_core import ConnectionFailed, NotReplicated, Queue, connection
from tests.conftest import REDIS_SERVER, free_port, replica_in_sync, start_redis, stop, wait_for
from tests.integration.failover import survives_failover

pytestmark = pytest.mark.single_node

SERVICE = "jobs"


@dataclass
class Deployment:
    """A primary and a replica watched by one sentinel (quorum 1)."""

    tmp: Path
    ports: list[int] = field(default_factory=lambda: [free_port(), free_port()])
    sentinel_port: int = field(default_factory=free_port)
    procs: dict[int, subprocess.Popen[bytes]] = field(default_factory=dict)

    def start(self) -> None:
        primary, replica = self.ports
        self.procs[primary] = start_redis(self.tmp / str(primary), primary)
        self.procs[replica] = start_redis(
            self.tmp / str(replica), replica, "--replicaof", "127.0.0.1", str(primary)
        )
        wait_for(lambda: replica_in_sync(replica), timeout=20)
        conf = self.tmp / "sentinel.conf"
        conf.write_text(
            f"port {self.sentinel_port}\nbind 127.0.0.1\ndir {self.tmp}\n"
            f"sentinel monitor {SERVICE} 127.0.0.1 {primary} 1\n"
            # Long enough that a loaded machine does not make the sentinel judge the newly
            # promoted primary down too, and fail over again to the restarted, empty server.
            f"sentinel down-after-milliseconds {SERVICE} 3000\n"
            f"sentinel failover-timeout {SERVICE} 10000\n"
        )
        self.procs[self.sentinel_port] = subprocess.Popen(
            [REDIS_SERVER, str(conf), "--sentinel"], stdout=subprocess.DEVNULL
        )
        # Ready once the sentinel has found the replica it would promote.
        wait_for(lambda: self._ask("SENTINEL", "REPLICAS", SERVICE), timeout=30, interval=0.1)

    def url(self, query: str = "") -> str:
        return f"redis+sentinel://127.0.0.1:{self.sentinel_port}/{SERVICE}{query}"

    def primary(self) -> int:
        _, port = self._ask("SENTINEL", "GET-MASTER-ADDR-BY-NAME", SERVICE)
        return int(port)

    def kill(self, port: int) -> None:
        """As a crash would: SIGKILL, nothing flushed."""
        os.kill(self.procs[port].pid, signal.SIGKILL)
        self.procs[port].wait()

    def restart(self, port: int) -> None:
        """Bring a dead server back (empty: it persists nothing), as a primary, the way a
        rebooted machine would; the sentinel makes it a replica of the new primary."""
        self.procs[port] = start_redis(self.tmp / str(port), port)

    def _ask(self, *command: str) -> list[str]:
        with redis.Redis(port=self.sentinel_port, decode_responses=True) as s:
            try:
                return list(s.execute_command(*command))
            except redis.ConnectionError:
                return []

    def stop(self) -> None:
        stop(list(self.procs.values()))


@pytest.fixture
def deployment(tmp_path: Path) -> Iterator[Deployment]:
    d = Deployment(tmp_path)
    try:
        d.start()
        yield d
    finally:
        d.stop()


def test_workers_producer_and_api_survive_a_failover_without_losing_a_job(
    deployment: Deployment, prefix: str
) -> None:
    old, new = deployment.ports

    def fail_over() -> None:
        deployment.kill(old)
        wait_for(lambda: deployment.primary() == new, timeout=30, interval=0.1)
        deployment.restart(old)
        wait_for(lambda: replica_in_sync(old), timeout=30, interval=0.1)

    survives_failover(deployment.url("?replicas=1"), prefix, fail_over, new)


def test_a_save_no_replica_confirms_is_not_acknowledged(
    deployment: Deployment, prefix: str
) -> None:
    """With ``replicas=N`` a save returns only once N replicas have it; fewer in time raises
    ``NotReplicated``, for one save and for a bulk save."""
    queue = Queue(deployment.url("?replicas=1"), prefix=prefix)
    strict = Queue(deployment.url(), prefix=prefix, replicas=2)  # there is one replica
    try:
        job = queue.create_job("task", {"n": 1}).save()
        with redis.Redis(port=deployment.ports[1]) as replica:
            assert replica.exists(f"{prefix}:job:{job.id}")  # WAIT returned: it is there
        with pytest.raises(NotReplicated, match="only 1 of 2 replicas"):
            strict.create_job("task", {"n": 2}).save()
        big = [strict.create_job("task", {"n": i}) for i in range(2500)]
        with pytest.raises(NotReplicated):
            strict.save_many(big)
        assert queue.save_many([queue.create_job("task", {"n": i}) for i in range(2500)])
    finally:
        queue.close()
        strict.close()


def test_sentinel_urls(deployment: Deployment) -> None:
    client = connection.from_url(deployment.url("/0"))
    try:
        assert client.ping()
        assert client.connection_pool.get_master_address()[1] == deployment.ports[0]
    finally:
        client.close()
    for bad, why in [
        (f"redis+sentinel://127.0.0.1:{deployment.sentinel_port}", "name the Sentinel service"),
        (f"redis+sentinel://127.0.0.1:{deployment.sentinel_port}/{SERVICE}/x", "service"),
        (deployment.url("?replicas=many"), "replicas must be a whole number"),
        (deployment.url("?nope=1"), "unknown option 'nope'"),
    ]:
        with pytest.raises(ConnectionFailed, match=why):
            Queue(bad, prefix="q")
    with pytest.raises(ConnectionFailed) as info:
        connection.from_url(
            f"redis+sentinel://u:pw-1@127.0.0.1:1/{SERVICE}/x?sentinel_password=pw-2"
        )
    assert "pw-1" not in str(info.value) and "pw-2" not in str(info.value)
