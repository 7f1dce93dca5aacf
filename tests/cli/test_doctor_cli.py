"""``kue doctor`` through click's CliRunner against the test Redis: one line per finding and a
summary, JSON, ``--repair``, ``--stuck-after``, and the exit codes (0 healthy or all repaired,
1 problems left, 2 bad usage, 3 Redis unavailable)."""

from __future__ import annotations

import json
import os
from collections.abc import Callable

import pytest
import redis
from click.testing import CliRunner, Result

from kue_cli import doctor as doctor_cli
from kue_cli.cli import cli
from kue_core import Queue
from kue_core.base.keys import zid
from tests.conftest import free_port
from tests.integration.test_doctor import dump, kue_job, kue_state, now_ms


@pytest.fixture(autouse=True)
def no_kue_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("KUE_") and not name.startswith("KUE_TEST_"):
            monkeypatch.delenv(name)


Doctor = Callable[..., Result]


@pytest.fixture
def doctor(redis_url: str, prefix: str) -> Doctor:
    """``doctor(*args)``: runs ``kue doctor *args`` on the test's queue."""

    def run(*args: str) -> Result:
        return CliRunner().invoke(cli, ["doctor", *args, "--redis", redis_url, "--prefix", prefix])

    return run


@pytest.fixture
def broken(queue: Queue, r: redis.Redis) -> Queue:
    """Two jobs of which one lost its wake-up token, and a member without a job."""
    queue.create_job("email").save()
    queue.create_job("email").save()
    r.lpop(queue.keys.tokens("email"))
    r.zadd(queue.keys.jobs, {zid(9): 0})
    return queue


def test_a_healthy_queue(queue: Queue, doctor: Doctor) -> None:
    queue.create_job("email").save()
    queue.create_job("video").save().set_state("complete")
    result = doctor()
    assert result.exit_code == 0, result.output
    assert result.stdout == ("healthy: checked 2 jobs, 5 index sets (6 members), 2 job types\n")


def test_problems_one_line_each_then_a_summary(
    broken: Queue, r: redis.Redis, doctor: Doctor
) -> None:
    before = dump(r, broken.prefix)
    result = doctor()
    assert result.exit_code == 1, result.output
    k = broken.keys
    assert result.stdout.splitlines() == [
        f"orphan-member: {k.jobs} holds job 9, which does not exist; "
        "repair: remove it from the set",
        f"missing-tokens: {k.tokens('email')} holds 1 wake-up token for 2 inactive jobs of type "
        "'email': Kue's workers would leave 1 of them waiting; repair: push 1 token",
        "2 problems (1 missing-tokens, 1 orphan-member) in 2 jobs, 3 index sets (7 members), "
        "1 job type; kue doctor --repair fixes them",
    ]
    assert result.stderr == ""
    assert dump(r, broken.prefix) == before


def test_json(broken: Queue, doctor: Doctor) -> None:
    result = doctor("--json")
    assert result.exit_code == 1, result.output
    report = json.loads(result.stdout)
    assert report["healthy"] is False
    assert report["checked"] == {"jobs": 2, "sets": 3, "members": 7, "types": 1}
    assert report["problems"] == {"orphan-member": 1, "missing-tokens": 1}
    assert report["findings"][0] == {
        "kind": "orphan-member",
        "key": broken.keys.jobs,
        "job_id": 9,
        "problem": f"{broken.keys.jobs} holds job 9, which does not exist",
        "repair": "remove it from the set",
        "repairable": True,
    }
    assert "repair" not in report


def test_repair_then_healthy(broken: Queue, r: redis.Redis, doctor: Doctor) -> None:
    result = doctor("--repair")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].endswith("; repaired: remove it from the set")
    assert lines[1].endswith("; repaired: push 1 token")
    assert lines[2] == (
        "repaired 2 of 2 problems; 0 with nothing left to do; 0 need a person; "
        "run kue doctor again to confirm"
    )
    assert r.llen(broken.keys.tokens("email")) == 2 and r.zcard(broken.keys.jobs) == 2
    again = doctor()
    assert again.exit_code == 0 and again.stdout.startswith("healthy: checked 2 jobs")


def test_repair_json(broken: Queue, doctor: Doctor) -> None:
    result = doctor("--repair", "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert [f["outcome"] for f in report["findings"]] == ["repaired", "repaired"]
    assert report["repair"] == {"repaired": 2, "unchanged": 0, "manual": 0}


def test_what_repair_cannot_fix_exits_1(queue: Queue, r: redis.Redis, doctor: Doctor) -> None:
    old = now_ms(r) - 600_000
    r.hset(queue.keys.job(4), mapping={"data": "{}", "updated_at": old})
    r.set(queue.keys.ids, 4)
    check = doctor()
    assert check.exit_code == 1
    assert check.stdout.splitlines()[-1] == (
        "1 problem (1 no-type) in 1 job, 0 index sets (0 members), 0 job types; 1 need a person"
    )
    result = doctor("--repair")
    assert result.exit_code == 1, result.output
    assert result.stdout.splitlines() == [
        f"no-type: {queue.keys.job(4)} has no type, with data; by hand: give it its type "
        f"(HSET {queue.keys.job(4)} type <type>) or delete it",
        "repaired 0 of 1 problem; 0 with nothing left to do; 1 need a person; "
        "run kue doctor again to confirm",
    ]
    assert r.hgetall(queue.keys.job(4))["data"] == "{}"


def test_stuck_after(queue: Queue, r: redis.Redis, doctor: Doctor) -> None:
    """A Kue worker's job (no lease) unchanged for 10 minutes is stuck only with a shorter
    --stuck-after than the default hour."""
    k = queue.keys
    kue_job(r, k, 1, "email", "inactive")
    kue_state(r, k, 1, None, "active")
    r.hset(k.job(1), "updated_at", now_ms(r) - 600_000)
    assert doctor().exit_code == 0
    result = doctor("--stuck-after", "60")
    assert result.exit_code == 1, result.output
    assert result.stdout.startswith(
        "stuck-active: job 1 (email) is active but it has no lease (a Kue worker's job) and no "
        "update for 10 min, more than 60 s: its worker is gone; "
        "repair: requeue it (inactive), as lease recovery does\n"
    )
    assert doctor("--stuck-after", "60", "--repair").exit_code == 0
    assert queue.get_job(1).state == "inactive"


@pytest.mark.parametrize("value", ["-1", "soon"])
def test_bad_stuck_after_is_bad_usage(value: str, doctor: Doctor) -> None:
    result = doctor("--stuck-after", value)
    assert result.exit_code == 2
    assert "--stuck-after" in result.stderr


def test_unreachable_redis_is_unavailable() -> None:
    url = f"redis://127.0.0.1:{free_port()}/0"
    result = CliRunner().invoke(cli, ["doctor", "--redis", url])
    assert result.exit_code == 3
    assert "cannot reach Redis" in result.stderr


def test_redis_lost_during_the_check_is_unavailable(
    monkeypatch: pytest.MonkeyPatch, doctor: Doctor
) -> None:
    def lost(*args: object, **kwargs: object) -> None:
        raise redis.ConnectionError("Connection reset by peer")

    monkeypatch.setattr(doctor_cli.doctor, "check", lost)
    result = doctor()
    assert result.exit_code == 3
    assert result.stderr == "Error: Redis stopped answering: Connection reset by peer\n"


def test_help_gives_the_exit_codes() -> None:
    result = CliRunner().invoke(cli, ["doctor", "--help"])
    assert result.exit_code == 0
    assert "Read-only and safe beside running workers" in result.stdout
    assert "1  problems found and not repaired; with --repair, some need a person" in (
        result.stdout
    )
    assert "doctor" in CliRunner().invoke(cli, ["--help"]).stdout
