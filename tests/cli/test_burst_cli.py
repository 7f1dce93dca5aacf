"""``kue worker --burst``: runs the jobs waiting, then exits 0 by itself, saying why; with
--processes it is refused (one process only)."""

from __future__ import annotations

from kue_core import Queue
from tests.cli.running import Kue


def test_worker_burst_runs_the_waiting_jobs_and_exits_0(
    run: list[Kue], redis_url: str, prefix: str, queue: Queue
) -> None:
    jobs = [queue.create_job("echo", {"n": n}).save() for n in range(4)]
    later = queue.create_job("echo", {"n": 99}).delay(60_000).save()
    kue = Kue(
        "worker", "tests.cli.handlers:echo", "-t", "echo", "-c", "2", "--burst",
        "--redis", redis_url, "--prefix", prefix,
    )  # fmt: skip
    run.append(kue)
    assert kue.wait(timeout=60) == 0, kue.output
    assert [j.refresh().result["twice"] for j in jobs] == [0, 2, 4, 6]
    assert later.refresh().state == "delayed"  # not due: not waited for
    assert "burst: no work left; stopping" in kue.output
    assert queue.workers() == [] and queue.count("active") == 0


def test_burst_runs_one_process(run: list[Kue], redis_url: str, prefix: str) -> None:
    kue = Kue(
        "worker", "tests.cli.handlers:echo", "-t", "echo", "--burst", "-p", "2",
        "--redis", redis_url, "--prefix", prefix,
    )  # fmt: skip
    run.append(kue)
    assert kue.wait(timeout=30) == 2
    assert "--burst runs one worker process" in kue.output


def test_worker_burst_serves_a_module_of_tasks(
    run: list[Kue], redis_url: str, prefix: str, queue: Queue
) -> None:
    from tests.cli import task_module

    added = task_module.add.on(queue).enqueue(2, 3)
    shouted = task_module.shout.on(queue).enqueue("hi")
    kue = Kue(
        "worker", "tests.cli.task_module", "--burst", "--redis", redis_url, "--prefix", prefix
    )
    run.append(kue)
    assert kue.wait(timeout=60) == 0, kue.output
    assert (added.refresh().result, shouted.refresh().result) == (5, "HI")
    assert queue.schedules()  # its cron task's schedule was made, and not waited for
