"""Dependencies from the command line (through click's CliRunner, against a real Redis):
``kue stats`` counts blocked jobs, ``kue deps`` shows a job's dependencies and dependents,
``kue remove`` refuses a job others wait for unless ``--cascade``, and ``kue doctor --repair``
releases a blocked job that waits for nothing."""

from __future__ import annotations

import json
import os

import pytest
import redis
from click.testing import CliRunner, Result

from kue_cli.cli import cli
from kue_core import Queue
from kue_core.base.states import STATES
from tests.conftest import finish


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
def chain(queue: Queue) -> Queue:
    """Job 1 (a) complete; 2 (a) inactive; 3 (c) blocked on 1 and 2; 4 (d) blocked on 3,
    failing with it."""
    queue.create_job("a").save()
    queue.create_job("a").save()
    finish(queue, "a", True)
    queue.create_job("c").depends_on(1, 2).save()
    queue.create_job("d").depends_on(3).on_dependency_failure("fail").save()
    return queue


def test_stats_counts_blocked_jobs(chain: Queue, redis_url: str) -> None:
    result = kue(chain, redis_url, "stats")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    # (the suspended jobs' column only while there are some)
    assert lines[0].split() == ["type", *(s for s in STATES if s != "suspended")]
    rows = {line.split()[0]: line.split()[1:] for line in lines[1:5]}
    blocked = STATES.index("blocked")
    assert {t: int(rows[t][blocked]) for t in ("a", "c", "d", "total")} == {
        "a": 0,
        "c": 1,
        "d": 1,
        "total": 2,
    }
    assert all(len(word) <= 9 for word in lines[0].split()[1:])  # the columns stay apart
    report = json.loads(kue(chain, redis_url, "stats", "--json").stdout)
    assert report["total"]["blocked"] == 2 and report["types"]["c"]["blocked"] == 1


def test_deps_shows_both_sides(chain: Queue, redis_url: str) -> None:
    result = kue(chain, redis_url, "deps", "3")
    assert result.exit_code == 0, result.output
    assert result.stdout == (
        "job 3 (c) is blocked\n"
        "depends on (if one fails for good: wait):\n"
        "         1  complete  done\n"
        "         2  inactive  waited for\n"
        "jobs that depend on it:\n"
        "         4  blocked\n"
    )
    leaf = kue(chain, redis_url, "deps", "2").stdout
    assert leaf.startswith("job 2 (a) is inactive\ndepends on no job\njobs that depend on it:\n")
    report = json.loads(kue(chain, redis_url, "deps", "4", "--json").stdout)
    assert report == {
        "id": 4,
        "type": "d",
        "state": "blocked",
        "onDependencyFailure": "fail",
        "blockedBy": None,
        "dependencies": [{"id": 3, "state": "blocked", "done": False}],
        "dependents": [],
    }


def test_deps_of_an_unknown_job(queue: Queue, redis_url: str) -> None:
    refused(kue(queue, redis_url, "deps", "99"), 2, 'job "99" doesnt exist')
    refused(kue(queue, redis_url, "deps", "x"), 2, "a job id must be an integer")


def test_remove_refuses_a_job_others_wait_for_unless_cascade(chain: Queue, redis_url: str) -> None:
    refused(kue(chain, redis_url, "remove", "2"), 1, "jobs 3 are waiting for it (--cascade")
    assert chain.get_job(2).state == "inactive"
    result = kue(chain, redis_url, "remove", "2", "--cascade")
    assert result.exit_code == 0, result.output
    assert result.stdout == "removed jobs 2, 3, 4\n"
    assert kue(chain, redis_url, "remove", "1").stdout == "removed job 1\n"
    refused(kue(chain, redis_url, "remove", "1"), 2, 'job "1" doesnt exist')
    assert chain.counts()["blocked"] == 0


def test_doctor_repair_releases_a_job_that_waits_for_nothing(
    chain: Queue, redis_url: str, r: redis.Redis
) -> None:
    r.zadd(chain.keys.deps(3), {"2": 1}, xx=True)
    result = kue(chain, redis_url, "doctor")
    assert result.exit_code == 1, result.output
    assert result.stdout.startswith("stuck-blocked: job 3 is blocked but waits for no job")
    result = kue(chain, redis_url, "doctor", "--repair")
    assert result.exit_code == 0, result.output
    assert chain.get_job(3).state == "inactive"
    assert kue(chain, redis_url, "doctor").exit_code == 0


def test_flow_shows_the_whole_flow_as_a_tree(queue: Queue, redis_url: str) -> None:
    report = queue.create_job("report")
    a, b = queue.create_job("fetch"), queue.create_job("fetch")
    p1, p2 = queue.create_job("page"), queue.create_job("page")
    queue.flow(report, [a, (b, [p1, p2])])
    finish(queue, "page", True)  # the first page completes
    result = kue(queue, redis_url, "flow", str(p2.id))
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0] == f" {report.id} report blocked"
    assert lines[1] == f" ├─ {a.id} fetch inactive"
    assert lines[2] == f" └─ {b.id} fetch blocked"
    # Under a job, those it still waits for first.
    assert lines[3] == f"*   ├─ {p2.id} page inactive"
    assert lines[4].startswith(f"    └─ {p1.id} page complete ") and lines[4].endswith(" ms")
    as_json = json.loads(kue(queue, redis_url, "flow", str(a.id), "--json").output)
    assert as_json["root"] == report.id and len(as_json["nodes"]) == 5
    short = kue(queue, redis_url, "flow", str(report.id), "--limit", "2").output.splitlines()
    assert short == [
        f"*{report.id} report blocked",
        f" ├─ {a.id} fetch inactive",
        f" └─ … 1 more (kue flow {report.id} --start {report.id} --offset 1)",
    ]
    rest = kue(queue, redis_url, "flow", str(report.id), "--start", str(report.id), "--offset", "1")
    assert rest.output.splitlines()[:2] == [
        f"*{report.id} report blocked",
        f" └─ {b.id} fetch blocked",
    ]
    refused(kue(queue, redis_url, "flow", "999999999"), 2, "999999999")
