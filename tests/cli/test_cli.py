"""The ``kue`` command line through click's CliRunner: ``stats`` against a real Redis, and
every way a command refuses to start (bad usage: exit 2; unavailable: exit 3), each with its
message. Commands that would start serving or working block, so only failing paths run here;
tests/cli/test_processes.py runs the ones that start."""

from __future__ import annotations

import importlib
import json
import os
import re
import socket
import sys
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from kue_cli import timings
from kue_cli.cli import cli
from kue_cli.errors import Unavailable
from kue_core import Queue, defaults
from kue_core.base.states import STATES
from kue_http import config as http_config
from kue_http import create_app
from tests.conftest import finish, free_port, wait_for

cli_module = importlib.import_module("kue_cli.cli")


@pytest.fixture(autouse=True)
def no_kue_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Settings of the shell running the suite (KUE_AUTH, KUE_PREFIX...) stay out."""
    for name in list(os.environ):
        if name.startswith("KUE_") and not name.startswith("KUE_TEST_"):
            monkeypatch.delenv(name)


def invoke(*args: str, env: dict[str, str] | None = None) -> Result:
    return CliRunner().invoke(cli, list(args), env=env)


def on(redis_url: str, prefix: str) -> list[str]:
    return ["--redis", redis_url, "--prefix", prefix]


def unreachable() -> str:
    return f"redis://127.0.0.1:{free_port()}/0"


@pytest.fixture
def taken_port() -> Iterator[int]:
    """A port something else listens on."""
    with socket.create_server(("127.0.0.1", 0)) as sock:
        yield sock.getsockname()[1]


@pytest.fixture
def module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[str], str]]:
    """``module(source)``: the name of a new module in the current directory (tmp_path)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))  # the CLI adds the current directory
    names: list[str] = []

    def write(source: str) -> str:
        name = f"handler_{uuid.uuid4().hex[:10]}"
        (tmp_path / f"{name}.py").write_text(source)
        names.append(name)
        return name

    yield write
    for name in names:
        sys.modules.pop(name, None)


def stats_table(output: str) -> dict[str, dict[str, int]]:
    """``{row name: {state: count}}`` from ``kue stats``'s table."""
    lines = output.split("\n\n", 1)[0].splitlines()  # then the wait and run section
    # The suspended jobs' column only while there are some (as the dashboard's).
    shown = lines[0].split()[1:]
    assert lines[0].split()[0] == "type"
    assert shown in (list(STATES), [s for s in STATES if s != "suspended"])
    # Then the workers, retention and memory lines.
    assert lines[-3].startswith("workers: ") and lines[-2].startswith("kept: complete ")
    assert lines[-1].startswith("redis memory: ")
    rows = {}
    for line in lines[1:-3]:
        words = line.split()
        counts = dict(zip(shown, map(int, words[-len(shown) :]), strict=True))
        rows[" ".join(words[: -len(shown)])] = {s: counts.get(s, 0) for s in STATES}
    return rows


@pytest.fixture
def filled(queue: Queue) -> Queue:
    """email: 1 inactive, 1 complete, 1 failed, 1 delayed; video: 2 inactive, 1 delayed,
    paused."""
    for _ in range(3):
        queue.create_job("email", {"to": "a@example.com"}).save()
    queue.create_job("email").delay(60_000).save()
    finish(queue, "email", True)
    finish(queue, "email", False)
    for _ in range(2):
        queue.create_job("video").save()
    queue.create_job("video").delay(60_000).save()
    queue.pause("video")
    return queue


# -- kue stats ------------------------------------------------------------------------------
def test_stats_table_counts_each_type_and_the_total(filled: Queue, redis_url: str) -> None:
    result = invoke("stats", *on(redis_url, filled.prefix))
    assert result.exit_code == 0, result.output
    rows = stats_table(result.stdout)
    email = {
        "inactive": 1,
        "active": 0,
        "complete": 1,
        "failed": 1,
        "delayed": 1,
        "blocked": 0,
        "pinned": 0,
        "suspended": 0,
    }
    video = {
        "inactive": 2,
        "active": 0,
        "complete": 0,
        "failed": 0,
        "delayed": 1,
        "blocked": 0,
        "pinned": 0,
        "suspended": 0,
    }
    total = {s: email[s] + video[s] for s in STATES}
    assert rows == {"email": email, "video (paused)": video, "total": total}
    assert rows == {
        "email": filled.counts_by_type()["email"],
        "video (paused)": filled.counts_by_type()["video"],
        "total": filled.counts(),
    }
    assert "\nworkers: 0 live worker processes\nkept: complete newest 100000" in result.stdout
    assert result.stderr == ""


def test_stats_json_is_what_the_queue_holds(filled: Queue, redis_url: str) -> None:
    result = invoke("stats", "--json", *on(redis_url, filled.prefix))
    assert result.exit_code == 0, result.output
    assert filled.paused() == ["video"]
    report = json.loads(result.stdout)
    assert report.pop("memory")["used"] > 0
    assert report == {
        "total": filled.counts(),
        "types": filled.counts_by_type(),
        "paused": filled.paused(),
        "workers": 0,
        "timings": filled.timings(),
        "retention": filled.retention(),
    }


def test_stats_of_an_empty_queue(redis_url: str, prefix: str) -> None:
    result = invoke("stats", *on(redis_url, prefix))
    assert result.exit_code == 0, result.output
    assert stats_table(result.stdout) == {"total": dict.fromkeys(STATES, 0)}
    assert result.stdout.endswith(" (UTC; mean ± stddev (jobs)):\n  no job started today\n")


def test_stats_shows_how_long_jobs_waited_and_ran_today(redis_url: str, queue: Queue) -> None:
    """Real jobs through a worker (shut down: it adds its figures to Redis then)."""
    # A lease no load outlasts: the waits are counted exactly, and a process held up past a
    # short lease (two cores, under coverage) rightly has its jobs claimed, and waited, again.
    worker = Queue(redis_url, prefix=queue.prefix, lease_ms=30_000)
    ids = [queue.create_job("email").save().id for _ in range(3)]
    ids.append(queue.create_job("a slow one").save().id)
    queue.create_job("idle").delay(60_000).save()
    worker.process("email", 2, lambda job: None)
    worker.process("a slow one", lambda job: None)
    wait_for(lambda: all(j.state == "complete" for j in queue.get_jobs(ids)), timeout=10)
    worker.shutdown()
    worker.close()
    today = queue.timings()
    result = invoke("stats", *on(redis_url, queue.prefix))
    assert result.exit_code == 0, result.output
    section = result.stdout.split("\n\n", 1)[1].splitlines()
    assert section[0] == f"wait and run, {today['day']} (UTC; mean ± stddev (jobs)):"
    assert section[1].split() == ["type", "wait", "run"]
    rows = {line[2:].split("  ", 1)[0].strip(): line for line in section[2:]}
    assert list(rows) == ["a slow one", "email"]  # idle: nothing started today
    for job_type, n in (("email", 3), ("a slow one", 1)):
        wait, run = today["types"][job_type]["wait"], today["types"][job_type]["run"]
        assert wait["count"] == run["count"] == n
        expected = [
            f"{timings.duration(s['mean_ms'])} ± {timings.duration(s['stddev_ms'])} ({n})"
            for s in (wait, run)
        ]
        assert re.fullmatch(
            rf"  {re.escape(job_type)} +{re.escape(expected[0])} +{re.escape(expected[1])}",
            rows[job_type],
        ), rows[job_type]


@pytest.mark.parametrize(
    ("ms", "text"),
    [
        (0.04, "0.0ms"),
        (3.25, "3.2ms"),
        (12.4, "12ms"),
        (2400, "2.4s"),
        (185_000, "3m 5s"),
        (7_860_000, "2h 11m"),
    ],
)
def test_stats_durations_are_in_human_units(ms: float, text: str) -> None:
    assert timings.duration(ms) == text


def test_environment_gives_the_redis_url_and_prefix(queue: Queue, redis_url: str) -> None:
    queue.create_job("email").save()
    env = {"KUE_REDIS_URL": redis_url, "KUE_PREFIX": queue.prefix}
    result = invoke("stats", "--json", env=env)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["types"] == {"email": queue.counts_by_type()["email"]}
    assert queue.counts_by_type()["email"]["inactive"] == 1


def test_queue_command_and_app_take_one_prefix_from_the_environment(
    redis_url: str, prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A producer's ``Queue()``, ``kue`` and the HTTP app started the documented way (only
    KUE_PREFIX set) use one queue."""
    monkeypatch.setenv(defaults.PREFIX_ENV, prefix)
    with Queue(redis_url) as producer:
        assert producer.prefix == prefix
        producer.create_job("email").save()
    result = invoke("stats", "--json", "--redis", redis_url)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["types"]["email"]["inactive"] == 1
    app = create_app({"KUE_REDIS_URL": redis_url})
    assert app.extensions["kue"].prefix == prefix
    assert app.extensions["kue"].counts_by_type()["email"]["inactive"] == 1
    app.extensions["kue"].close()


@pytest.mark.parametrize("value", [None, ""])
def test_without_kue_prefix_every_part_uses_the_default(
    value: str | None, redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Unset and empty are one case (as click reads an empty variable)."""
    if value is not None:
        monkeypatch.setenv(defaults.PREFIX_ENV, value)
    with Queue(redis_url) as queue:
        assert queue.prefix == defaults.PREFIX
    with Queue(redis_url, "given") as queue:
        assert queue.prefix == "given"
    assert http_config.load()[defaults.PREFIX_ENV] == defaults.PREFIX
    seen: list[str] = []

    def connect(url: str | None, given: str, **options: Any) -> None:
        seen.append(given)
        raise Unavailable("stop here")

    monkeypatch.setattr(cli_module, "connect", connect)
    assert invoke("stats", "--redis", redis_url).exit_code == 3
    assert seen == [defaults.PREFIX]


# -- Redis URL and prefix -----------------------------------------------------------------
@pytest.mark.parametrize("url", ["foo://x", "redis://host:notaport"])
def test_invalid_redis_url_is_bad_usage(url: str) -> None:
    result = invoke("stats", "--redis", url)
    assert result.exit_code == 2
    assert f"invalid Redis URL {url!r}" in result.stderr


def test_invalid_url_does_not_show_the_password() -> None:
    result = invoke("stats", "--redis", "redis://user:s3cret@host:notaport")
    assert result.exit_code == 2
    assert "invalid Redis URL" in result.stderr
    assert "s3cret" not in result.output


def test_unreachable_url_does_not_show_the_password() -> None:
    result = invoke("stats", "--redis", f"redis://user:s3cret@127.0.0.1:{free_port()}/0")
    assert result.exit_code == 3
    assert "cannot reach Redis at redis://user:***@127.0.0.1:" in result.stderr
    assert "s3cret" not in result.output


@pytest.mark.parametrize(
    "command",
    [
        ["stats"],
        ["worker", "json:dumps", "-t", "email"],
        ["dashboard", "--port", "0"],
        ["dashboard", "--gunicorn", "--port", "0"],
        ["example", "--port", "0"],
    ],
    ids=["stats", "worker", "dashboard", "dashboard-gunicorn", "example"],
)
def test_unreachable_redis_is_unavailable(command: list[str]) -> None:
    url = unreachable()
    result = invoke(*command, "--redis", url)
    assert result.exit_code == 3
    assert f"Error: cannot reach Redis at {url}" in result.stderr
    assert result.stdout == ""


def test_prefix_with_a_space_is_bad_usage(redis_url: str) -> None:
    result = invoke("stats", "--redis", redis_url, "--prefix", "my queue")
    assert result.exit_code == 2
    assert "prefix must be a non-empty string without spaces" in result.stderr


# -- kue worker: the handler --------------------------------------------------------------
def worker(handler: str, *args: str) -> Result:
    """``kue worker`` on an unreachable Redis: a handler that loaded would end in exit 3, so
    exit 2 shows the handler was refused first (and nothing could block)."""
    return invoke("worker", handler, "-t", "email", *args, "--redis", unreachable())


def test_handler_without_a_colon_is_a_module_of_tasks() -> None:
    result = worker("nocolon")
    assert result.exit_code == 2
    assert "cannot import 'nocolon': there is no module 'nocolon'" in result.stderr
    result = worker("json")  # a module, with no tasks
    assert result.exit_code == 2
    assert "json defines no task: define them with @queue.task" in result.stderr


def test_handler_module_missing() -> None:
    name = f"no_such_module_{uuid.uuid4().hex[:8]}"
    result = worker(f"{name}:run")
    assert result.exit_code == 2
    assert f"cannot import {name!r}: there is no module {name!r}" in result.stderr


def test_handler_attribute_missing(module: Callable[[str], str]) -> None:
    name = module("def run(job):\n    return 1\n")
    result = worker(f"{name}:nope")
    assert result.exit_code == 2
    assert f"{name!r} has no attribute 'nope'" in result.stderr


def test_handler_not_callable(module: Callable[[str], str]) -> None:
    name = module("run = 42\n")
    result = worker(f"{name}:run")
    assert result.exit_code == 2
    assert f"{name}:run is not a function: it is of type int" in result.stderr


def test_handler_module_raises_at_import(module: Callable[[str], str]) -> None:
    name = module("raise RuntimeError('kaboom at import')\n")
    result = worker(f"{name}:run")
    assert result.exit_code == 2
    assert f"importing {name!r} failed" in result.stderr
    assert "RuntimeError: kaboom at import" in result.stderr


def test_handler_module_imports_a_missing_package(module: Callable[[str], str]) -> None:
    missing = f"missing_pkg_{uuid.uuid4().hex[:8]}"
    name = module(f"import {missing}\n\ndef run(job):\n    return 1\n")
    result = worker(f"{name}:run")
    assert result.exit_code == 2
    assert f"importing {name!r} failed" in result.stderr
    assert f"No module named {missing!r}" in result.stderr
    assert f"there is no module {name!r}" not in result.stderr


def test_handler_module_with_a_syntax_error(module: Callable[[str], str]) -> None:
    name = module("def run(job:\n    return 1\n")
    result = worker(f"{name}:run")
    assert result.exit_code == 2
    assert f"importing {name!r} failed" in result.stderr
    assert "SyntaxError" in result.stderr


@pytest.mark.parametrize("spec", ["bad-name:run", "mod:1run", "mod:run.", "mod::run"])
def test_handler_names_that_are_not_python_names(spec: str) -> None:
    result = worker(spec)
    assert result.exit_code == 2
    assert f"MODULE:FUNC, dotted Python names, got {spec!r}" in result.stderr


@pytest.mark.parametrize("error", ["AttributeError", "ValueError"])
def test_handler_module_raising_what_a_bad_name_raises(
    module: Callable[[str], str], error: str
) -> None:
    """Raised while the module is imported, these are an import that failed, not a missing
    attribute or a malformed name."""
    name = module(f"raise {error}('at import')\n\ndef run(job):\n    return 1\n")
    result = worker(f"{name}:run")
    assert result.exit_code == 2
    assert f"importing {name!r} failed" in result.stderr
    assert f"{error}: at import" in result.stderr


def test_handler_given_by_a_dotted_path(module: Callable[[str], str]) -> None:
    name = module("class Jobs:\n    @staticmethod\n    def send(job):\n        return 1\n")
    handler = cli_module.load_handler(f"{name}:Jobs.send")
    assert handler(None) == 1
    result = worker(f"{name}:Jobs.nope")
    assert result.exit_code == 2
    assert f"{name!r} has no attribute 'Jobs.nope'" in result.stderr


# -- kue worker: options ------------------------------------------------------------------
def test_worker_needs_a_type() -> None:
    result = invoke("worker", "json:dumps", "--redis", unreachable())
    assert result.exit_code == 2
    assert "give the job types to process with --type (-t)" in result.stderr


def test_worker_concurrency_zero() -> None:
    result = worker("json:dumps", "-n", "0")
    assert result.exit_code == 2
    assert "Invalid value for '-n' / '--concurrency'" in result.stderr


@pytest.mark.parametrize(
    ("option", "value"),
    [("--lease", "0"), ("--lease", "soon"), ("--stall-limit", "-1")],
)
def test_worker_lease_and_stall_limit_out_of_range(option: str, value: str) -> None:
    result = worker("json:dumps", option, value)
    assert result.exit_code == 2
    assert f"Invalid value for '{option}'" in result.stderr


@pytest.mark.parametrize(
    ("job_type", "message"),
    [
        ("bad\ntype", "type must not contain control characters"),
        ("x" * 257, "type must be at most 256 characters"),
    ],
    ids=["newline", "too-long"],
)
def test_worker_invalid_type(job_type: str, message: str, queue: Queue, redis_url: str) -> None:
    result = invoke("worker", "json:dumps", "-t", job_type, *on(redis_url, queue.prefix))
    assert result.exit_code == 2
    assert f"Error: {message}" in result.stderr
    assert queue.workers() == []


@pytest.fixture
def opened(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Queue]]:
    """Every Queue the command makes, closed after the test (their workers stopped)."""
    made: list[Queue] = []

    class Recording(Queue):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            made.append(self)

    monkeypatch.setattr(cli_module, "Queue", Recording)
    yield made
    for q in made:
        q.close()


def test_worker_invalid_second_type_starts_nothing(
    opened: list[Queue], queue: Queue, redis_url: str
) -> None:
    # Every type is checked before any worker starts.
    good = f"good{uuid.uuid4().hex[:8]}"
    result = invoke(
        "worker", "json:dumps", "-t", good, "-t", "bad\ntype", *on(redis_url, queue.prefix)
    )
    assert result.exit_code == 2
    assert "Error: type must not contain control characters" in result.stderr
    assert [t.name for t in threading.enumerate() if t.name.startswith(f"kue-{good}-")] == []
    assert queue.workers() == []


# -- kue dashboard --------------------------------------------------------------------------
def test_dashboard_workers_need_gunicorn(redis_url: str, prefix: str) -> None:
    result = invoke("dashboard", "-w", "2", *on(redis_url, prefix))
    assert result.exit_code == 2
    assert "-w/--workers needs --gunicorn" in result.stderr


def test_dashboard_port_taken_with_gunicorn(taken_port: int, redis_url: str, prefix: str) -> None:
    result = invoke("dashboard", "--gunicorn", "--port", str(taken_port), *on(redis_url, prefix))
    assert result.exit_code == 3
    assert f"Error: cannot listen on 127.0.0.1:{taken_port}: Address already in use" in (
        result.stderr
    )
    assert result.stdout == ""


def test_dashboard_port_taken_dev_server(taken_port: int, redis_url: str, prefix: str) -> None:
    result = invoke("dashboard", "--port", str(taken_port), *on(redis_url, prefix))
    assert result.exit_code == 3, result.output
    assert f"Error: cannot listen on 127.0.0.1:{taken_port}" in result.stderr


def test_dashboard_invalid_auth_hides_the_value(
    taken_port: int, redis_url: str, prefix: str
) -> None:
    # The port is taken too, so that a setting wrongly accepted ends the command (exit 1 or 3)
    # rather than serving.
    env = {"KUE_AUTH": "basic:onlyuser"}
    result = invoke("dashboard", "--port", str(taken_port), *on(redis_url, prefix), env=env)
    assert result.exit_code == 2
    assert "KUE_AUTH must be" in result.stderr
    assert "onlyuser" not in result.output


# -- kue example ----------------------------------------------------------------------------
def test_example_port_taken_creates_nothing(taken_port: int, queue: Queue, redis_url: str) -> None:
    result = invoke("example", "--port", str(taken_port), *on(redis_url, queue.prefix))
    assert queue.types() == []
    assert queue.counts() == dict.fromkeys(STATES, 0)
    assert queue.workers() == []
    assert result.exit_code == 3, result.output
    assert f"Error: cannot listen on 127.0.0.1:{taken_port}" in result.stderr


# -- version and help -----------------------------------------------------------------------
def test_version() -> None:
    result = invoke("--version")
    assert result.exit_code == 0
    assert result.stdout.startswith("kue, version ")
    assert result.stdout.split()[-1][0].isdigit()


def test_help_lists_the_commands_and_exit_codes() -> None:
    result = invoke("--help")
    assert result.exit_code == 0
    commands = result.stdout.split("Commands:")[1].split("Exit codes:")[0]
    assert [line.split()[0] for line in commands.strip().splitlines()] == [
        "audit",
        "bulk",
        "cancel",
        "dashboard",
        "deps",
        "doctor",
        "example",
        "flow",
        "groups",
        "job",
        "keys",
        "limit",
        "limits",
        "move",
        "only",
        "pause",
        "remove",
        "resume",
        "retention",
        "rules",
        "runs",
        "schedule",
        "schedules",
        "search",
        "stats",
        "stop-worker",
        "tag",
        "untag",
        "worker",
    ]
    codes = result.stdout.split("Exit codes:")[1]
    # One line per code; longer explanations go on in lines indented further.
    assert re.findall(r"^ {0,4}(\S+) ", codes, re.MULTILINE) == ["0", "1", "2", "3"]
    assert "bad usage" in codes and "unavailable" in codes
