"""Schedules from the command line (through click's CliRunner, against a real Redis):
``kue schedules`` lists them, ``kue schedule add`` defines one (upserted by key),
``remove``, ``trigger``, ``pause`` and ``resume`` steer it; bad input and unknown keys are
refused clearly (exit 2), and ``kue doctor --repair`` puts a lost schedule back."""

from __future__ import annotations

import json
import os

import pytest
import redis

from kue_core import Queue
from tests.cli.test_control_cli import kue, refused


@pytest.fixture(autouse=True)
def no_kue_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Settings of the shell running the suite (KUE_PREFIX...) stay out."""
    for name in list(os.environ):
        if name.startswith("KUE_") and not name.startswith("KUE_TEST_"):
            monkeypatch.delenv(name)


def _ok(queue: Queue, redis_url: str, *args: str) -> str:
    result = kue(queue, redis_url, *args)
    assert result.exit_code == 0, result.output
    return result.stdout


def test_add_lists_and_prints_a_schedule(queue: Queue, redis_url: str) -> None:
    assert _ok(queue, redis_url, "schedules") == "no schedules\n"
    out = _ok(
        queue,
        redis_url,
        *("schedule", "add", "mail", "email", "--every", "15m", "--data", '{"to":"a"}'),
        *("--priority", "high", "--attempts", "3", "--limit", "10", "--catch-up", "all"),
    )
    lines = out.splitlines()
    assert lines[0] == "schedule mail: every 900000 ms, type email, active"
    assert lines[1].startswith("  next: ") and lines[1].count("UTC") == 3
    assert lines[2] == "  catch-up: all; limit 10"
    assert lines[3] == '  data: {"to": "a"}; options: {"attempts": 3, "priority": "high"}'
    assert lines[4] == "  runs: 0; last job: -"
    out = _ok(
        queue,
        redis_url,
        *("schedule", "add", "nightly", "report", "--cron", "30 2 * * *", "--tz", "Europe/Paris"),
    )
    assert out.startswith("schedule nightly: cron 30 2 * * * Europe/Paris, type report, active\n")
    assert queue.schedule("mail")["options"] == {"attempts": 3, "priority": "high"}
    table = _ok(queue, redis_url, "schedules").splitlines()
    assert table[0].split() == ["key", "rule", "state", "next", "runs", "last", "job"]
    assert table[1].startswith("mail ") and "every 900000 ms" in table[1]
    assert table[1].split()[-2:] == ["0", "-"] and " active " in table[1]
    assert table[2].startswith("nightly ") and "cron 30 2 * * * Europe/Paris" in table[2]
    assert len(table) == 3
    report = json.loads(_ok(queue, redis_url, "schedules", "--json"))
    assert [s["key"] for s in report] == ["mail", "nightly"]
    assert report[0]["every"] == 900_000 and report[1]["tz"] == "Europe/Paris"


def test_trigger_pause_resume_and_remove(queue: Queue, redis_url: str) -> None:
    queue.every("tick", 60_000, "t", {"n": 1})
    out = _ok(queue, redis_url, "schedule", "trigger", "tick")
    assert out == "made job 1 (t) for schedule tick\n"
    assert queue.get_job(1).data == {"n": 1}
    assert _ok(queue, redis_url, "schedule", "pause", "tick") == "paused schedule tick\n"
    row = _ok(queue, redis_url, "schedules").splitlines()[1]
    assert " paused " in row and row.split()[-2:] == ["1", "(inactive)"] and " - " in row
    assert queue.schedule("tick")["paused"]
    out = _ok(queue, redis_url, "schedule", "resume", "tick")
    assert out.startswith("resumed schedule tick: active, next ") and out.endswith(" UTC\n")
    assert _ok(queue, redis_url, "schedule", "remove", "tick") == "removed schedule tick\n"
    assert queue.schedules() == [] and queue.get_job(1).state == "inactive"


def test_a_unique_key_from_the_cli(queue: Queue, redis_url: str) -> None:
    _ok(queue, redis_url, "schedule", "add", "u", "t", "--every", "1h", "--unique", "one")
    assert queue.schedule("u")["options"] == {"unique": {"key": "one", "mode": "until_done"}}
    assert _ok(queue, redis_url, "schedule", "trigger", "u") == "made job 1 (t) for schedule u\n"
    out = _ok(queue, redis_url, "schedule", "trigger", "u")
    assert out == "job 1 holds the unique key of schedule u: no new job\n"
    out = _ok(queue, redis_url, "schedule", "add", "u", "t", "--every", "1h", "--unique", "one")
    assert "\n  runs: 0 (2 triggered, 1 deduplicated); last job: 1 " in out


def test_an_ended_schedule_is_listed_as_ended(queue: Queue, redis_url: str) -> None:
    queue.every("old", 60_000, "t", end=1)
    row = _ok(queue, redis_url, "schedules").splitlines()[1]
    assert row.split()[:6] == ["old", "every", "60000", "ms", "ended", "-"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("x", "t"), "give one of --every MS and --cron EXPR"),
        (("x", "t", "--every", "1000", "--cron", "* * * * *"), "give one of --every"),
        (("x", "t", "--every", "1000", "--tz", "UTC"), "--tz goes with --cron"),
        (("x", "t", "--cron", "* * * * *", "--offset", "5"), "--offset goes with --every"),
        (("x", "t", "--every", "soon"), "--every: an age is a positive number"),
        (("x", "t", "--every", "1000", "--data", "{nope"), "--data is not JSON"),
        (("x", "t", "--cron", "61 * * * *"), "cron"),
        (("x", "t", "--cron", "* * * * *", "--tz", "Mars/Base"), "Mars/Base"),
        (("x", "t", "--every", "1000", "--priority", "urgent"), "urgent"),
        (("bad key", "t", "--every", "1000"), "a schedule key is 1 to 200 characters"),
    ],
)
def test_bad_definitions_are_refused(
    queue: Queue, redis_url: str, args: tuple[str, ...], message: str
) -> None:
    refused(kue(queue, redis_url, "schedule", "add", *args), 2, message)
    assert queue.schedules() == []


def test_bad_options_are_bad_usage(queue: Queue, redis_url: str) -> None:
    result = kue(queue, redis_url, "schedule", "add", "x", "t", "--every", "1000", "--limit", "0")
    assert result.exit_code == 2 and "--limit" in result.stderr
    result = kue(queue, redis_url, "schedule", "add", "x", "t", "--catch-up", "some")
    assert result.exit_code == 2 and "--catch-up" in result.stderr


@pytest.mark.parametrize("command", ["remove", "trigger", "pause", "resume"])
def test_an_unknown_schedule_is_refused(queue: Queue, redis_url: str, command: str) -> None:
    refused(kue(queue, redis_url, "schedule", command, "nope"), 2, 'schedule "nope" does not exist')


def test_doctor_repair_puts_a_lost_schedule_back(
    queue: Queue, redis_url: str, r: redis.Redis
) -> None:
    _ok(queue, redis_url, "schedule", "add", "s", "t", "--every", "1h")
    r.zrem(queue.keys.schedules, "s")
    result = kue(queue, redis_url, "doctor")
    assert result.exit_code == 1, result.output
    assert result.stdout.startswith("lost-schedule: schedule 's' is neither paused nor ended")
    assert kue(queue, redis_url, "doctor", "--repair").exit_code == 0
    assert r.zscore(queue.keys.schedules, "s") is not None
    assert kue(queue, redis_url, "doctor").exit_code == 0
