"""The embedded Redis: shared by processes that use the default, and persistent."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from tests.conftest import redis_servers_in

SAVE = """
import sys
from kue_core import Queue
job = Queue().create_job("email", {"to": "a@b.c"}).priority("high").save()
print(job.id, Queue().client.connection_pool.connection_kwargs["path"], flush=True)
sys.stdin.readline()   # stay up until the test says so
"""

READ = """
import json
from kue_core import Queue
q = Queue()
print(json.dumps([q.get_job(int(__import__("sys").argv[1])).to_dict(),
                  q.client.connection_pool.connection_kwargs["path"]]))
"""


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("KUE_REDIS_URL", None)
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2])
    return env


def _read(cwd: Path, job_id: int) -> tuple[dict, str]:
    out = subprocess.run(
        [sys.executable, "-c", READ, str(job_id)],
        cwd=cwd,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    data, path = json.loads(out)
    return data, path


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
        seen, path = _read(tmp_path, job_id)
        assert path == socket_path
        assert seen["type"] == "email" and seen["priority"] == -10 and seen["state"] == "inactive"
        assert (tmp_path / ".kue").is_dir()
        producer.stdin.write("\n")
        producer.stdin.flush()
        assert producer.wait(timeout=30) == 0
    finally:
        if producer.poll() is None:
            producer.kill()
    # Everyone left: the server is gone; a new process restarts it from the saved data.
    again, path = _read(tmp_path, job_id)
    assert again == seen
    for pid in redis_servers_in(tmp_path / ".kue"):  # nothing may outlive the test
        psutil.Process(pid).kill()
