"""Flow control from the command line (through click's CliRunner, against a real Redis):
``kue limit`` sets and removes a type's limits, ``kue limits`` lists them with what holds a
type back now, ``kue groups`` lists a type's groups in their turn; bad input is bad usage
(exit 2) and writes nothing; ``kue worker --shared --reserve`` runs one pool over several
types; ``kue doctor --repair`` puts a lost group job back."""

from __future__ import annotations

import json
import os
from typing import Any

import pytest
import redis

import kue_cli.cli as cli_module
from kue_core import Queue
from kue_core.base.keys import zid
from kue_core.store import calls
from tests.cli.test_control_cli import kue, refused
from tests.conftest import wait_for


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


# -- kue limit, kue limits ------------------------------------------------------------------
def test_set_list_and_remove_limits(queue: Queue, redis_url: str) -> None:
    assert _ok(queue, redis_url, "limits") == "no limits\n"
    out = _ok(queue, redis_url, "limit", "email", "--rate", "10/1s", "--concurrency", "5")
    assert out == (
        "limits of email: rate 10/1s, concurrency 5, group rate -, group concurrency -\n"
    )
    out = _ok(
        queue, redis_url, "limit", "email", "--group-rate", "5/1m", "--group-concurrency", "2"
    )
    assert out == (
        "limits of email: rate 10/1s, concurrency 5, group rate 5/1m, group concurrency 2\n"
    )
    assert queue.limits()["email"] == {
        "rate": (10, 1000),
        "concurrency": 5,
        "group_rate": (5, 60_000),
        "group_concurrency": 2,
        "held_until": None,
    }
    _ok(queue, redis_url, "limit", "sms", "--rate", "3/250ms")
    table = _ok(queue, redis_url, "limits").splitlines()
    assert table[0].split() == ["type", "rate", "concurrency", "group", "rate", "group",
                                "concurrency", "held"]  # fmt: skip
    assert table[1].split() == ["email", "10/1s", "5", "5/1m", "2", "-"]
    assert table[2].split() == ["sms", "3/250ms", "-", "-", "-", "-"]
    report = json.loads(_ok(queue, redis_url, "limits", "--json"))
    assert report["sms"]["rate"] == [3, 250] and report["sms"]["held"] is None
    assert report["email"]["group_concurrency"] == 2
    out = _ok(queue, redis_url, "limit", "email", "--rate", "none", "--group-rate", "NONE")
    assert out == "limits of email: rate -, concurrency 5, group rate -, group concurrency 2\n"
    assert _ok(queue, redis_url, "limit", "email", "--remove") == "removed the limits of email\n"
    assert list(queue.limits()) == ["sms"]


def test_plain_milliseconds_and_hours(queue: Queue, redis_url: str) -> None:
    _ok(queue, redis_url, "limit", "t", "--rate", "100/1500", "--group-rate", "2/2h")
    assert queue.limits()["t"]["rate"] == (100, 1500)
    assert queue.limits()["t"]["group_rate"] == (2, 7_200_000)
    assert _ok(queue, redis_url, "limits").splitlines()[1].split()[:4] == [
        "t",
        "100/1500ms",
        "-",
        "2/2h",
    ]


def test_limits_show_what_holds_a_type_back(queue: Queue, redis_url: str) -> None:
    queue.limit("capped", concurrency=1)
    queue.create_job("capped").save()
    queue.create_job("capped").save()
    # one active: at the cap
    assert queue.scripts.call(calls.claim(queue.keys, "capped", "kue:test:1", 60_000))
    queue.limit("slow", rate=(1, 3_600_000))
    queue.create_job("slow").save()
    queue.create_job("slow").save()
    # one start: the window is full
    assert queue.scripts.call(calls.claim(queue.keys, "slow", "kue:test:1", 60_000))
    rows = {line.split()[0]: line for line in _ok(queue, redis_url, "limits").splitlines()}
    assert rows["capped"].endswith(" concurrency")
    assert " rate (" in rows["slow"] and rows["slow"].endswith(" ms)")
    report = json.loads(_ok(queue, redis_url, "limits", "--json"))
    assert report["capped"]["held"] == "concurrency"
    assert report["slow"]["held"] == "rate" and 0 < report["slow"]["wait_ms"] <= 3_600_000


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("t",), "give --rate, --concurrency, --group-rate or --group-concurrency"),
        (("t", "--rate", "10"), "a rate is MAX/PERIOD"),
        (("t", "--rate", "10/1d"), "a rate is MAX/PERIOD"),
        (("t", "--rate", "0/1s"), "a rate is MAX/PERIOD"),
        (("t", "--rate", "10/0s"), "a rate is MAX/PERIOD"),
        (("t", "--group-rate", "x/1s"), "--group-rate"),
        (("t", "--concurrency", "0"), "a number of jobs is a whole number >= 1"),
        (("t", "--group-concurrency", "1.5"), "--group-concurrency"),
        (("t", "--concurrency", "2000000000"), "concurrency"),
        (("t", "--rate", "1/31000000000"), "per_ms"),
        (("t", "--remove", "--concurrency", "3"), "--remove goes alone"),
        (("bad\ntype", "--concurrency", "3"), "type must not contain control characters"),
    ],
)
def test_bad_limits_are_refused_and_write_nothing(
    queue: Queue, redis_url: str, r: redis.Redis, args: tuple[str, ...], message: str
) -> None:
    queue.limit("t", concurrency=7)
    refused(kue(queue, redis_url, "limit", *args), 2, message)
    assert queue.limits() == {
        "t": {
            "rate": None,
            "concurrency": 7,
            "group_rate": None,
            "group_concurrency": None,
            "held_until": None,
        }
    }
    assert r.hkeys(queue.keys.limits) == ["t"]


# -- kue groups -----------------------------------------------------------------------------
def test_groups_in_their_turn(queue: Queue, redis_url: str) -> None:
    assert _ok(queue, redis_url, "groups", "mail") == "no groups of mail waiting or running\n"
    for g in ("acme", "acme", "initech", "umbrella corp", None):
        job = queue.create_job("mail")
        if g is not None:
            job.group(g)
        job.save()
    queue.scripts.call(calls.claim(queue.keys, "mail", "kue:test:1", 60_000))
    queue.scripts.call(calls.claim(queue.keys, "mail", "kue:test:1", 60_000))
    turns = queue.groups("mail")
    assert turns["total"] == 3 and sum(g["active"] for g in turns["groups"]) >= 1
    lines = _ok(queue, redis_url, "groups", "mail").splitlines()
    assert lines[0].split() == ["group", "waiting", "active"]
    assert [line.rsplit(maxsplit=2) for line in lines[1:4]] == [
        [g["group"], str(g["waiting"]), str(g["active"])] for g in turns["groups"]
    ]
    assert "umbrella corp" in {g["group"] for g in turns["groups"]}
    assert lines[4] == "groups 1 to 3 of 3"
    page = _ok(queue, redis_url, "groups", "mail", "--from", "1", "--count", "1").splitlines()
    assert page[1].rsplit(maxsplit=2)[0] == turns["groups"][1]["group"]
    assert page[2] == "groups 2 to 2 of 3"
    out = _ok(queue, redis_url, "groups", "mail", "--from", "5")
    assert out == "no groups of mail from 6 (there are 3)\n"
    report = json.loads(_ok(queue, redis_url, "groups", "mail", "--json", "--count", "2"))
    assert report == {"total": 3, "groups": turns["groups"][:2]}


def test_groups_options_out_of_range(queue: Queue, redis_url: str) -> None:
    refused(kue(queue, redis_url, "groups", "mail", "--count", "0"), 2, "--count")
    refused(kue(queue, redis_url, "groups", "mail", "--count", "1001"), 2, "--count")
    refused(kue(queue, redis_url, "groups", "mail", "--from", "-1"), 2, "--from")
    refused(kue(queue, redis_url, "groups", "bad\ntype"), 2, "control characters")


# -- kue worker --shared --reserve ----------------------------------------------------------
@pytest.fixture
def processed(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, ...]]:
    """The ``process`` calls ``kue worker`` makes (no worker starts); the command returns as
    if it got SIGTERM at once."""
    calls: list[tuple[Any, ...]] = []

    class Recording(Queue):
        def process(self, job_type: Any, n: Any = 1, handler: Any = None, **kw: Any) -> Queue:
            calls.append((job_type, n, handler, kw))
            return self

    monkeypatch.setattr(cli_module, "Queue", Recording)
    monkeypatch.setattr(cli_module, "wait_for_signal", lambda *a: "SIGTERM")
    return calls


def test_a_shared_pool_over_several_types(
    processed: list[tuple[Any, ...]], queue: Queue, redis_url: str
) -> None:
    args = ("worker", "json:dumps", "-t", "email", "-t", "sms", "--shared", "-c", "8")
    result = kue(queue, redis_url, *args, "--reserve", "round-robin")
    assert result.exit_code == 0, result.output
    assert [(c[0], c[1], c[3]) for c in processed] == [
        (["email", "sms"], 8, {"isolation": "thread", "reserve": "round-robin"})
    ]
    assert processed[0][2] is json.dumps
    processed.clear()
    assert kue(queue, redis_url, *args).exit_code == 0  # ordered by default
    assert [c[3]["reserve"] for c in processed] == ["ordered"]


def test_without_shared_each_type_has_its_slots(
    processed: list[tuple[Any, ...]], queue: Queue, redis_url: str
) -> None:
    result = kue(queue, redis_url, "worker", "json:dumps", "-t", "email", "-t", "sms", "-n", "3")
    assert result.exit_code == 0, result.output
    assert [(c[0], c[1], c[3]) for c in processed] == [
        ("email", 3, {"isolation": "thread"}),
        ("sms", 3, {"isolation": "thread"}),
    ]


def test_reserve_needs_shared(
    processed: list[tuple[Any, ...]], queue: Queue, redis_url: str
) -> None:
    args = ("worker", "json:dumps", "-t", "email", "-t", "sms")
    refused(
        kue(queue, redis_url, *args, "--reserve", "shuffled"), 2, "--reserve goes with --shared"
    )
    refused(kue(queue, redis_url, *args, "--shared", "--reserve", "random"), 2, "--reserve")
    assert processed == []


def test_a_shared_worker_runs_the_jobs_of_every_type(
    monkeypatch: pytest.MonkeyPatch, queue: Queue, redis_url: str
) -> None:
    jobs = [queue.create_job(t, {"n": n}).save() for n, t in enumerate(["email", "sms"] * 3)]

    def until_done(*args: Any) -> str:
        wait_for(lambda: all(queue.get_job(j.id).state == "complete" for j in jobs), timeout=20)
        return "SIGTERM"

    monkeypatch.setattr(cli_module, "wait_for_signal", until_done)
    args = ("worker", "tests.cli.handlers:echo", "-t", "email", "-t", "sms", "--shared")
    result = kue(queue, redis_url, *args, "--reserve", "round-robin", "-c", "1")
    assert result.exit_code == 0, result.output
    assert [queue.get_job(j.id).result["twice"] for j in jobs] == [0, 2, 4, 6, 8, 10]
    assert queue.workers() == []


# -- kue doctor -----------------------------------------------------------------------------
def test_doctor_repair_puts_a_lost_group_job_back(
    queue: Queue, redis_url: str, r: redis.Redis
) -> None:
    queue.create_job("mail").group("acme").save()
    r.zrem(queue.keys.group("mail", "acme"), zid(1))
    result = kue(queue, redis_url, "doctor")
    assert result.exit_code == 1, result.output
    assert result.stdout.startswith("lost-group-job: job 1 is inactive in group 'acme' (mail)")
    assert kue(queue, redis_url, "doctor", "--repair").exit_code == 0
    assert r.zscore(queue.keys.group("mail", "acme"), zid(1)) == 0
    assert kue(queue, redis_url, "doctor").exit_code == 0
