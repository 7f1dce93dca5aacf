"""Job control from the command line: ``kue cancel``, ``kue move`` and ``kue stop-worker``
(through click's CliRunner, against a real Redis), each refusal with its message and exit
code; and ``kue worker`` processes stopped remotely, alone and under the supervisor."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator

import psutil
import pytest
from click.testing import CliRunner, Result

from kue_cli.cli import cli
from kue_core import Job, Queue, defaults
from tests.cli.running import Kue
from tests.conftest import finish, free_port, wait_for

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(autouse=True)
def no_kue_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Settings of the shell running the suite (KUE_PREFIX...) stay out."""
    for name in list(os.environ):
        if name.startswith("KUE_") and not name.startswith("KUE_TEST_"):
            monkeypatch.delenv(name)


def kue(queue: Queue, redis_url: str, *args: str) -> Result:
    """``kue ARGS`` on the test's queue."""
    return CliRunner().invoke(cli, [*args, "--redis", redis_url, "--prefix", queue.prefix])


def refused(result: Result, code: int, message: str) -> None:
    """A clear refusal: the exit code, the message on stderr, no traceback."""
    assert result.exit_code == code, result.output
    assert message in result.stderr, result.stderr
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert "Traceback" not in result.output


@pytest.fixture
def running(queue: Queue) -> Iterator[Job]:
    """A job of type ``t`` running in a worker of this process until its attempt is
    stopped."""
    job = queue.create_job("t", {"n": 1}).save()
    queue.process("t", lambda job: wait_for(lambda: job.stopping, timeout=30))
    wait_for(lambda: queue.get_job(job.id).state == "active")
    yield job
    queue.shutdown(1)


@pytest.fixture
def workers(redis_url: str, prefix: str) -> Iterator[Queue]:
    """Another queue object on the test's prefix, to run workers on."""
    q = Queue(redis_url, prefix=prefix)
    yield q
    q.shutdown(1)
    q.close()


# -- kue cancel -----------------------------------------------------------------------------
def test_cancel(queue: Queue, redis_url: str) -> None:
    job = queue.create_job("email").attempts(3).save()
    result = kue(queue, redis_url, "cancel", str(job.id), "--reason", "sent by hand")
    assert result.exit_code == 0, result.output
    assert result.stdout == f"cancelled job {job.id}: cancelled: sent by hand\n"
    stored = queue.get_job(job.id)
    assert (stored.state, stored.error) == ("failed", "cancelled: sent by hand")
    other = queue.create_job("email").delay(60_000).save()
    assert kue(queue, redis_url, "cancel", str(other.id)).stdout.endswith(": cancelled\n")


def test_cancel_a_running_job(queue: Queue, redis_url: str, running: Job) -> None:
    result = kue(queue, redis_url, "cancel", str(running.id), "--reason", "stuck")
    assert result.exit_code == 0, result.output
    stored = queue.get_job(running.id)
    assert (stored.state, stored.error) == ("failed", "cancelled: stuck")


def test_cancel_refusals(queue: Queue, redis_url: str) -> None:
    refused(kue(queue, redis_url, "cancel", "999999"), 2, 'job "999999" doesnt exist')
    refused(kue(queue, redis_url, "cancel", "abc"), 2, "job id")
    queue.create_job("t").save()
    done = finish(queue, "t", ok=True)
    refused(kue(queue, redis_url, "cancel", str(done)), 1, "Error: ")
    assert queue.get_job(done).state == "complete"
    job = queue.create_job("t").save()
    long = "x" * (defaults.MAX_REASON + 1)
    refused(kue(queue, redis_url, "cancel", str(job.id), "--reason", long), 2, "reason")
    assert queue.get_job(job.id).state == "inactive"


def test_cancel_without_redis_is_unavailable() -> None:
    result = CliRunner().invoke(cli, ["cancel", "1", "--redis", f"redis://127.0.0.1:{free_port()}"])
    refused(result, 3, "cannot reach Redis")


# -- kue move -------------------------------------------------------------------------------
def test_move(queue: Queue, redis_url: str) -> None:
    job = queue.create_job("email", {"to": "a"}).priority("high").save()
    result = kue(queue, redis_url, "move", str(job.id), "sms")
    assert result.exit_code == 0, result.output
    assert result.stdout == f"moved job {job.id} to sms (inactive)\n"
    moved = queue.get_job(job.id)
    assert (moved.type, moved.state, moved.data) == ("sms", "inactive", {"to": "a"})
    assert queue.ids("inactive", "sms") == [job.id]


def test_move_a_running_job_needs_force(queue: Queue, redis_url: str, running: Job) -> None:
    refused(kue(queue, redis_url, "move", str(running.id), "other"), 1, "Error: ")
    assert queue.get_job(running.id).type == "t"
    result = kue(queue, redis_url, "move", str(running.id), "other", "--force")
    assert result.exit_code == 0, result.output
    assert result.stdout == f"moved job {running.id} to other (inactive)\n"


def test_move_refusals(queue: Queue, redis_url: str) -> None:
    refused(kue(queue, redis_url, "move", "999999", "sms"), 2, 'job "999999" doesnt exist')
    job = queue.create_job("t").save()
    refused(kue(queue, redis_url, "move", str(job.id), " "), 2, "type")
    refused(kue(queue, redis_url, "move", str(job.id), "a\nb"), 2, "control characters")
    assert queue.get_job(job.id).type == "t"


# -- kue stop-worker ------------------------------------------------------------------------
def test_stop_worker(queue: Queue, redis_url: str, workers: Queue) -> None:
    workers.process("t", lambda job: None)
    [info] = wait_for(queue.workers)
    result = kue(queue, redis_url, "stop-worker", info["id"], "--timeout", "0.5")
    assert result.exit_code == 0, result.output
    assert result.stdout == f"asked worker {info['id']} to stop; its running jobs get 0.5 s\n"
    assert wait_for(workers.stopped_remotely.is_set)
    assert queue.workers() == []


def test_stop_worker_refusals(queue: Queue, redis_url: str) -> None:
    refused(kue(queue, redis_url, "stop-worker", "host:1:0a1b2c3d"), 2, "is not running")
    refused(kue(queue, redis_url, "stop-worker", "w", "--timeout", "-1"), 2, "--timeout")
    refused(kue(queue, redis_url, "stop-worker", "w", "--timeout", "1e300"), 2, "timeout")


# -- kue worker, stopped remotely -----------------------------------------------------------
def start_worker(redis_url: str, prefix: str, *args: str) -> Kue:
    return Kue(
        "worker", "tests.cli.handlers:sleepy", "-t", "nap", "--redis", redis_url, "--prefix",
        prefix, *args,
    )  # fmt: skip


@pytest.fixture
def started() -> Iterator[list[Kue]]:
    procs: list[Kue] = []
    yield procs
    for proc in procs:
        proc.kill()


def test_a_worker_stopped_remotely_exits_0(
    started: list[Kue], redis_url: str, prefix: str, queue: Queue
) -> None:
    worker = start_worker(redis_url, prefix)
    started.append(worker)
    worker.wait_for_line(r"worker pid \d+")
    [info] = wait_for(queue.workers)
    assert info["pid"] == worker.proc.pid
    job = queue.create_job("nap", {"seconds": 1}).save()
    wait_for(lambda: queue.get_job(job.id).state == "active", timeout=10)
    queue.stop_worker(info["id"], timeout=30)
    assert worker.wait(timeout=30) == 0, worker.output
    assert "stopped remotely" in worker.output and worker.err[-1].endswith("stopped")
    assert "Traceback" not in worker.output
    done = queue.get_job(job.id)  # the running job had its time to finish
    assert (done.state, done.result) == ("complete", {"slept": 1})
    assert queue.workers() == []


def test_kue_stop_worker_stops_a_kue_worker(
    started: list[Kue], redis_url: str, prefix: str, queue: Queue
) -> None:
    worker = start_worker(redis_url, prefix, "--shutdown-timeout", "60")
    started.append(worker)
    worker.wait_for_line(r"worker pid \d+")
    job = queue.create_job("nap", {"seconds": 60}).attempts(2).save()
    # Its handler runs: a job is active from its claim, and one whose handler had not begun
    # when the stop came (its slot held up under load) is not given back with no time given,
    # but run, and left active to its lease as the process exits.
    worker.wait_for_line(rf"^started job {job.id}$", timeout=10)
    [info] = wait_for(queue.workers, timeout=10)  # it registers at its first heartbeat
    result = kue(queue, redis_url, "stop-worker", info["id"], "--timeout", "0")
    assert result.exit_code == 0, result.output
    assert worker.wait(timeout=30) == 0, worker.output
    back = queue.get_job(job.id)  # no time to finish: back to the queue at once
    assert (back.state, back.attempts_made) == ("inactive", 0)


def test_a_signal_still_stops_a_worker(
    started: list[Kue], redis_url: str, prefix: str, queue: Queue
) -> None:
    worker = start_worker(redis_url, prefix)
    started.append(worker)
    worker.wait_for_line(r"worker pid \d+")
    worker.send(signal.SIGTERM)
    assert worker.wait() == 0, worker.output
    assert "SIGTERM: stopping" in worker.output and "remotely" not in worker.output


# -- under the supervisor -------------------------------------------------------------------
def children(kue: Kue) -> set[int]:
    try:
        return {p.pid for p in psutil.Process(kue.proc.pid).children()}
    except psutil.NoSuchProcess:
        return set()


@pytest.mark.slow
@pytest.mark.single_node
def test_supervised_processes_stopped_remotely_are_not_restarted(
    started: list[Kue], redis_url: str, prefix: str, queue: Queue
) -> None:
    """One stopped: the other keeps working and the supervisor keeps running; both stopped:
    the supervisor exits 0."""
    supervisor = Kue(
        "worker", "tests.cli.handlers:echo", "-t", "double", "--processes", "2", "--redis",
        redis_url, "--prefix", prefix,
    )  # fmt: skip
    started.append(supervisor)
    first, second = wait_for(lambda: len(queue.workers()) == 2 and queue.workers(), timeout=30)
    pids = children(supervisor)
    assert pids == {first["pid"], second["pid"]}

    queue.stop_worker(first["id"])
    supervisor.wait_for_line(rf"worker process \d \(pid {first['pid']}\) was stopped")
    assert wait_for(lambda: [w["id"] for w in queue.workers()] == [second["id"]])
    jobs = queue.save_many(queue.create_job("double", {"n": n}) for n in range(20))
    wait_for(lambda: queue.count("complete") == 20, timeout=20)
    assert {queue.get_job(j.id).result["pid"] for j in jobs} == {second["pid"]}
    assert children(supervisor) == {second["pid"]}  # not started again
    assert supervisor.proc.poll() is None

    queue.stop_worker(second["id"])
    assert supervisor.wait(timeout=30) == 0, supervisor.output
    assert "every worker process was stopped" in supervisor.output
    assert "starting another" not in supervisor.output and "Traceback" not in supervisor.output
