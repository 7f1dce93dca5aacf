"""``kue runs`` (through click's CliRunner, against a real Redis): a fan-out job's runs as
lines and as JSON, a plain job said not to fan out, an unknown job refused as bad usage."""

from __future__ import annotations

import json
from typing import Any

from kue_core import Queue
from kue_core.store import calls
from tests.cli.test_deps_cli import kue, no_kue_env  # noqa: F401  (no_kue_env: autouse)


def _claim(queue: Queue, worker: str) -> Any:
    claimed = queue.scripts.call(calls.claim(queue.keys, "t", worker, 30_000))
    assert isinstance(claimed, tuple), claimed
    return claimed


def test_runs_as_lines_and_json(queue: Queue, redis_url: str) -> None:
    jid = queue.create_job("t").fan_out(2, max_failed_runs=1).save().id
    assert jid is not None
    one, two = _claim(queue, "cache-1"), _claim(queue, "cache-2")
    ended = queue.scripts.call(
        calls.complete(queue.keys, jid, one[1]["lease"], '{"flushed": 12}', None)
    )
    assert ended.outcome == "complete"
    queue.scripts.call(
        calls.fail(queue.keys, jid, two[1]["lease"], "no route", "no route\nat ...", 0, None)
    )
    result = kue(queue, redis_url, "runs", str(jid))
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == f"job {jid} (t) is active: 1 of 2 runs complete"
    assert lines[1].split()[:2] == ["cache-1", "complete"] and '{"flushed": 12}' in lines[1]
    assert lines[2].split()[:2] == ["cache-2", "failed"] and lines[2].endswith("no route")
    report = json.loads(kue(queue, redis_url, "runs", str(jid), "--json").stdout)
    assert report["fanOut"]["k"] == 2 and report["state"] == "active"
    assert [(r["worker"], r["state"]) for r in report["runs"]] == [
        ("cache-1", "complete"),
        ("cache-2", "failed"),
    ]


def test_a_plain_job_and_an_unknown_one(queue: Queue, redis_url: str) -> None:
    jid = queue.create_job("t").save().id
    result = kue(queue, redis_url, "runs", str(jid))
    assert (
        result.exit_code == 0
        and result.stdout == f"job {jid} (t) is inactive and does not fan out\n"
    )
    missing = kue(queue, redis_url, "runs", "999")
    assert missing.exit_code == 2 and "999" in missing.stderr and "Traceback" not in missing.output


def test_only_changes_a_jobs_workers(queue: Queue, redis_url: str) -> None:
    jid = queue.create_job("t").save().id
    result = kue(queue, redis_url, "only", str(jid), "gpu-1", "gpu-2")
    assert result.exit_code == 0, result.output
    assert result.stdout == f"job {jid} (t) is pinned and runs on gpu-1, gpu-2\n"
    assert queue.get_job(jid).only() == ["gpu-1", "gpu-2"]
    assert _claim_none(queue, "cpu-1") and _claim(queue, "gpu-2")[0] == jid
    other = queue.create_job("t").only(["gpu-1"]).save().id
    result = kue(queue, redis_url, "only", str(other), "--any")
    assert result.stdout == f"job {other} (t) is inactive and runs on any worker\n"
    assert queue.get_job(other).only() is None


def test_only_refuses_bad_usage_and_changes_nothing(queue: Queue, redis_url: str) -> None:
    jid = queue.create_job("t").only(["gpu-1"]).save().id
    for args in ([], ["gpu-2", "--any"], ["bad id!"]):
        result = kue(queue, redis_url, "only", str(jid), *args)
        assert result.exit_code == 2 and "Traceback" not in result.output, args
    assert kue(queue, redis_url, "only", "999", "gpu-1").exit_code == 2
    assert queue.get_job(jid).only() == ["gpu-1"] and queue.get_job(jid).state == "pinned"


def _claim_none(queue: Queue, worker: str) -> bool:
    return not isinstance(queue.scripts.call(calls.claim(queue.keys, "t", worker, 30_000)), tuple)
