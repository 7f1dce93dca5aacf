"""Job records from the command line: ``kue search``, ``kue tag``/``untag``, ``kue retention``
and the retention and memory lines of ``kue stats`` (through click's CliRunner, against a
real Redis, and one run as a real process), each refusal with its message and exit code."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from kue_core import Queue, defaults
from tests.cli.test_control_cli import kue, refused
from tests.conftest import finish


@pytest.fixture(autouse=True)
def no_kue_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("KUE_") and not name.startswith("KUE_TEST_"):
            monkeypatch.delenv(name)


def test_search(queue: Queue, redis_url: str) -> None:
    a = queue.create_job("email", {"title": "Invoice March"}).save()
    b = queue.create_job("video", {"title": "Invoice reel"}).save()
    result = kue(queue, redis_url, "search", "inv")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [
        f"{b.id}\tinactive\tvideo\tInvoice reel",
        f"{a.id}\tinactive\temail\tInvoice March",
    ]
    assert "2 shown of 2" in result.stderr
    one = kue(queue, redis_url, "search", "invoice", "--type", "email", "--count", "1")
    assert one.stdout.splitlines() == [f"{a.id}\tinactive\temail\tInvoice March"]
    none = kue(queue, redis_url, "search", "invoice", "--state", "failed")
    assert none.exit_code == 0 and "0 shown of 0" in none.output
    assert [line for line in none.output.splitlines() if "\t" in line] == []
    refused(kue(queue, redis_url, "search", "!!"), 2, "search text")
    refused(kue(queue, redis_url, "search", "x", "--state", "gone"), 2, "gone")


def test_tag_and_untag(queue: Queue, redis_url: str) -> None:
    job = queue.create_job("email").save()
    result = kue(queue, redis_url, "tag", str(job.id), "vip", "customer:42")
    assert result.exit_code == 0 and result.stdout == f"job {job.id} tags: vip, customer:42\n"
    result = kue(queue, redis_url, "untag", str(job.id), "vip")
    assert result.stdout == f"job {job.id} tags: customer:42\n"
    assert queue.tags() == {"customer:42": 1}
    refused(kue(queue, redis_url, "tag", "999", "x"), 2, "999")
    refused(kue(queue, redis_url, "tag", str(job.id), "a\nb"), 2, "control characters")
    assert queue.get_job(job.id).tags() == ["customer:42"]  # type: ignore[arg-type]


def test_retention(queue: Queue, redis_url: str) -> None:
    result = kue(queue, redis_url, "retention")
    count = defaults.RETAIN_COMPLETE[0]
    assert result.stdout.splitlines()[0] == f"complete: newest {count}, at most 7d old (default)"
    result = kue(queue, redis_url, "retention", "--complete-count", "2", "--failed-age", "36h")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [
        "complete: newest 2 (queue)",
        "failed: at most 36h old (queue)",
    ]
    assert queue.retention()["failed"]["age"] == 36 * 3_600_000
    for _ in range(4):
        queue.create_job("t").save()
        finish(queue, "t", True)
    assert queue.count("complete") == 2
    result = kue(queue, redis_url, "retention", "--keep-all", "complete", "--default", "failed")
    assert result.stdout.splitlines()[0] == "complete: every job (queue)"
    assert queue.retention()["failed"]["source"] == "default"
    before = queue.retention()
    refused(kue(queue, redis_url, "retention", "--complete-age", "soon"), 2, "an age is")
    refused(kue(queue, redis_url, "retention", "--complete-age", "0d"), 2, "an age is")
    bad = kue(queue, redis_url, "retention", "--keep-all", "failed", "--failed-count", "3")
    refused(bad, 2, "failed: give")
    assert kue(queue, redis_url, "retention", "--complete-count", "-1").exit_code == 2
    assert queue.retention() == before


def test_stats_shows_the_retention_and_memory(queue: Queue, redis_url: str) -> None:
    queue.set_retention(complete={"count": 5, "age": 3_600_000})
    text = kue(queue, redis_url, "stats").stdout
    assert "kept: complete newest 5, at most 1h old (queue); failed newest 100000" in text
    assert "redis memory: " in text and " used (peak " in text
    report = json.loads(kue(queue, redis_url, "stats", "--json").stdout)
    assert report["retention"]["complete"] == {"count": 5, "age": 3_600_000, "source": "queue"}
    assert report["memory"]["used"] > 0


def test_a_real_process_searches(queue: Queue, redis_url: str) -> None:
    job = queue.create_job("email", {"title": "hello world"}).tags("vip").save()
    env = {k: v for k, v in os.environ.items() if not k.startswith("KUE_")}
    argv = [sys.executable, "-m", "kue_cli", "search", "vip", "hel", "--redis", redis_url]
    done = subprocess.run(
        [*argv, "--prefix", queue.prefix], capture_output=True, text=True, env=env, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"{job.id}\tinactive\temail\thello world\n"
