"""``kue job list STATE``: the jobs of a state in the order the dashboard shows them first
(finished newest first, delayed soonest due, the others as workers take them), in columns or
as JSON, a page at a time, of one type; an unknown state or type exits 2. And ``kue job
create --delay`` with a bare number: milliseconds, as every age the commands take."""

from __future__ import annotations

import json
import re
import time

import pytest

from kue_core import Queue
from tests.cli.test_control_cli import kue, no_kue_env, refused  # noqa: F401
from tests.conftest import finish, wait_for

pytestmark = pytest.mark.timeout(120)


def _ids(stdout: str) -> list[int]:
    """The ids of a listing's rows (under its header)."""
    return [int(line.split()[0]) for line in stdout.splitlines()[1:]]


def _next_ms() -> None:
    """Return once the clock has moved on a few milliseconds (finish times then differ)."""
    start = time.time()
    wait_for(lambda: time.time() - start > 0.005, timeout=5)


def test_finished_jobs_come_newest_first(queue: Queue, redis_url: str) -> None:
    a = queue.create_job("email", {"title": "Welcome\nAda"}).priority("low").save()
    b = queue.create_job("email", {"to": "bob@example.com", "body": "x" * 200}).save()
    c = queue.create_job("sms", {"n": 1}).save()
    # Finished in the order b, a (by priority): the newest first is a, then b.
    assert finish(queue, "email", ok=False) == b.id
    _next_ms()
    assert finish(queue, "email", ok=False) == a.id
    listed = kue(queue, redis_url, "job", "list", "failed")
    assert listed.exit_code == 0, listed.output
    head, first, second = listed.stdout.splitlines()
    assert head.split("  ")[-1] == "TITLE OR DATA"
    assert head.split()[:6] == ["ID", "TYPE", "STATE", "PRIORITY", "CREATED", "UPDATED"]
    assert first.split()[:4] == [str(a.id), "email", "failed", "low"]
    assert first.endswith("  Welcome Ada")  # the title, on one line
    assert " ago " in first and first.index("Welcome") == head.index("TITLE")
    assert second.split()[:4] == [str(b.id), "email", "failed", "normal"]
    data = '{"to":"bob@example.com","body":"'
    assert second.endswith("  " + data + "x" * (59 - len(data)) + "…")  # 60 characters of it
    assert listed.stderr.endswith("2 shown of 2 failed jobs\n")
    backwards = kue(queue, redis_url, "job", "list", "failed", "--reverse")
    assert _ids(backwards.stdout) == [b.id, a.id]
    page = kue(queue, redis_url, "job", "list", "failed", "-n", "1", "--offset", "1")
    assert _ids(page.stdout) == [b.id] and page.stderr.endswith("1 shown of 2 failed jobs\n")
    waiting = kue(queue, redis_url, "job", "list", "inactive").stdout.splitlines()
    assert waiting[1].split()[:3] == [str(c.id), "sms", "inactive"] and len(waiting) == 2


def test_waiting_jobs_in_the_order_workers_take_them(queue: Queue, redis_url: str) -> None:
    low = queue.create_job("email").priority("low").save()
    first = queue.create_job("email").save()
    second = queue.create_job("email").save()
    urgent = queue.create_job("email").priority("critical").save()
    other = queue.create_job("sms").priority(-20).save()
    listed = kue(queue, redis_url, "job", "list", "inactive", "-t", "email")
    assert _ids(listed.stdout) == [urgent.id, first.id, second.id, low.id]
    assert listed.stderr.endswith("4 shown of 4 inactive jobs of type email\n")
    every = kue(queue, redis_url, "job", "list", "inactive", "-n", "2")
    assert _ids(every.stdout) == [other.id, urgent.id]
    assert every.stdout.splitlines()[1].split()[3] == "-20"  # no name: the number
    as_json = json.loads(kue(queue, redis_url, "job", "list", "inactive", "--json").stdout)
    assert as_json == [j.to_dict() for j in queue.get_jobs([other.id, urgent.id, first.id])] + [
        j.to_dict() for j in queue.get_jobs([second.id, low.id])
    ]


def test_delayed_jobs_soonest_due_first(queue: Queue, redis_url: str) -> None:
    late = queue.create_job("email").delay(3 * 3_600_000).save()
    soon = queue.create_job("email").delay(3_600_000).priority("low").save()
    mid = queue.create_job("sms").delay(2 * 3_600_000).priority("high").save()
    listed = kue(queue, redis_url, "job", "list", "delayed")
    assert _ids(listed.stdout) == [soon.id, mid.id, late.id]
    head, row = listed.stdout.splitlines()[:2]
    assert head.split()[5] == "DUE" and row.split()[4:8] == ["0s", "ago", "in", "59m"]


def test_nothing_listed_prints_no_table(queue: Queue, redis_url: str) -> None:
    listed = kue(queue, redis_url, "job", "list", "complete")
    assert listed.exit_code == 0 and listed.stdout == ""
    assert listed.stderr.endswith("0 shown of 0 complete jobs\n")
    assert kue(queue, redis_url, "job", "list", "blocked", "--json").stdout == "[]\n"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["waiting"], "'waiting' is not one of 'inactive', 'active', 'complete', 'failed'"),
        ([], "Missing argument 'STATE'"),
        (["failed", "-t", ""], "type"),
        (["failed", "-n", "0"], "-n"),
    ],
)
def test_a_wrong_list_exits_2_saying_why(
    queue: Queue, redis_url: str, args: list[str], message: str
) -> None:
    refused(kue(queue, redis_url, "job", "list", *args), 2, message)


def test_a_bare_delay_is_milliseconds(queue: Queue, redis_url: str) -> None:
    made = json.loads(
        kue(queue, redis_url, "job", "create", "t", "--delay", "5000", "--json").stdout
    )
    assert made["state"] == "delayed" and made["delay"] == 5000
    saved = queue.get_job(made["id"])
    assert saved is not None and saved.promote_at - saved.created_at == 5000  # type: ignore[operator]
    said = kue(queue, redis_url, "job", "create", "t", "--delay", "5").stdout
    assert re.fullmatch(r"created job \d+: t, delayed, due in 5ms\n", said)  # it says ms
    assert kue(queue, redis_url, "job", "create", "t", "--delay", "90s").stdout.endswith(
        "delayed, due in 90s\n"
    )
    help_text = kue(queue, redis_url, "job", "create", "--help").stdout
    assert "a bare number is milliseconds" in " ".join(help_text.split())


def test_one_job_is_counted_in_the_singular(queue: Queue, redis_url: str) -> None:
    queue.create_job("email").save()
    listed = kue(queue, redis_url, "job", "list", "inactive")
    assert listed.stderr.endswith("1 shown of 1 inactive job\n")
