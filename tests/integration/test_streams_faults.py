"""Job streams under crashes, with real worker processes: one SIGKILLed while it streams, one
paused (SIGSTOP) past its lease while it streams and woken after another worker finished the
job. A live reader sees the first run's parts, then the recovery's (attempt 2), in order, with
every part a worker was told was written; the paused worker's later writes are refused by the
fence and leave nothing; the job completes once, with the second worker's result; ``kue
doctor`` finds nothing."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator

import pytest

from kue_core import Queue, StreamPart, doctor
from tests.conftest import wait_for
from tests.integration.processes import Processes

LEASE_MS = 500
#: Parts the recovering worker streams before it completes the job.
PARTS = 30

# A worker process: runs jobs of type "t" until SIGTERM. Its handler streams "<pid>:<n>" for
# n = 0, 1, ... (every 5 ms), and once a write returns, records the same in <prefix>:acked;
# "endless" streams until the process dies or a write is refused (recorded in
# <prefix>:refused with the error), "finite" streams PARTS parts and returns its pid.
WORKER = """
import os, signal, sys, threading, time
from kue_core import Queue, Stopped
url, prefix, lease_ms, mode, parts = sys.argv[1:6]
queue = Queue(url, prefix=prefix, lease_ms=int(lease_ms))
stop = threading.Event()
signal.signal(signal.SIGTERM, lambda *a: stop.set())
pid = os.getpid()

def handler(job):
    n = 0
    while mode == "endless" or n < int(parts):
        try:
            job.stream(f"{pid}:{n}")
        except Stopped as e:
            queue.client.rpush(prefix + ":refused", f"{pid}:{n}:{e}")
            raise
        queue.client.rpush(prefix + ":acked", f"{pid}:{n}")
        n += 1
        time.sleep(0.005)
    return pid

queue.process("t", 1, handler)
print("ready", flush=True)
stop.wait()
queue.shutdown(timeout=5)
queue.close()
"""


class Workers(Processes):
    def start(self, mode: str) -> subprocess.Popen[str]:
        args = [self.redis_url, self.prefix, str(LEASE_MS), mode, str(PARTS)]
        return self.launch([sys.executable, "-c", textwrap.dedent(WORKER), *args])


@pytest.fixture
def workers(redis_url: str, prefix: str) -> Iterator[Workers]:
    w = Workers(redis_url, prefix)
    yield w
    w.close()


class Reader:
    """``queue.stream_parts()`` of one job, followed in a thread from before it runs."""

    def __init__(self, redis_url: str, prefix: str, job_id: int) -> None:
        self.parts: list[StreamPart] = []
        self.error: BaseException | None = None
        self._queue = Queue(redis_url, prefix=prefix)
        self._thread = threading.Thread(target=self._read, args=(job_id,), daemon=True)
        self._thread.start()

    def _read(self, job_id: int) -> None:
        try:
            for part in self._queue.stream_parts(job_id, timeout=60):
                self.parts.append(part)
        except BaseException as e:  # handed to the test, which fails with it
            self.error = e

    def done(self) -> list[StreamPart]:
        """Every part read, once the job has ended and the iteration with it."""
        self._thread.join(60)
        self._queue.close()
        assert not self._thread.is_alive() and self.error is None, self.error
        return self.parts


def _acked(queue: Queue, pid: int) -> list[str]:
    got: list[str] = queue.client.lrange(f"{queue.prefix}:acked", 0, -1)  # type: ignore[assignment]
    return [a for a in got if a.startswith(f"{pid}:")]


def _by(parts: list[StreamPart], pid: int) -> list[StreamPart]:
    return [p for p in parts if p.value.startswith(f"{pid}:")]


def _completions(queue: Queue, job_id: int) -> int:
    return sum(1 for h in queue.history(job_id) if h.get("state") == "complete")


def _healthy(queue: Queue) -> None:
    """``kue doctor``'s checks find nothing, once a dead worker's registration is dropped
    (by a live one's heartbeat, three leases on)."""
    wait_for(lambda: doctor.check(queue).findings == [], timeout=15)


@pytest.mark.single_node  # the fence is one script: test_streams.py runs it on Cluster
def test_a_reader_follows_a_stream_across_a_killed_workers_recovery(
    queue: Queue, workers: Workers, redis_url: str, prefix: str
) -> None:
    job = queue.create_job("t").save()
    assert job.id is not None
    reader = Reader(redis_url, prefix, job.id)
    doomed = workers.start("endless")
    wait_for(lambda: len(_acked(queue, doomed.pid)) >= 20, timeout=30)
    doomed.send_signal(signal.SIGKILL)  # mid-stream: it writes a part every 5 ms
    doomed.wait(timeout=10)
    acked = _acked(queue, doomed.pid)  # all it was ever told was written
    survivor = workers.start("finite")
    parts = reader.done()

    first, second = _by(parts, doomed.pid), _by(parts, survivor.pid)
    assert parts == first + second  # the dead run's parts, then the recovery's
    written = [p.value for p in first]
    assert written == [f"{doomed.pid}:{n}" for n in range(len(written))]  # in order, no gap
    # Nothing acknowledged is lost; at most the one part it was writing when killed is in the
    # stream without its acknowledgement.
    assert written[: len(acked)] == acked and len(written) - len(acked) <= 1
    assert [p.value for p in second] == [f"{survivor.pid}:{n}" for n in range(PARTS)]
    # The recovery is another run: its parts are told apart by their attempt.
    assert [p.attempt for p in parts] == [1] * len(first) + [2] * len(second)
    stored = queue.get_job(job.id)
    assert (stored.state, stored.to_dict()["result"]) == ("complete", survivor.pid)
    assert _completions(queue, job.id) == 1
    assert [h["stalled"] for h in queue.history(job.id) if "stalled" in h] == [1]  # recovered once
    _healthy(queue)


@pytest.mark.single_node  # the fence is one script: test_streams.py runs it on Cluster
def test_a_worker_woken_past_its_lease_cannot_stream_into_the_recovery(
    queue: Queue, workers: Workers, redis_url: str, prefix: str
) -> None:
    job = queue.create_job("t").save()
    assert job.id is not None
    reader = Reader(redis_url, prefix, job.id)
    stale = workers.start("endless")
    wait_for(lambda: len(_acked(queue, stale.pid)) >= 20, timeout=30)
    stale.send_signal(signal.SIGSTOP)  # mid-stream, and held past its lease
    try:
        other = workers.start("finite")
        parts = reader.done()  # the recovery completed the job
    finally:
        stale.send_signal(signal.SIGCONT)
    refused = f"{queue.prefix}:refused"
    # Woken, it writes on; its next write is refused (it never learnt the job ended).
    wait_for(lambda: queue.client.llen(refused) == 1, timeout=15)
    (said,) = queue.client.lrange(refused, 0, -1)  # type: ignore[misc]
    # Refused by the fence in stream.lua as a rule; by the worker itself when its heartbeat
    # learnt first that the lease was lost. Either way nothing was written.
    assert said.startswith(f"{stale.pid}:") and f"attempt at job {job.id} is over" in said

    first, second = _by(parts, stale.pid), _by(parts, other.pid)
    assert parts == first + second  # nothing of the stale run after the recovery's parts
    held = [p.value for p in queue.stream_parts(job.id, timeout=10)]
    assert held == [p.value for p in parts]  # nor since the reader ended
    acked = _acked(queue, stale.pid)
    assert [p.value for p in first][: len(acked)] == acked and len(first) - len(acked) <= 1
    assert [p.value for p in second] == [f"{other.pid}:{n}" for n in range(PARTS)]
    assert [p.attempt for p in parts] == [1] * len(first) + [2] * len(second)
    stored = queue.get_job(job.id)
    assert (stored.state, stored.to_dict()["result"]) == ("complete", other.pid)
    assert _completions(queue, job.id) == 1
    assert [h["stalled"] for h in queue.history(job.id) if "stalled" in h] == [1]
    _healthy(queue)
