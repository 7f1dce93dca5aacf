"""Worker ids in one process: a live id is refused at start and is free once its holder
stops; a holder known dead is taken over; a process whose id was taken over shuts down and
leaves the new holder's registration alone; a made-up id works whatever the host name."""

from __future__ import annotations

import json
import logging
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis

from kue_core import Job, Queue, WorkerIdTaken
from kue_core.store import calls
from tests.conftest import keys_under, wait_for

LEASE = 300  # ms: a heartbeat every 0.1 s


@pytest.fixture
def queues(redis_url: str, prefix: str) -> Iterator[Callable[..., Queue]]:
    """Makes queues on the test's prefix with short leases (unless told); closes them at the
    end."""
    made: list[Queue] = []

    def make(**options: Any) -> Queue:
        queue = Queue(redis_url, prefix=prefix, **{"lease_ms": LEASE, **options})
        made.append(queue)
        return queue

    yield make
    for queue in made:
        queue.close()


def instance(queue: Queue) -> str:
    """The instance of the queue's workers in this process."""
    return queue._worker_side().state.instance


def holder(r: redis.Redis, queue: Queue) -> str | None:
    """The instance registered under the queue's worker id, if any."""
    return r.hget(queue.keys.worker(queue.worker_id), "instance")  # type: ignore[return-value]


def register_as(queue: Queue, who: dict[str, Any], lease_ms: int = 60_000) -> None:
    """Register another process under ``queue.worker_id``, just now, as that process would."""
    info = json.dumps({"id": queue.worker_id, **who})
    queue.scripts.call(
        calls.heartbeat(
            queue.keys, queue.worker_id, lease_ms, info, [], instance="other", mode="force"
        )
    )


def a_dead_pid() -> int:
    """The pid of a process that has exited and been reaped."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_a_live_worker_id_is_refused_until_its_holder_stops(
    queues: Callable[..., Queue], r: redis.Redis, prefix: str
) -> None:
    # Leases no load outlasts: a holder held up past a short one (two cores, under coverage)
    # is rightly taken for gone, and its id taken over.
    first = queues(worker_id="w1", lease_ms=30_000)
    second = queues(worker_id="w1", lease_ms=30_000)
    ran: list[tuple[str, int]] = []
    first.process("t", lambda job: ran.append(("first", job.id)))
    assert holder(r, first) == instance(first)  # registered by process() itself, with its types
    assert [(w["id"], w["types"]) for w in first.workers()] == [("w1", {"t": 1})]
    before = keys_under(r, prefix)

    with pytest.raises(WorkerIdTaken) as refused:
        second.process("t", lambda job: ran.append(("second", job.id)))
    host = f"{socket.gethostname()}:{os.getpid()}"
    assert str(refused.value).startswith(f"worker id 'w1' is in use by {host} (last heartbeat ")
    assert str(refused.value).endswith(
        " s ago); it is free once that process stops, or 30 s after its last heartbeat"
    )
    assert 0 <= refused.value.ago_ms < 5_000
    # Nothing written: the first process's registration, and no slot or thread started.
    assert holder(r, first) == instance(first) and keys_under(r, prefix) == before
    assert [w["id"] for w in first.workers()] == ["w1"]
    workers = second._worker_side()
    assert not workers.state.slots and not workers.closing.started
    job = first.create_job("t").save()
    wait_for(lambda: ran == [("first", job.id)])

    first.shutdown()
    assert holder(r, first) is None  # free at once, not a lease later
    second.process("t", lambda job: ran.append(("second", job.id)))
    assert holder(r, second) == instance(second) != instance(first)
    again = second.create_job("t").save()
    wait_for(lambda: ran == [("first", job.id), ("second", again.id)])
    [info] = second.workers()
    assert (info["id"], info["types"]) == ("w1", {"t": 1})


@pytest.mark.parametrize(
    ("where", "taken_over"),
    [
        ("this host, a pid with no process", True),
        ("this host, this process's pid (an earlier run in a container)", True),
        ("this host, a live process", False),
        ("another host", False),
    ],
)
def test_a_holder_dead_for_sure_is_taken_over_at_start(
    queues: Callable[..., Queue],
    r: redis.Redis,
    caplog: pytest.LogCaptureFixture,
    where: str,
    taken_over: bool,
) -> None:
    queue = queues(worker_id="gpu-1")
    here = socket.gethostname()
    who = {
        "this host, a pid with no process": {"host": here, "pid": a_dead_pid()},
        "this host, this process's pid (an earlier run in a container)": {
            "host": here,
            "pid": os.getpid(),
        },
        "this host, a live process": {"host": here, "pid": os.getppid()},
        "another host": {"host": "elsewhere", "pid": a_dead_pid()},
    }[where]
    register_as(queue, who)
    name = f"{who['host']}:{who['pid']}"
    if not taken_over:
        with pytest.raises(WorkerIdTaken, match=f"in use by {name} .*, or 60 s after its"):
            queue.process("t", lambda job: None)
        assert holder(r, queue) == "other"
        return
    with caplog.at_level(logging.WARNING, "kue_core.worker"):
        queue.process("t", lambda job: None)
    assert holder(r, queue) == instance(queue)
    assert f"worker id 'gpu-1': its holder, {name} (last heartbeat" in caplog.text
    assert "taking the id over" in caplog.text
    [info] = queue.workers()
    assert (info["id"], info["pid"], info["types"]) == ("gpu-1", os.getpid(), {"t": 1})


def test_a_worker_whose_id_was_taken_over_shuts_down_and_leaves_it_alone(
    queues: Callable[..., Queue], r: redis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    queue = queues(worker_id="w1")
    started, release = threading.Event(), threading.Event()
    queue.process("t", lambda job: started.set() or release.wait(10))
    job = queue.create_job("t").save()
    # Its handler runs: a job is active from its claim, and one whose handler has not begun
    # when the process stops at once (its slot held up under load) is not given back.
    assert started.wait(15)
    try:
        with caplog.at_level(logging.ERROR, "kue_core.worker"):
            # As a process does that starts while this one is silent past its lease.
            register_as(queue, {"host": "elsewhere", "pid": 4242})
            wait_for(queue.stopped_remotely.is_set, timeout=5)
        assert (
            "worker id 'w1' was taken over by elsewhere:4242 while this process was silent "
            "past its lease" in caplog.text
        )
        assert holder(r, queue) == "other"  # its shutdown did not remove the new registration
        [info] = queue.workers()
        assert (info["host"], info["pid"]) == ("elsewhere", 4242)
        back = queue.get_job(job.id)  # type: ignore[arg-type]
        assert (back.state, back.attempts_made) == ("inactive", 0)  # given back at once
    finally:
        release.set()


def test_a_made_up_worker_id_works_whatever_the_host_name(
    queues: Callable[..., Queue], r: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("socket.gethostname", lambda: "my host_name/ü")
    queue = queues()
    assert queue.worker_id.startswith(f"my host_name/ü:{os.getpid()}:")
    done: list[int] = []

    def handler(job: Job) -> None:
        done.append(job.id)  # type: ignore[arg-type]

    queue.process("t", handler)
    job = queue.create_job("t").save()
    wait_for(lambda: done == [job.id])
    [info] = queue.workers()
    assert (info["id"], info["host"]) == (queue.worker_id, "my host_name/ü")
    queue.shutdown()
    assert holder(r, queue) is None and queue.workers() == []
