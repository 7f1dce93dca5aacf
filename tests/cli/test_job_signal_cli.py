"""``kue job signal ID NAME [--data JSON]``: a suspended job resumed from the command line,
a signal kept for a job that does not wait yet, a second one told and changing nothing;
bad input is exit 2 with nothing changed, an ended job exit 1."""

from __future__ import annotations

import json
from typing import Any

from kue_core import Job, Queue, WaitForSignal
from tests.cli.test_control_cli import kue, refused
from tests.conftest import wait_for


def test_a_signal_from_the_command_line_resumes_a_suspended_job(
    queue: Queue, redis_url: str
) -> None:
    def handler(job: Job) -> Any:
        if "approval" not in job.signals:
            raise WaitForSignal("approval")
        return job.signals["approval"]

    job = queue.create_job("approve", {}).save()
    queue.process("approve", 1, handler)
    try:
        wait_for(lambda: queue.get_job(job.id).state == "suspended")  # type: ignore[arg-type]
        stats = kue(queue, redis_url, "stats")
        header, approve = stats.stdout.splitlines()[:2]
        assert header.split()[-1] == "suspended" and approve.split()[-1] == "1"
        result = kue(
            queue, redis_url, "job", "signal", str(job.id), "approval", "--data", '{"by": "ann"}'
        )
        assert result.exit_code == 0, result.output
        assert result.stdout == f"job {job.id} resumed by signal approval\n"
        wait_for(lambda: queue.get_job(job.id).state == "complete")  # type: ignore[arg-type]
        assert queue.get_job(job.id).result == {"by": "ann"}  # type: ignore[arg-type]
        again = kue(queue, redis_url, "job", "signal", str(job.id), "approval", "--json")
        assert again.exit_code == 0
        told = json.loads(again.stdout)
        assert told["outcome"] == "already" and told["job"]["signals"] == {
            "approval": {"by": "ann"}
        }
        ended = kue(queue, redis_url, "job", "signal", str(job.id), "other")
        refused(ended, 1, "waits for no signal")
    finally:
        queue.shutdown(5)


def test_a_signal_is_kept_and_bad_input_changes_nothing(queue: Queue, redis_url: str) -> None:
    job = queue.create_job("approve", {}).save()
    result = kue(queue, redis_url, "job", "signal", str(job.id), "approval")
    assert result.exit_code == 0 and "kept for job" in result.stdout
    for args, words in (
        (["999999", "approval"], "999999"),
        (["abc", "approval"], "job id"),
        ([str(job.id), "no spaces here"], "signal's name"),
        ([str(job.id), "other", "--data", "{nope"], "--data is not JSON"),
    ):
        refused(kue(queue, redis_url, "job", "signal", *args), 2, words)
    assert queue.get_job(job.id).signals == {"approval": None}  # type: ignore[arg-type]
