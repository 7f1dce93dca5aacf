"""``process(..., isolation="process")``: handlers in child processes, killed past their ttl."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from kue_core import InvalidJob, Queue
from tests.conftest import wait_for
from tests.integration import isolated_handlers as handlers


@pytest.fixture
def wq(redis_url: str, prefix: str) -> Iterator[Queue]:
    # A lease no load outlasts: these tests count attempts, log lines and children, none is
    # about recovery, and a process held up past a short lease (two cores, under coverage,
    # children starting) rightly has its jobs run again.
    q = Queue(redis_url, prefix=prefix, lease_ms=30_000)
    yield q
    q.close()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _child_pid(queue: Queue, job_id: int) -> int:
    """The pid a handler logged as its first line ("child <pid>")."""
    line = wait_for(lambda: queue.get_log(job_id), timeout=20)[0]
    return int(line.split()[1])


def _finished(queue: Queue, job_id: int, state: str, timeout: float = 20) -> dict:  # type: ignore[type-arg]
    return wait_for(
        lambda: (d := queue.get_job(job_id).to_dict())["state"] == state and d, timeout=timeout
    )


def test_handler_runs_in_a_child_with_progress_log_and_result(wq: Queue) -> None:
    jobs = [wq.create_job("calc", {"n": n}).save() for n in range(4)]
    wq.process("calc", 2, handlers.double, isolation="process")
    done = [_finished(wq, j.id, "complete") for j in jobs]  # type: ignore[arg-type]
    assert [d["result"]["n"] for d in done] == [0, 2, 4, 6]
    pids = {d["result"]["pid"] for d in done}
    assert os.getpid() not in pids and 1 <= len(pids) <= 2  # one child per slot, reused
    assert all(d["progress"] == 100 for d in done)
    assert wq.get_log(jobs[0].id) == [f"child {done[0]['result']['pid']}"]  # type: ignore[arg-type]


def test_async_handler_in_a_child(wq: Queue) -> None:
    job = wq.create_job("calc", {"n": 21}).save()
    wq.process("calc", 1, handlers.async_double, isolation="process")
    done = _finished(wq, job.id, "complete")  # type: ignore[arg-type]
    assert done["result"]["n"] == 42 and done["result"]["pid"] != os.getpid()


def test_ttl_kills_the_child_and_the_slot_goes_on(wq: Queue) -> None:
    slow = wq.create_job("slow", {}).ttl(500).save()
    wq.process("slow", 1, handlers.hang, isolation="process")
    pid = _child_pid(wq, slow.id)  # type: ignore[arg-type]
    failed = _finished(wq, slow.id, "failed")  # type: ignore[arg-type]
    assert failed["error"].startswith("TTL exceeded")
    wait_for(lambda: not _alive(pid), timeout=10)
    # The same slot takes the next job in a new child.
    nxt = wq.create_job("slow", {}).ttl(500).save()
    assert _child_pid(wq, nxt.id) != pid  # type: ignore[arg-type]


@pytest.mark.slow
def test_a_child_that_dies_fails_the_attempt_and_is_replaced(wq: Queue) -> None:
    doomed = wq.create_job("crash", {}).attempts(2).save()
    wq.process("crash", 1, handlers.crash, isolation="process")
    failed = _finished(wq, doomed.id, "failed")  # type: ignore[arg-type]
    assert failed["attempts"]["made"] == 2
    assert "exit code 3" in failed["error"]
    history = wq.history(doomed.id)  # type: ignore[arg-type]
    assert [h["state"] for h in history if h["state"] == "active"] == ["active", "active"]
    pids = [int(line.split()[1]) for line in wq.get_log(doomed.id)]  # type: ignore[arg-type]
    assert len(set(pids)) == 2  # each attempt had a fresh child


def test_errors_keep_the_handlers_traceback_and_no_retry(wq: Queue) -> None:
    bad = wq.create_job("bad", {"n": 7}).attempts(3).save()
    refused = wq.create_job("refuse", {}).attempts(3).save()
    odd = wq.create_job("odd", {}).save()
    wq.process("bad", 1, handlers.explode_in_handler, isolation="process")
    wq.process("refuse", 1, handlers.refuse, isolation="process")
    wq.process("odd", 1, handlers.unserialisable, isolation="process")
    failed = _finished(wq, bad.id, "failed")  # type: ignore[arg-type]
    assert failed["error"].startswith("ValueError: bad input 7\n")
    assert "explode_in_handler" in failed["error"] and "isolation.py" not in failed["error"]
    assert failed["attempts"]["made"] == 3
    gave_up = _finished(wq, refused.id, "failed")  # type: ignore[arg-type]
    assert gave_up["attempts"]["made"] == 1 and "not worth retrying" in gave_up["error"]
    not_json = _finished(wq, odd.id, "failed")  # type: ignore[arg-type]
    assert "result" in not_json["error"] and "JSON" in not_json["error"]


def test_shutdown_kills_a_running_child_and_gives_the_job_back(wq: Queue) -> None:
    job = wq.create_job("slow", {}).save()
    wq.process("slow", 1, handlers.hang, isolation="process")
    pid = _child_pid(wq, job.id)  # type: ignore[arg-type]
    wq.shutdown(timeout=0.2)
    back = wq.get_job(job.id).to_dict()  # type: ignore[arg-type]
    assert back["state"] == "inactive" and back["attempts"]["made"] == 0
    wait_for(lambda: not _alive(pid), timeout=10)


def test_unknown_isolation_is_refused(wq: Queue) -> None:
    with pytest.raises(InvalidJob, match="isolation"):
        wq.process("calc", 1, handlers.double, isolation="fork")
    assert wq.workers() == []


def test_a_handler_a_child_cannot_import_is_refused(wq: Queue) -> None:
    with pytest.raises(InvalidJob, match="importable"):
        wq.process("calc", 1, lambda job: None, isolation="process")
