"""``kue worker --id`` as real processes: a live id refuses a second process (exit 2, before
it claims anything); a SIGKILLed holder's id is free at once on its host; a holder stopped
past its lease is taken over and, resumed, exits and leaves the new registration alone;
``--processes`` numbers the ids; ``kue stop-worker`` addresses a stable id."""

from __future__ import annotations

import re
import signal

import pytest
import redis
from click.testing import CliRunner

from kue_cli.cli import cli
from kue_core import Queue
from kue_core.connection import server_ms
from tests.cli.running import Kue, doctor_finds_nothing
from tests.conftest import wait_for

pytestmark = [pytest.mark.timeout(120), pytest.mark.single_node]

LEASE = "0.3"  # seconds: a heartbeat every 0.1 s


def start(
    run: list[Kue],
    redis_url: str,
    prefix: str,
    *args: str,
    env: dict[str, str] | None = None,
    lease: str = LEASE,
) -> Kue:
    kue = Kue(
        "worker", "tests.cli.handlers:echo", "-t", "double", "--lease", lease, "--redis",
        redis_url, "--prefix", prefix, *args, env=env,
    )  # fmt: skip
    run.append(kue)
    return kue


def started(kue: Kue, worker_id: str) -> None:
    """Wait until ``kue`` runs under ``worker_id`` (it logs so once registered)."""
    kue.wait_for_line(rf"worker pid {kue.proc.pid}, id {worker_id}: ")


def registered(queue: Queue) -> dict[str, int]:
    """Worker id -> pid of the live workers."""
    return {w["id"]: w["pid"] for w in queue.workers()}


def test_a_second_worker_with_a_live_id_exits_2_before_claiming(
    run: list[Kue], redis_url: str, prefix: str, queue: Queue
) -> None:
    # A lease of 30 s: its registration outlives it by far once it is killed.
    first = start(run, redis_url, prefix, "--id", "w1", lease="30")
    started(first, "w1")
    waiting = queue.create_job("other", {"n": 1}).save()
    second = start(run, redis_url, prefix, "-t", "other", env={"KUE_WORKER_ID": "w1"})
    assert second.wait() == 2, second.output
    [line] = [e for e in second.err if e.startswith("Error: ")]
    assert re.fullmatch(
        rf"Error: worker id 'w1' is in use by .+:{first.proc.pid} \(last heartbeat \d+\.\d s "
        r"ago\); it is free once that process stops, or 30 s after its last heartbeat",
        line,
    ), line
    assert "Traceback" not in second.output
    assert queue.get_job(waiting.id).state == "inactive"  # type: ignore[arg-type]
    assert registered(queue) == {"w1": first.proc.pid}

    # Killed: its registration stays a while, but its pid is dead on this host: taken at once.
    first.send(signal.SIGKILL)
    assert first.wait() == -signal.SIGKILL
    assert registered(queue) == {"w1": first.proc.pid}
    again = start(run, redis_url, prefix, "-t", "other", "--id", "w1")
    started(again, "w1")
    again.wait_for_line(rf"its holder, .*:{first.proc.pid} .* taking the id over")
    assert registered(queue) == {"w1": again.proc.pid}
    wait_for(lambda: queue.get_job(waiting.id).state == "complete", timeout=10)  # type: ignore[arg-type]


def test_a_worker_stopped_past_its_lease_is_taken_over_and_exits_when_resumed(
    run: list[Kue], redis_url: str, prefix: str, queue: Queue, r: redis.Redis
) -> None:
    # A lease of 2 s: its registration is still there (for 3 leases) when the second starts.
    first = start(run, redis_url, prefix, "--id", "w1", lease="2")
    started(first, "w1")
    key = queue.keys.worker("w1")
    first.send(signal.SIGSTOP)
    try:
        # Silent past its lease: its last heartbeat is older than 2 s on Redis's clock.
        wait_for(lambda: server_ms(r) > int(r.hget(key, "heartbeat") or 0) + 2000, timeout=10)  # type: ignore[arg-type]
        old = r.hget(key, "instance")
        second = start(run, redis_url, prefix, "--id", "w1")
        started(second, "w1")
        assert registered(queue) == {"w1": second.proc.pid}
        instance = r.hget(key, "instance")
        assert old is not None and instance not in (None, old)
    finally:
        first.send(signal.SIGCONT)
    assert first.wait() == 0, first.output
    first.wait_for_line(
        r"ERROR kue_core\.worker\.\w+: worker id 'w1' was taken over by "
        rf".*:{second.proc.pid} while this process was silent past its lease"
    )
    assert "Traceback" not in first.output
    assert first.err[-1].endswith("stopped")
    # The second's registration is intact, and it works on.
    assert r.hget(key, "instance") == instance
    assert registered(queue) == {"w1": second.proc.pid}
    job = queue.create_job("double", {"n": 4}).save()
    wait_for(lambda: queue.get_job(job.id).result is not None, timeout=10)  # type: ignore[arg-type]
    assert queue.get_job(job.id).result == {"twice": 8, "pid": second.proc.pid}  # type: ignore[arg-type]
    assert second.proc.poll() is None
    doctor_finds_nothing(queue.prefix, redis_url)


def test_a_refused_or_invalid_id_exits_2_naming_why(
    run: list[Kue], redis_url: str, prefix: str
) -> None:
    bad = start(run, redis_url, prefix, "--id", "bad id")
    assert bad.wait() == 2, bad.output
    assert (
        "Error: a worker id must be 1 to 100 characters: letters, digits and . _ : @ -, "
        "starting with a letter or a digit; got 'bad id'" in bad.err
    )
    # With --processes, the longest id a child would get is checked before any starts.
    long = start(run, redis_url, prefix, "--id", "a" * 99, "--processes", "2")
    assert long.wait() == 2, long.output
    assert any(f"got '{'a' * 99}-2'" in line for line in long.err), long.output


def test_processes_get_numbered_ids_and_stop_worker_addresses_them(
    run: list[Kue], redis_url: str, prefix: str, queue: Queue
) -> None:
    # A lease of 1 s (registrations kept 3 s): under a loaded CI machine a 0.3 s lease's
    # registration once lapsed between two heartbeats while the test read the workers.
    supervisor = start(run, redis_url, prefix, "--id", "gpu", "--processes", "2", lease="1")
    ids = wait_for(lambda: len(registered(queue)) == 2 and registered(queue), timeout=30)
    assert set(ids) == {"gpu-1", "gpu-2"}
    result = CliRunner().invoke(
        cli, ["stop-worker", "gpu-1", "--redis", redis_url, "--prefix", prefix]
    )
    assert result.exit_code == 0, result.output
    wait_for(lambda: set(registered(queue)) == {"gpu-2"}, timeout=30)
    # Its id is free at once: a process of its own may have it.
    alone = start(run, redis_url, prefix, "--id", "gpu-1", lease="1")
    started(alone, "gpu-1")
    # And one holding gpu-2 already makes a supervisor with that id stop (exit 2).
    other = start(run, redis_url, prefix, "--id", "gpu", "--processes", "2", lease="1")
    assert other.wait() == 2, other.output
    assert re.search(r"Error: worker id 'gpu-[12]' is in use by ", other.output), other.output
    assert registered(queue) == {"gpu-1": alone.proc.pid, "gpu-2": ids["gpu-2"]}
    supervisor.send(signal.SIGTERM)
    assert supervisor.wait() == 0, supervisor.output
