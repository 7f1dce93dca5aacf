"""Jobs from the command line: ``kue job show|create|retry|promote|cancel|remove`` and
``kue pause|resume`` (through click's CliRunner, against a real Redis): what each prints, in
text and JSON, and that a batch with one bad id changes nothing."""

from __future__ import annotations

import json
import re

import pytest
import redis

from kue_core import Job, Queue
from tests.cli.test_control_cli import kue, no_kue_env, refused, running, workers  # noqa: F401
from tests.conftest import finish, free_port, snapshot, written_since

pytestmark = pytest.mark.timeout(120)


def _failed(queue: Queue, job_type: str = "t") -> int:
    """A job of ``job_type`` that failed for good (one attempt); its id."""
    queue.create_job(job_type, {"n": 1}).save()
    return finish(queue, job_type, ok=False)


# -- kue job show ---------------------------------------------------------------------------
def test_show_prints_a_job_in_text_and_json(queue: Queue, redis_url: str) -> None:
    job = queue.create_job("email", {"to": "zoë@example.com"}).priority("high").save()
    job.tag("vip")
    failed = _failed(queue)
    queue.get_job(failed).log("tried %s", "once")
    result = kue(queue, redis_url, "job", "show", str(job.id), str(failed), "--log")
    assert result.exit_code == 0, result.output
    first, second = result.stdout.split("\n\n")
    assert first.splitlines()[0] == f"job {job.id}: email, inactive"
    assert "  priority   high" in first and '  data       {"to":"zoë@example.com"}' in first
    assert "  tags       vip" in first and "  attempts   0 of 1" in first
    assert second.splitlines()[0] == f"job {failed}: t, failed"
    assert "  error      boom" in second
    logged = [line for line in second.splitlines() if line.startswith("  log  ")]
    assert len(logged) == 1  # with its time (UTC) and attempt, as the job's page shows it
    assert re.fullmatch(
        r"  log        \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z  tried once", logged[0]
    )
    queue.client.rpush(queue.keys.log(failed), "a line of Node Kue's")  # no time, no attempt
    result = kue(queue, redis_url, "job", "show", str(failed), "--log")
    assert result.stdout.splitlines()[-1] == "  log        a line of Node Kue's"
    shown = json.loads(kue(queue, redis_url, "job", "show", str(failed), "--log", "--json").stdout)
    assert shown[0]["log"] == ["tried once", "a line of Node Kue's"]  # the texts, as before
    shown = json.loads(kue(queue, redis_url, "job", "show", str(job.id), "--json").stdout)
    assert shown == [queue.get_job(job.id).to_dict()]  # type: ignore[union-attr]


def test_show_refuses_unknown_and_malformed_ids(queue: Queue, redis_url: str) -> None:
    job = queue.create_job("t").save()
    refused(kue(queue, redis_url, "job", "show", str(job.id), "999999"), 2, "no job 999999")
    refused(kue(queue, redis_url, "job", "show", "abc"), 2, "job id")
    refused(kue(queue, redis_url, "job", "show"), 2, "Missing argument")


# -- kue job create -------------------------------------------------------------------------
def test_create_with_options(queue: Queue, redis_url: str) -> None:
    parent = queue.create_job("p").save()
    args = ["--data", '{"to": "a@b"}', "--priority", "critical", "--attempts", "3"]
    args += ["--ttl", "30s", "--tag", "x", "--tag", "y", "--depends-on", str(parent.id)]
    result = kue(queue, redis_url, "job", "create", "email", *args)
    assert result.exit_code == 0, result.output
    jid = int(result.stdout.split()[2].rstrip(":"))
    assert result.stdout == f"created job {jid}: email, blocked\n"
    made = queue.get_job(jid)
    assert made is not None and made.data == {"to": "a@b"} and made.priority() == -15
    assert (made.attempts(), made.ttl(), made.tags()) == (3, 30_000, ["x", "y"])
    assert [d["id"] for d in made.dependencies()] == [parent.id]
    later = kue(queue, redis_url, "job", "create", "t", "--delay", "1h", "--json")
    shown = json.loads(later.stdout)
    assert shown["state"] == "delayed" and shown["delay"] == 3_600_000


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--data", "{nope"], "--data is not valid JSON"),
        (["--priority", "urgent"], "priority"),
        (["--delay", "soon"], "an age"),
        (["--depends-on", "999999"], "999999"),
        (["--depends-on", "x"], "job id"),
        (["--attempts", "0"], "--attempts"),
    ],
)
def test_create_refuses_bad_input_and_saves_nothing(
    queue: Queue, redis_url: str, r: redis.Redis, args: list[str], message: str
) -> None:
    before = snapshot(r, queue.prefix)
    refused(kue(queue, redis_url, "job", "create", "t", *args), 2, message)
    assert written_since(r, queue.prefix, before) == {}


def test_create_refuses_a_bad_type(queue: Queue, redis_url: str) -> None:
    refused(kue(queue, redis_url, "job", "create", "bad\ntype"), 2, "type")


# -- kue job retry / promote / cancel / remove ----------------------------------------------
def test_retry_failed_and_complete_jobs(queue: Queue, redis_url: str) -> None:
    failed = _failed(queue)
    queue.create_job("t").save()
    done = finish(queue, "t", ok=True)
    result = kue(queue, redis_url, "job", "retry", str(failed), str(done))
    assert result.exit_code == 0, result.output
    assert (
        result.stdout
        == f"retried job {failed}: t, now inactive\nretried job {done}: t, now inactive\n"
    )
    again = queue.get_job(failed)
    assert again is not None and again.state == "inactive" and again.attempts_made == 0


def test_a_batch_with_one_job_in_the_wrong_state_changes_nothing(
    queue: Queue, redis_url: str, r: redis.Redis
) -> None:
    failed = _failed(queue)
    waiting = queue.create_job("t").save()
    before = snapshot(r, queue.prefix)
    result = kue(queue, redis_url, "job", "retry", str(failed), str(waiting.id))
    refused(result, 1, f"job {waiting.id} is inactive; nothing was changed")
    refused(kue(queue, redis_url, "job", "retry", str(failed), "999999"), 2, "no job 999999")
    refused(kue(queue, redis_url, "job", "promote", str(failed)), 1, f"job {failed} is failed")
    refused(kue(queue, redis_url, "job", "cancel", str(failed), "x1"), 2, "job id")
    assert written_since(r, queue.prefix, before) == {}


def test_promote_runs_delayed_jobs_now(queue: Queue, redis_url: str) -> None:
    one = queue.create_job("t").delay(3_600_000).save()
    two = queue.create_job("t").delay(3_600_000).save()
    result = kue(queue, redis_url, "job", "promote", str(one.id), str(two.id), "--json")
    assert result.exit_code == 0, result.output
    assert [(j["id"], j["state"]) for j in json.loads(result.stdout)] == [
        (one.id, "inactive"),
        (two.id, "inactive"),
    ]
    assert queue.ids("delayed") == []


def test_cancel_several_jobs_one_running(
    queue: Queue,
    redis_url: str,
    running: Job,  # noqa: F811
) -> None:
    waiting = queue.create_job("w").save()
    ids = [str(waiting.id), str(running.id)]
    result = kue(queue, redis_url, "job", "cancel", *ids, "--reason", "ops")
    assert result.exit_code == 0, result.output
    assert result.stdout == "".join(
        f"cancelled job {i}: {t}, now failed\n" for i, t in zip(ids, "wt", strict=True)
    )
    for jid in (waiting.id, running.id):
        job = queue.get_job(jid)  # type: ignore[arg-type]
        assert job is not None and (job.state, job.error) == ("failed", "cancelled: ops")
    done = queue.create_job("d").save()
    queue.create_job("d").save()
    finish(queue, "d", ok=True)
    refused(kue(queue, redis_url, "job", "cancel", str(done.id)), 1, f"job {done.id} is complete")


def test_remove_keeps_a_job_others_wait_for_and_removes_the_rest(
    queue: Queue, redis_url: str
) -> None:
    plain = queue.create_job("t").save()
    parent = queue.create_job("p").save()
    child = queue.create_job("c").depends_on(parent).save()
    result = kue(queue, redis_url, "job", "remove", str(plain.id), str(parent.id))
    refused(result, 1, f"jobs {child.id} are waiting for it (--cascade removes them too)")
    assert result.stdout == f"removed job {plain.id}\n"
    assert [j.id for j in queue.get_jobs([plain.id, parent.id])] == [parent.id]  # type: ignore[list-item]
    cascade = kue(queue, redis_url, "job", "remove", str(parent.id), "--cascade", "--json")
    assert json.loads(cascade.stdout) == {"removed": [parent.id, child.id]}


def test_without_redis_is_unavailable(queue: Queue) -> None:
    url = f"redis://127.0.0.1:{free_port()}"
    for args in (["job", "show", "1"], ["job", "retry", "1"], ["pause", "t"]):
        result = kue(queue, url, *args)
        assert result.exit_code == 3, (args, result.output)


# -- kue pause / resume ---------------------------------------------------------------------
def test_pause_and_resume_types(queue: Queue, redis_url: str) -> None:
    result = kue(queue, redis_url, "pause", "email", "sms")
    assert result.stdout == "paused email\npaused sms\n"
    assert sorted(queue.paused()) == ["email", "sms"]
    again = json.loads(kue(queue, redis_url, "pause", "email", "--json").stdout)
    assert again == [{"type": "email", "paused": True, "changed": False}]
    assert kue(queue, redis_url, "resume", "email").stdout == "resumed email\n"
    assert queue.paused() == ["sms"]
    assert kue(queue, redis_url, "resume", "email").stdout == "email was already resumed\n"


def test_pause_refuses_a_bad_type_and_changes_nothing(
    queue: Queue, redis_url: str, r: redis.Redis
) -> None:
    before = snapshot(r, queue.prefix)
    refused(kue(queue, redis_url, "pause", "ok", "bad\ntype"), 2, "type")
    assert written_since(r, queue.prefix, before) == {}


def test_create_refuses_data_above_the_queues_limit(
    queue: Queue, redis_url: str, r: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``KUE_MAX_DATA_BYTES`` without a payload store (docs/payloads.md): the size and the
    limit, exit 2, nothing saved."""
    monkeypatch.setenv("KUE_MAX_DATA_BYTES", "100")
    before = snapshot(r, queue.prefix)
    data = json.dumps({"blob": "x" * 200})
    result = kue(queue, redis_url, "job", "create", "t", "--data", data)
    refused(result, 2, f"is {len(data) - 1:,} bytes, above max_data_bytes")
    assert "of 100 bytes" in result.stderr
    assert written_since(r, queue.prefix, before) == {}
