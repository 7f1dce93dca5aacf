"""``kue bulk ACTION``: counts what a filter matches, asks (or not, with --yes), acts in
batches and says what it did; bad usage exits 2 and changes nothing."""

from __future__ import annotations

import json

from click.testing import CliRunner, Result

from kue_cli.cli import cli
from kue_core import Queue
from tests.cli.test_cli import invoke, on


def answered(text: str, *args: str) -> Result:
    """``kue`` with ``text`` typed at its question."""
    return CliRunner().invoke(cli, list(args), input=text)


def _failed(queue: Queue, n: int) -> None:
    for i in range(n):
        job = queue.create_job("email" if i % 2 else "sms").tags("vip" if i < 4 else "other")
        queue.scripts.set_state(job.save().id, "failed")  # type: ignore[arg-type]


def test_count_ask_and_retry(queue: Queue, redis_url: str) -> None:
    _failed(queue, 10)
    where = on(redis_url, queue.prefix)
    counted = invoke("bulk", "retry", "-s", "failed", "--tag", "vip", "--count", *where)
    assert counted.exit_code == 0 and counted.stdout.strip() == "4 jobs match"
    declined = answered("n\n", "bulk", "retry", "-s", "failed", "--tag", "vip", *where)
    assert declined.exit_code == 1 and queue.count("failed") == 10
    assert "retry 4 jobs (1, 2, 3, 4)?" in declined.stderr  # the jobs, in id order
    raw = invoke("bulk", "retry", "-s", "failed", "--count", "--json", *where)
    assert json.loads(raw.stdout) == {"matched": 10, "examples": [1, 2, 3, 4, 5]}
    done = answered("y\n", "bulk", "retry", "-s", "failed", "--tag", "vip", "-t", "email", *where)
    assert done.exit_code == 0, done.output
    assert done.stdout.strip().endswith("retry: 2 of 2 matched jobs (done)")
    assert queue.count("failed") == 8
    raw = invoke("bulk", "remove", "-s", "failed", "--min-age", "1d", "-y", "--json", *where)
    assert json.loads(raw.stdout)["matched"] == 0
    removed = invoke("bulk", "remove", "-s", "failed", "-y", "--json", *where)
    assert json.loads(removed.stdout)["done"] == 8 and queue.count("failed") == 0


def test_bad_usage_changes_nothing(queue: Queue, redis_url: str) -> None:
    _failed(queue, 3)
    where = on(redis_url, queue.prefix)
    for args in (
        ("retry", "-s", "complete", "-y"),
        ("retry", "-s", "failed", "--min-age", "soon", "-y"),
        ("retry", "-s", "failed", "-t", "", "-y"),
        ("explode", "-s", "failed", "-y"),
    ):
        assert invoke("bulk", *args, *where).exit_code == 2, args
    assert queue.count("failed") == 3


def test_kue_audit_lists_the_changes(queue: Queue, redis_url: str) -> None:
    where = on(redis_url, queue.prefix)
    assert invoke("audit", *where).stdout.strip() == "no change recorded"
    for action in ("create", "bulk_start"):
        queue.add_audit({"action": action, "method": "POST", "path": "/api/x", "who": "ada",
                         "from": "10.0.0.1", "status": "200", "jobs": "3"})  # fmt: skip
    lines = invoke("audit", *where).stdout.splitlines()
    assert [line.split()[2] for line in lines] == ["bulk_start", "create"]
    assert lines[0].endswith("POST /api/x  by ada from 10.0.0.1  3 jobs")
    only = json.loads(invoke("audit", "--action", "create", "--json", *where).stdout)
    assert [e["action"] for e in only] == ["create"]
    assert invoke("audit", "-n", "0", *where).exit_code == 2


def test_kue_audit_says_one_job(queue: Queue, redis_url: str) -> None:
    where = on(redis_url, queue.prefix)
    for jobs in ("0", "1", "2", ""):
        queue.add_audit({"action": "remove", "method": "DELETE", "path": "/api/job/7",
                         "who": "", "from": "::1", "status": "200", "jobs": jobs})  # fmt: skip
    lines = invoke("audit", *where).stdout.splitlines()
    assert [line.split("from ::1")[1] for line in lines] == ["", "  2 jobs", "  1 job", "  0 jobs"]
