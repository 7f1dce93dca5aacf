"""Workers in other processes that die, hang, or lose Redis: no job is lost or run twice."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest
import redis

from kue_core import Job, Queue, doctor
from tests.conftest import REDIS_SERVER, free_port, wait_for
from tests.integration.processes import Processes

LEASE_MS = 500

# A worker process: runs jobs of type "t" until SIGTERM. What a job does is in its data:
# "block" records "<id>" in <prefix>:started and hangs until the process is killed, "poison"
# kills the process, anything else records "<id>:<pid>" in <prefix>:ran and returns the pid.
WORKER = """
import os, signal, sys, threading, time
from kue_core import Queue
url, prefix, n, lease_ms = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
queue = Queue(url, prefix=prefix, lease_ms=lease_ms)
stop, ready = threading.Event(), threading.Event()
signal.signal(signal.SIGTERM, lambda *a: stop.set())

def handler(job):
    if job.data.get("poison"):
        ready.wait()  # dies once it has said ready: its starter reads that line first
        os._exit(3)
    if job.data.get("block"):
        queue.client.rpush(prefix + ":started", str(job.id))
        threading.Event().wait()
    queue.client.rpush(prefix + ":ran", f"{job.id}:{os.getpid()}")
    return os.getpid()

queue.process("t", n, handler)
print("ready", flush=True)
ready.set()
stop.wait()
queue.shutdown(timeout=5)
queue.close()
"""


class Workers(Processes):
    """Worker subprocesses for one test; every one is killed at the end."""

    def start(
        self, n: int = 1, processes: int = 1, lease_ms: int = LEASE_MS
    ) -> subprocess.Popen[str]:
        """Start ``processes`` workers of ``n`` slots each, together; return the last."""
        script = textwrap.dedent(WORKER)
        argv = [sys.executable, "-c", script, self.redis_url, self.prefix, str(n), str(lease_ms)]
        return self.launch(*[argv] * processes)


@pytest.fixture
def workers(redis_url: str, prefix: str) -> Iterator[Workers]:
    w = Workers(redis_url, prefix)
    yield w
    w.close()


def _ran(queue: Queue) -> list[str]:
    return queue.client.lrange(f"{queue.prefix}:ran", 0, -1)  # type: ignore[return-value]


def _started(queue: Queue, job: Job) -> None:
    """Wait until the handler of a blocking job runs: active once claimed is not enough, as a
    job claimed before its process was held up past its lease is not started at all."""
    started = f"{queue.prefix}:started"
    wait_for(lambda: queue.client.lrange(started, 0, -1) == [str(job.id)])


def test_a_killed_workers_job_is_completed_by_another(queue: Queue, workers: Workers) -> None:
    doomed = workers.start()
    job = queue.create_job("t", {"block": True}).save()
    wait_for(lambda: queue.get_job(job.id).state == "active")  # type: ignore[arg-type]
    doomed.send_signal(signal.SIGKILL)
    doomed.wait(timeout=10)
    queue.client.hset(queue.keys.job(job.id), "data", "{}")  # type: ignore[arg-type]  # next run completes
    survivor = workers.start()
    wait_for(lambda: queue.get_job(job.id).state == "complete", timeout=10)  # type: ignore[arg-type]
    assert _ran(queue) == [f"{job.id}:{survivor.pid}"]
    assert queue.history(job.id)[2]["stalled"] == 1  # type: ignore[arg-type]


def test_a_paused_worker_cannot_complete_a_job_taken_over(queue: Queue, workers: Workers) -> None:
    sleepy = workers.start()
    job = queue.create_job("t", {"block": True}).save()
    _started(queue, job)
    sleepy.send_signal(signal.SIGSTOP)
    try:
        queue.client.hset(queue.keys.job(job.id), "data", "{}")  # type: ignore[arg-type]
        other = workers.start()
        wait_for(lambda: queue.get_job(job.id).state == "complete", timeout=10)  # type: ignore[arg-type]
    finally:
        sleepy.send_signal(signal.SIGCONT)
    # The paused worker wakes up still blocked in its handler; its lease is gone, and its
    # heartbeat learns so. The job ran to completion once, by the other worker.
    assert _ran(queue) == [f"{job.id}:{other.pid}"]
    assert queue.get_job(job.id).to_dict()["result"] == other.pid  # type: ignore[arg-type]


def test_a_worker_woken_past_its_lease_leaves_its_stuck_handler_and_works_on(
    queue: Queue, workers: Workers
) -> None:
    stuck = workers.start()
    job = queue.create_job("t", {"block": True}).save()
    _started(queue, job)
    stuck.send_signal(signal.SIGSTOP)
    try:
        queue.client.hset(queue.keys.job(job.id), "data", "{}")  # type: ignore[arg-type]
        other = workers.start()
        wait_for(lambda: queue.get_job(job.id).state == "complete", timeout=10)  # type: ignore[arg-type]
        other.send_signal(signal.SIGTERM)
        assert other.wait(timeout=15) == 0
    finally:
        stuck.send_signal(signal.SIGCONT)
    # Its handler still blocks for ever; its heartbeat learns the lease is lost, and its only
    # slot goes on in a new thread: it runs the next job.
    wait_for(lambda: [w["abandoned_threads"] for w in queue.workers()] == [1], timeout=10)
    after = queue.create_job("t").save()
    wait_for(lambda: queue.get_job(after.id).state == "complete", timeout=10)  # type: ignore[arg-type]
    assert _ran(queue) == [f"{job.id}:{other.pid}", f"{after.id}:{stuck.pid}"]
    assert doctor.check(queue).findings == []


def test_a_poison_job_fails_after_the_stall_limit_while_others_flow(
    queue: Queue, workers: Workers
) -> None:
    poison = queue.create_job("t", {"poison": True}).save()
    good = [queue.create_job("t").save() for _ in range(20)]
    deadline = time.monotonic() + 30
    while queue.get_job(poison.id).state != "failed":  # type: ignore[arg-type]
        assert time.monotonic() < deadline, "the poison job never failed"
        if all(p.poll() is not None for p in workers.procs):
            workers.start()  # a supervisor restarting dead workers
        time.sleep(0.05)
    error = queue.get_job(poison.id).error or ""  # type: ignore[arg-type]
    assert error.startswith("stalled 2 times")
    if all(p.poll() is not None for p in workers.procs):
        workers.start()
    wait_for(lambda: all(queue.get_job(j.id).state == "complete" for j in good), timeout=10)  # type: ignore[arg-type]


def test_many_jobs_over_several_processes_run_exactly_once(
    queue: Queue, workers: Workers, r: redis.Redis, prefix: str
) -> None:
    jobs = queue.save_many([queue.create_job("t", {"i": i}) for i in range(10_000)])
    # No fault here, so a lease no load can outlast: a process held up past a short one (CI on
    # two cores, under coverage) rightly loses its job to another, which runs it again.
    workers.start(4, processes=4, lease_ms=30_000)
    wait_for(lambda: queue.count("complete") == 10_000, timeout=60)
    ran = [entry.split(":")[0] for entry in _ran(queue)]
    assert sorted(map(int, ran)) == sorted(j.id for j in jobs)  # type: ignore[misc]
    assert len({entry.split(":")[1] for entry in _ran(queue)}) == 4  # all took part
    counts = queue.counts()
    assert counts == {
        "inactive": 0,
        "active": 0,
        "complete": 10_000,
        "failed": 0,
        "delayed": 0,
        "blocked": 0,
        "pinned": 0,
        "suspended": 0,
    }
    assert r.zcard(queue.keys.type_state("t", "complete")) == 10_000
    assert r.zcard(queue.keys.jobs) == 10_000
    assert r.zcard(queue.keys.leases) == 0 and not r.exists(queue.keys.recovering)
    for proc in workers.procs:
        proc.send_signal(signal.SIGTERM)
    for proc in workers.procs:
        assert proc.wait(timeout=15) == 0
    assert queue.workers() == []
    # Each process counted its completions itself; a clean shutdown added the last of them.
    assert queue.totals()["complete"] == {"t": 10_000}
    assert queue.work_time() == sum(_durations(queue, [j.id for j in jobs]))  # type: ignore[misc]


def _durations(queue: Queue, ids: Iterable[int]) -> list[int]:
    pipe = queue.client.pipeline(transaction=False)
    for job_id in ids:
        pipe.hget(queue.keys.job(job_id), "duration")
    return [int(d) for d in pipe.execute()]


def test_a_killed_worker_loses_at_most_its_last_counts_never_a_job(
    queue: Queue, workers: Workers
) -> None:
    """The counters of completions a worker process adds itself (kue_core.features.tally):
    killed, it loses those of its last second at most; every job completes once, counted or
    not, and the survivor's are all counted."""
    jobs = queue.save_many([queue.create_job("t", {"i": i}) for i in range(3_000)])
    doomed = workers.start(2)
    wait_for(lambda: queue.count("complete") >= 500, timeout=30)
    doomed.send_signal(signal.SIGKILL)
    doomed.wait(timeout=10)
    survivor = workers.start(2)
    wait_for(lambda: queue.count("complete") == 3_000, timeout=60)
    # The survivor's heartbeat drops the dead one's registration three leases on.
    wait_for(lambda: doctor.check(queue).findings == [], timeout=10)
    survivor.send_signal(signal.SIGTERM)
    assert survivor.wait(timeout=15) == 0
    ran = [entry.split(":") for entry in _ran(queue)]
    # A job runs twice when the kill cut off its completion, and when the survivor was held
    # up past its short lease (CI on two cores) and ran again what it lost, counted once.
    by_survivor = {int(i) for i, pid in ran if pid == str(survivor.pid)}
    assert by_survivor and len(ran) >= 3_000
    counted = queue.totals()["complete"]["t"]
    assert len(by_survivor) <= counted <= 3_000
    work_time = queue.work_time()
    assert sum(_durations(queue, by_survivor)) <= work_time
    assert work_time <= sum(_durations(queue, [j.id for j in jobs]))  # type: ignore[misc]


def test_workers_survive_a_redis_restart(tmp_path: os.PathLike[str], prefix: str) -> None:
    port = free_port()
    args = [REDIS_SERVER, "--port", str(port), "--bind", "127.0.0.1"]
    args += ["--dir", str(tmp_path), "--appendonly", "yes", "--appendfsync", "always"]
    args += ["--save", ""]
    server = subprocess.Popen(args, stdout=subprocess.DEVNULL)
    url = f"redis://127.0.0.1:{port}/0"
    client = redis.Redis.from_url(url, decode_responses=True)
    wait_for(lambda: _pings(client))
    q = Queue(url, prefix=prefix, lease_ms=LEASE_MS)
    w = Workers(url, prefix)
    try:
        w.start(2)
        first = [q.create_job("t").save() for _ in range(20)]
        wait_for(lambda: q.count("complete") == 20)
        server.terminate()
        server.wait(timeout=10)
        server = subprocess.Popen(args, stdout=subprocess.DEVNULL)
        wait_for(lambda: _pings(client))
        second = wait_for(lambda: _save_when_up(q, 20), timeout=10)
        wait_for(lambda: q.count("complete") == 40, timeout=20)
        ids = {int(e.split(":")[0]) for e in _ran(q)}
        assert ids == {j.id for j in first + second}
    finally:
        w.close()
        q.close()
        client.close()
        server.terminate()
        server.wait(timeout=10)


def _pings(client: redis.Redis) -> bool:
    try:
        return bool(client.ping())
    except redis.ConnectionError:
        return False


def _save_when_up(queue: Queue, n: int) -> list[object] | None:
    try:
        return [queue.create_job("t").save() for _ in range(n)]
    except redis.ConnectionError:
        return None


def test_a_worker_says_an_outage_once_with_a_count(tmp_path: Path, prefix: str) -> None:
    """Redis gone for longer than the window of repeats (ERROR_REPEAT_WINDOW): the worker's
    threads all retry, and its log says so in a line, then a line with the count, not a line
    a try; once Redis is back it works on, and a last line says so, with the count."""
    port = free_port()
    args = [REDIS_SERVER, "--port", str(port), "--bind", "127.0.0.1", "--dir", str(tmp_path)]
    args += ["--save", "", "--appendonly", "no"]
    server = subprocess.Popen(args, stdout=subprocess.DEVNULL)
    url = f"redis://127.0.0.1:{port}/0"
    client = redis.Redis.from_url(url, decode_responses=True)
    wait_for(lambda: _pings(client))
    log_path = tmp_path / "worker.log"
    with log_path.open("w") as log:
        argv = [sys.executable, "-c", textwrap.dedent(WORKER), url, prefix, "4", str(LEASE_MS)]
        worker = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=log, text=True)
    try:
        assert worker.stdout is not None and worker.stdout.readline() == "ready\n"
        server.kill()
        server.wait(timeout=10)
        wait_for(lambda: "repeated" in log_path.read_text(), timeout=30)
        server = subprocess.Popen(args, stdout=subprocess.DEVNULL)
        wait_for(lambda: _pings(client))
        with Queue(url, prefix=prefix) as q:
            job = q.create_job("t").save()
            wait_for(lambda: q.get_job(job.id).state == "complete", timeout=20)
        wait_for(lambda: "Redis answers again" in log_path.read_text(), timeout=20)
        # (Under a loaded machine, a job claimed after the outage may wait past a lease for
        # its slot: the keeper's look for lost claims rightly gives it back, and says so.)
        lines = [
            line
            for line in log_path.read_text().splitlines()
            if "the reply was lost (Redis was cut off): given back to wait" not in line
        ]
        said = [line for line in lines if "Redis unreachable" in line]
        assert said == lines[:-1] and 2 <= len(said) <= 3, lines
        assert re.search(r"Redis answers again \(after \d+ errors in \d+\.\d s\)$", lines[-1]), (
            lines
        )
        assert said[0].endswith("; retrying"), said  # the reset, or the refusal after it
        # Refused, as the blocking client or asyncio's says it (runtime="loop").
        assert re.search("Connection refused|Connect call failed", said[1]), said
        assert re.search(r"; retrying \(repeated \d+ times in 1\d s\)$", said[1]), said
    finally:
        worker.kill()
        worker.wait(timeout=10)
        client.close()
        server.terminate()
        server.wait(timeout=10)
