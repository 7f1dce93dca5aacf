"""``kue job stream ID``: a job's streamed parts printed as they come (text as it is, flushed
part by part; other values a JSON line each; ``--json`` an object a line), a retry's parts
announced on stderr, resumed with ``--after``, ``--once`` for what is held now; exit 0 once
the job completed, 1 once it failed, was removed or outran ``--timeout``, 2 for bad input,
3 without Redis."""

from __future__ import annotations

import io
import json
import os
import subprocess
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from kue_cli.job_stream import _Printer
from kue_core import Job, Queue, StreamPart
from tests.cli.running import KUE, Kue
from tests.cli.test_cli import unreachable
from tests.cli.test_control_cli import kue, no_kue_env, refused  # noqa: F401
from tests.conftest import wait_for

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def worker(queue: Queue) -> Iterator[Callable[[Callable[[Job], Any]], None]]:
    """Runs jobs of type ``tell`` in this process with the handler given; stopped after."""
    yield lambda handler: queue.process("tell", 1, handler)
    queue.shutdown(5)


def ended(queue: Queue, job: Job, state: str = "complete") -> None:
    wait_for(lambda: queue.get_job(job.id).state == state)  # type: ignore[arg-type]


def test_text_is_written_as_it_is_and_other_values_a_line_each(
    queue: Queue, redis_url: str, worker: Callable[[Callable[[Job], Any]], None]
) -> None:
    parts: list[Any] = ["Once", {"n": 1}, " upon", [1, 2], " a time", "\n", "é", "\x1b[1m!"]
    job = queue.create_job("tell").save()
    worker(lambda j: [j.stream(p) for p in parts] and None)
    ended(queue, job)
    result = kue(queue, redis_url, "job", "stream", str(job.id))
    assert result.exit_code == 0, result.output
    # Into a pipe, exactly as streamed: an ANSI escape included (click would strip it).
    assert result.stdout == 'Once\n{"n":1}\n upon\n[1,2]\n a time\né\x1b[1m!'
    assert result.stderr == ""  # one attempt: nothing announced


def test_each_part_shows_as_soon_as_it_is_streamed(
    queue: Queue, redis_url: str, worker: Callable[[Callable[[Job], Any]], None]
) -> None:
    """A real process into a pipe (block-buffered unless flushed): the first parts are read
    while the handler still waits, then the command exits 0 with the job's completion."""
    go = threading.Event()

    def tell(job: Job) -> str:
        job.stream("Once")
        job.stream(" upon")
        go.wait(30)
        job.stream(" a time")
        return "told"

    job = queue.create_job("tell").save()
    worker(tell)
    args = ["job", "stream", str(job.id), "--redis", redis_url, "--prefix", queue.prefix]
    # Without PYTHONUNBUFFERED (the suite's shell may set it): the command flushes itself.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KUE_", "PYTHONUNBUF"))}
    proc = subprocess.Popen([str(KUE), *args], stdout=subprocess.PIPE, env=env)
    got = bytearray()
    assert proc.stdout is not None
    reader = threading.Thread(target=_read_all, args=(proc.stdout.fileno(), got))
    reader.start()
    try:
        wait_for(lambda: bytes(got) == b"Once upon", timeout=30)
        assert proc.poll() is None  # still following: the job runs on
        go.set()
        assert proc.wait(30) == 0
        reader.join(10)
        assert bytes(got) == b"Once upon a time"
    finally:
        go.set()
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


def _read_all(fd: int, into: bytearray) -> None:
    """Read ``fd`` to its end into ``into``, the bytes as they come."""
    while chunk := os.read(fd, 64):
        into.extend(chunk)


def test_a_retry_is_announced_and_json_gives_each_parts_id_to_resume_after(
    queue: Queue, redis_url: str, worker: Callable[[Callable[[Job], Any]], None]
) -> None:
    def flaky(job: Job) -> str:
        job.stream(f"try {job.attempts_made + 1}.")
        job.stream({"step": 2})
        if job.attempts_made == 0:
            raise ValueError("once more")
        return "ok"

    job = queue.create_job("tell").attempts(2).save()
    worker(flaky)
    ended(queue, job)
    result = kue(queue, redis_url, "job", "stream", str(job.id))
    assert result.exit_code == 0, result.output
    assert result.stdout == 'try 1.\n{"step":2}\ntry 2.\n{"step":2}\n'
    assert result.stderr == "--- attempt 2 ---\n"
    as_json = kue(queue, redis_url, "job", "stream", str(job.id), "--json")
    assert as_json.exit_code == 0 and as_json.stderr == ""
    records = [json.loads(line) for line in as_json.stdout.splitlines()]
    assert [(r["attempt"], r["value"]) for r in records] == [
        (1, "try 1."),
        (1, {"step": 2}),
        (2, "try 2."),
        (2, {"step": 2}),
    ]
    assert [set(r) for r in records] == [{"id", "attempt", "value"}] * 4
    held = [p.id for p in queue.stream_parts(job.id)]  # type: ignore[arg-type]
    assert [r["id"] for r in records] == held
    resumed = kue(queue, redis_url, "job", "stream", str(job.id), "--after", held[1])
    assert resumed.stdout == 'try 2.\n{"step":2}\n'
    assert resumed.stderr == ""  # nothing before it in this run to differ from


def test_a_failed_job_exits_1_naming_its_state_and_error(
    queue: Queue, redis_url: str, worker: Callable[[Callable[[Job], Any]], None]
) -> None:
    def broken(job: Job) -> None:
        job.stream("half")
        raise RuntimeError("disk full\nmore lines")

    job = queue.create_job("tell").save()
    worker(broken)
    ended(queue, job, "failed")
    result = kue(queue, redis_url, "job", "stream", str(job.id))
    refused(result, 1, f"job {job.id} failed: RuntimeError: disk full\n")
    assert result.stdout == "half"


def test_once_prints_what_is_held_and_leaves_a_running_job(
    queue: Queue, redis_url: str, worker: Callable[[Callable[[Job], Any]], None]
) -> None:
    go = threading.Event()

    def slow(job: Job) -> None:
        job.stream("a")
        job.stream(["b"])
        go.wait(30)

    job = queue.create_job("tell").save()
    worker(slow)
    try:
        wait_for(lambda: len(queue.read_stream(job.id, block=0.01).parts) == 2)  # type: ignore[arg-type]
        once = kue(queue, redis_url, "job", "stream", str(job.id), "--once")
        assert once.exit_code == 0, once.output
        assert once.stdout == 'a\n["b"]\n'
        assert queue.get_job(job.id).state == "active"  # type: ignore[arg-type]
        waited = kue(queue, redis_url, "job", "stream", str(job.id), "--timeout", "0.3")
        refused(waited, 1, f"job {job.id} had not ended after 0.3 s")
        assert waited.stdout == 'a\n["b"]\n'  # what it had read before giving up
    finally:
        go.set()
    ended(queue, job)
    again = kue(queue, redis_url, "job", "stream", str(job.id), "--once")
    assert again.exit_code == 0 and again.stdout == 'a\n["b"]\n'


def test_a_job_removed_while_followed_exits_1(
    queue: Queue, redis_url: str, prefix: str, run: list[Kue]
) -> None:
    job = queue.create_job("tell").save()  # no worker: it waits, and is followed meanwhile
    queue.client.xadd(queue.keys.stream(job.id), {"a": "1", "d": '"held\\n"'})  # type: ignore[arg-type]
    follower = Kue("job", "stream", str(job.id), "--redis", redis_url, "--prefix", prefix)
    run.append(follower)
    follower.wait_for_line("^held$")
    queue.remove(job.id)  # type: ignore[arg-type]
    assert follower.wait(30) == 1
    assert f"Error: job {job.id} was removed before its stream was read to the end" in (
        follower.err
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["abc"], "job id"),
        (["999999"], 'job "999999" doesnt exist'),
        (["{id}", "--after", "yesterday"], "--after: after is a stream entry id"),
        (["{id}", "--timeout", "0"], "Invalid value for '--timeout'"),
    ],
    ids=["bad-id", "unknown-job", "bad-after", "bad-timeout"],
)
def test_bad_input_is_bad_usage(
    queue: Queue, redis_url: str, args: list[str], message: str
) -> None:
    job = queue.create_job("tell").save()
    result = kue(queue, redis_url, "job", "stream", *[a.format(id=job.id) for a in args])
    refused(result, 2, message)
    assert result.stdout == ""


def test_without_redis_it_is_unavailable() -> None:
    from click.testing import CliRunner

    from kue_cli.cli import cli

    url = unreachable()
    result = CliRunner().invoke(cli, ["job", "stream", "1", "--redis", url])
    refused(result, 3, f"cannot reach Redis at {url}")


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_in_a_terminal_the_announcement_and_the_prompt_start_lines_of_their_own(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Into a pipe the text stays as streamed (the tests above); in a terminal, where stdout
    and stderr mix, an open line is ended before the announcement and at the end."""
    out = _Terminal()
    printer = _Printer(out, as_json=False)
    for n, (attempt, value) in enumerate([(1, "Once up"), (2, "Once"), (2, " upon")]):
        printer.part(StreamPart(f"1-{n}", attempt, value))
    printer.close()
    assert out.getvalue() == "Once up\nOnce upon\n"
    assert capsys.readouterr().err == "--- attempt 2 ---\n"
