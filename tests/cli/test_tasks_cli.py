"""``kue worker MODULE``: a worker serving the typed tasks a module defines, each with its
concurrency, schedules made; ``kue worker --list MODULE`` shows them."""

from __future__ import annotations

import os

import pytest

from kue_cli.worker import serving
from kue_core import Queue
from tests.cli import task_module
from tests.cli.running import Kue
from tests.conftest import wait_for

pytestmark = pytest.mark.timeout(120)


def test_list_shows_the_tasks_of_a_module() -> None:
    kue = Kue("worker", "--list", "tests.cli.task_module")
    assert kue.proc.wait(60) == 0, kue.output
    wait_for(lambda: len(kue.out) >= 3)
    assert kue.out == [
        'add: tests.cli.task_module.add, concurrency 2, isolation thread, {"priority": "high"}',
        "nightly: tests.cli.task_module.nightly, concurrency 1, isolation thread, "
        "schedule 0 3 * * * Europe/Paris",
        "shout: tests.cli.task_module.shout, concurrency 1, isolation thread",
    ]


def test_a_worker_serves_every_task_of_a_module(
    run: list[Kue], redis_url: str, prefix: str, queue: Queue
) -> None:
    kue = Kue("worker", "tests.cli.task_module", "--redis", redis_url, "--prefix", prefix)
    run.append(kue)
    kue.wait_for_line(r"worker pid \d+, id .*: serving add x2, shout x1, nightly x1 on ")
    added = task_module.add.on(queue).enqueue(2, b=3)
    shouted = task_module.shout.on(queue).enqueue("hi")
    assert added.wait(30) == 5 and shouted.wait(30) == "HI"
    pid = int(queue.get_log(added.id)[0].split()[1])  # type: ignore[arg-type]
    assert pid != os.getpid()
    # Registered with its first task's slots, then with the others at the next heartbeat.
    every = {"add": 2, "shout": 1, "nightly": 1}
    wait_for(lambda: [w["types"] for w in queue.workers()] == [every])
    (schedule,) = queue.schedules()
    assert (schedule["key"], schedule["cron"], schedule["data"]) == (
        "nightly",
        "0 3 * * *",
        {"kind": "full"},
    )


def test_a_worker_serves_the_tasks_asked_for_with_the_concurrency_given(
    run: list[Kue], redis_url: str, prefix: str, queue: Queue
) -> None:
    argv = ["worker", "tests.cli.task_module", "-t", "add", "-n", "3"]
    kue = Kue(*argv, "--redis", redis_url, "--prefix", prefix)
    run.append(kue)
    kue.wait_for_line(r"worker pid \d+, id .*: serving add x3 on ")
    (worker,) = wait_for(queue.workers)
    assert worker["types"] == {"add": 3}
    assert queue.schedules() == []


def test_a_worker_serves_one_task_named_as_module_colon_task(
    run: list[Kue], redis_url: str, prefix: str, queue: Queue
) -> None:
    kue = Kue("worker", "tests.cli.task_module:shout", "--redis", redis_url, "--prefix", prefix)
    run.append(kue)
    kue.wait_for_line(r"worker pid \d+, id .*: serving shout x1 on ")
    (worker,) = wait_for(queue.workers)
    assert worker["types"] == {"shout": 1}
    assert task_module.shout.on(queue).enqueue("hi").wait(30) == "HI"
    added = task_module.add.on(queue).enqueue(1)
    assert queue.get_job(added.id).state == "inactive"  # type: ignore[union-attr]  # not its task
    assert queue.schedules() == []


def test_a_task_named_alone_is_listed_and_takes_its_own_type_only(
    run: list[Kue], redis_url: str, prefix: str, queue: Queue
) -> None:
    listed = Kue("worker", "--list", "tests.cli.task_module:nightly")
    assert listed.proc.wait(60) == 0, listed.output
    wait_for(lambda: listed.out)
    assert listed.out == [
        "nightly: tests.cli.task_module.nightly, concurrency 1, isolation thread, "
        "schedule 0 3 * * * Europe/Paris"
    ]
    argv = ["worker", "tests.cli.task_module:add", "-t", "add", "-n", "4", "--processes", "2"]
    kue = Kue(*argv, "--redis", redis_url, "--prefix", prefix)
    run.append(kue)
    workers = wait_for(lambda: len(w := queue.workers()) == 2 and w, timeout=60)
    assert [w["types"] for w in workers] == [{"add": 4}, {"add": 4}]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["tests.cli.task_module:add", "-t", "shout"],
            "tests.cli.task_module:add is the task of type 'add': it serves no 'shout'",
        ),
        (["tests.cli.task_module:add", "--shared"], "--shared is for a MODULE:FUNC"),
        (["tests.cli.task_module", "-t", "nope"], "has no task of type 'nope'; it has: add, "),
        (["tests.cli.task_module", "--isolation", "process"], "--isolation is for a MODULE:FUNC"),
        (["tests.cli.task_module", "--shared"], "--shared is for a MODULE:FUNC"),
        (["tests.cli.handlers"], "tests.cli.handlers defines no task"),
        (["tests.cli.handlers:echo", "--list"], "--list lists the tasks of a MODULE"),
        (["tests.cli.handlers:echo"], "give the job types to process with --type"),
    ],
)
def test_a_wrong_tasks_command_exits_2_saying_why(args: list[str], message: str) -> None:
    kue = Kue("worker", *args, "--redis", "redis://127.0.0.1:1/0")
    assert kue.proc.wait(60) == 2
    wait_for(lambda: message in kue.output)


def test_several_processes_serve_a_modules_tasks(
    run: list[Kue], redis_url: str, prefix: str, queue: Queue
) -> None:
    argv = ["worker", "tests.cli.task_module", "-t", "add", "--processes", "2"]
    kue = Kue(*argv, "--redis", redis_url, "--prefix", prefix)
    run.append(kue)
    workers = wait_for(lambda: len(w := queue.workers()) == 2 and w, timeout=60)
    assert [w["types"] for w in workers] == [{"add": 2}, {"add": 2}]
    jobs = task_module.add.on(queue).enqueue_many([(n,) for n in range(6)])
    assert [j.wait(30) for j in jobs] == list(range(6))


def test_the_start_line_says_what_is_served_and_how() -> None:
    tasks = {"add": task_module.add, "shout": task_module.shout}
    assert serving(("add", "shout"), 0, tasks, False, None, "thread") == "add x2, shout x1"
    assert serving(("add", "shout"), 5, tasks, False, None, "thread") == "add x5, shout x5"
    handler = serving(("email", "sms"), 3, None, False, None, "process")
    assert handler == "email x3 (process), sms x3 (process)"
    shared = serving(("email", "sms"), 4, None, True, "round-robin", "thread")
    assert shared == "email, sms x4 shared (round-robin)"
    assert serving(("a",), 1, None, True, None, "process") == "a x1 shared (ordered, process)"
