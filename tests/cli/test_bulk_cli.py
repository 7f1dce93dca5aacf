"""``kue bulk ACTION``: counts what a filter matches, asks (or not, with --yes), acts in
batches and says what it did; bad usage exits 2 and changes nothing."""

from __future__ import annotations

import io
import json
from collections.abc import Callable

from click.testing import CliRunner, Result

from kue_cli.cli import cli
from kue_core import Queue
from kue_core.store import calls
from tests.cli.test_cli import invoke, on


def answered(text: str, *args: str) -> Result:
    """``kue`` with ``text`` typed at its question."""
    return CliRunner().invoke(cli, list(args), input=text)


def _failed(queue: Queue, n: int) -> None:
    for i in range(n):
        job = queue.create_job("email" if i % 2 else "sms").tags("vip" if i < 4 else "other")
        queue.scripts.call(calls.set_state(queue.keys, job.save().id, "failed"))  # type: ignore[arg-type]


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


class _Typed(io.BytesIO):
    """What is typed at the questions; ``meanwhile()`` runs as the first answer is read (while
    the operator reads the question)."""

    def __init__(self, text: str, meanwhile: Callable[[], object]) -> None:
        super().__init__(text.encode())
        self.meanwhile: Callable[[], object] | None = meanwhile

    def _first(self, size: int | None) -> None:
        if size != 0 and self.meanwhile is not None:  # click reads 0 bytes to test the stream
            self.meanwhile, act = None, self.meanwhile
            act()

    def read(self, size: int | None = -1) -> bytes:
        self._first(size)
        return super().read(size)

    def read1(self, size: int = -1) -> bytes:
        self._first(size)
        return super().read1(size)

    def readline(self, size: int | None = -1) -> bytes:
        self._first(size)
        return super().readline(size)


def test_a_count_changed_before_the_action_is_asked_again(queue: Queue, redis_url: str) -> None:
    _failed(queue, 10)
    late = queue.create_job("sms").save()
    where = on(redis_url, queue.prefix)
    typed = _Typed(
        "y\ny\n", lambda: queue.scripts.call(calls.set_state(queue.keys, late.id, "failed"))
    )
    done = CliRunner().invoke(cli, ["bulk", "retry", "-s", "failed", *where], input=typed)
    assert done.exit_code == 0, done.output
    asked = [line for line in done.stderr.splitlines() if "?" in line]
    assert "retry 10 jobs (1, 2, 3, 4, 5 and 5 more)?" in asked[0]
    assert "the filter matches 11 jobs now, not the 10 confirmed: nothing was done" in done.stderr
    assert "retry 11 jobs (1, 2, 3, 4, 5 and 6 more)?" in done.stderr
    assert done.stdout.strip().endswith("retry: 11 of 11 matched jobs (done)")
    assert queue.count("failed") == 0 and queue.count("inactive") == 11
    # Declined the second time: nothing was done at all.
    _failed(queue, 3)
    later = queue.create_job("sms").save()
    typed = _Typed(
        "y\nn\n", lambda: queue.scripts.call(calls.set_state(queue.keys, later.id, "failed"))
    )
    declined = CliRunner().invoke(cli, ["bulk", "remove", "-s", "failed", *where], input=typed)
    assert declined.exit_code == 1 and queue.count("failed") == 4
    # A script gives the count it was told (--count): another is exit 1, and nothing done.
    refused = invoke("bulk", "remove", "-s", "failed", "--expect", "3", *where)
    assert refused.exit_code == 1 and queue.count("failed") == 4
    assert "the filter matches 4 jobs now, not the 3 confirmed" in refused.stderr
    done = invoke("bulk", "remove", "-s", "failed", "--expect", "4", "--json", *where)
    assert json.loads(done.stdout)["done"] == 4 and queue.count("failed") == 0


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
    queue.add_audit({"action": "bulk_retry", "method": "POST", "path": "/api/jobs/bulk",
                     "status": "200", "jobs": "2", "detail": '{"state": "failed"}'})  # fmt: skip
    lines = invoke("audit", "-n", "1", *where).stdout.splitlines()
    assert lines[0].split()[2] == "bulk_retry"  # the action, then its filter below
    assert lines[1] == f"{'':21}" + '{"state": "failed"}'
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
