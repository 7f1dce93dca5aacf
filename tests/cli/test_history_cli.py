"""``kue stats --history`` (all types, or one type point by point, and the deploys; JSON as
``Queue.stats_history``) and ``kue worker --version-tag`` (the version a worker registers)."""

from __future__ import annotations

import json
import signal

import pytest
import redis

from kue_cli.history_text import lines
from kue_core import Queue, installed_version
from kue_core.features import history
from tests.cli.running import Kue
from tests.cli.test_cli import invoke, on
from tests.conftest import finish, wait_for


def _sampled(queue: Queue, r: redis.Redis) -> None:
    for _ in range(3):
        queue.create_job("email").save()
    queue.scripts.drive(history.sample(queue.keys))
    finish(queue, "email", True)
    finish(queue, "email", False)
    r.set(queue.keys.series_minute, int(r.get(queue.keys.series_minute) or 0) - 1)
    queue.scripts.drive(history.sample(queue.keys))


def test_stats_history_of_every_type_and_of_one(
    queue: Queue, r: redis.Redis, redis_url: str
) -> None:
    _sampled(queue, r)
    result = invoke("stats", "--history", "24h", *on(redis_url, queue.prefix))
    assert result.exit_code == 0, result.output
    out = result.stdout.splitlines()
    assert out[0] == "history, last 24h, every type (waiting: the most at once):"
    email = next(line.split() for line in out if line.startswith("email"))
    # Complete, failed, the most waiting: the second sample wrote the first one's minute
    # again (one left waiting); its hour keeps the higher of the two (3).
    assert email[1:4] == ["1", "1", "1"]
    assert out[-1] == "deploys: none in this range"
    one = invoke("stats", "--history", "1h", "-t", "email", *on(redis_url, queue.prefix))
    assert one.exit_code == 0, one.output
    rows = one.stdout.splitlines()
    assert rows[0] == "history of email, last 1h (points with anything in them):"
    assert rows[-2].split()[:4] == ["total", "1", "1", "1"]
    raw = invoke("stats", "--history", "7d", "--json", *on(redis_url, queue.prefix))
    found = json.loads(raw.stdout)
    assert found["range"] == "7d" and found["types"]["email"]["complete"] == 1
    assert found["types"]["email"]["waiting"] == 3
    assert found["total"] == queue.stats_history(None, "7d")["total"]


def test_the_lines_name_the_deploys() -> None:
    point = {"complete": 2, "failed": 0, "waiting": 1, "delayed": 0}
    times = {"count": 2, "mean_ms": 3.0, "p50_ms": 2.5, "p95_ms": 4.75, "p99_ms": 4.95}
    point.update(wait=times, run={**times, "p99_ms": 2500.0})
    found = {
        "type": "email",
        "range": "1h",
        "points": [{"at": 0, **point}],
        "total": point,
        "deploys": [{"at": 60_000, "versions": ["1.1"], "was": ["1.0"]}],
    }
    assert lines(found)[-2:] == ["deploys: 1", "  1970-01-01 00:01  1.1 (was 1.0)"]
    assert lines(found)[2].split() == [
        "1970-01-01",
        "00:00",
        "2",
        "0",
        "1",
        "4.75ms",
        "2.5ms",
        "4.75ms",
        "2.5s",
    ]


@pytest.mark.parametrize("args", [("-t", "email"), ("--history", "2d")])
def test_bad_usage_exits_2(args: tuple[str, ...], redis_url: str, prefix: str) -> None:
    assert invoke("stats", *args, *on(redis_url, prefix)).exit_code == 2


@pytest.mark.timeout(60)
def test_a_worker_registers_its_version_tag(redis_url: str, queue: Queue) -> None:
    def versions() -> list[str]:
        return sorted(w["version"] for w in queue.workers())

    tagged = Kue(
        "worker", "tests.cli.handlers:echo", "-t", "double", "--version-tag", "2026.11-rc1",
        "--redis", redis_url, "--prefix", queue.prefix,
    )  # fmt: skip
    plain = Kue(
        "worker", "tests.cli.handlers:echo", "-t", "double", "--redis", redis_url,
        "--prefix", queue.prefix,
    )  # fmt: skip
    try:
        wait_for(lambda: len(queue.workers()) == 2, timeout=30)
        # Without the tag: the version of the package that provides the handler's module
        # (the tests are no installed package: kue's own).
        assert versions() == sorted(["2026.11-rc1", installed_version("tests.cli.handlers")])
        assert installed_version("tests") == installed_version()
    finally:
        for k in (tagged, plain):
            k.send(signal.SIGTERM)
        assert tagged.wait() == 0 and plain.wait() == 0
    bad = Kue("worker", "tests.cli.handlers:echo", "-t", "x", "--version-tag", "a b",
              "--redis", redis_url, "--prefix", queue.prefix)  # fmt: skip
    assert bad.wait() == 2
    assert any("a version must be" in line for line in bad.err), bad.output
