"""The embedded server under faults, with real processes: SIGKILLed under its users, it is
started again by one of them from its append-only file, and every client reconnects; its
users SIGKILLed, it shuts itself down (its watchdog)."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
import redis

from kue_core import Queue, defaults
from kue_core.store import embedded, embedded_watch
from tests.conftest import free_port, never, redis_servers_in, wait_for
from tests.integration.test_embedded import _env, _kill_servers_in, _read

pytestmark = pytest.mark.slow

WORKER = textwrap.dedent(
    """
    import logging, os, sys, time
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    from kue_core import Queue

    def handle(job):
        if job.data.get("hold"):  # until the test says go: the job is active meanwhile
            while not os.path.exists("go"):
                time.sleep(0.01)
        return {"by": sys.argv[1]}

    queue = Queue()
    queue.process(sys.argv[1], 2, handle)
    queue.run(ready=lambda: print("ready", flush=True))
    """
)


class Worker:
    """A worker process on the embedded server of ``cwd``, serving ``job_type``; its log in
    a file."""

    def __init__(self, cwd: Path, job_type: str) -> None:
        self.log = cwd / f"{job_type}.log"
        with self.log.open("w") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-c", WORKER, job_type],
                cwd=cwd,
                env=_env(),
                stdout=subprocess.PIPE,
                stderr=log,
                text=True,
            )
        assert self.proc.stdout is not None
        assert self.proc.stdout.readline() == "ready\n", self.log.read_text()

    def lines(self) -> list[str]:
        return self.log.read_text().splitlines()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def _server_pid(folder: Path) -> int | None:
    try:
        return int((folder / "server.pid").read_text())
    except (OSError, ValueError):
        return None


def _client(folder: Path) -> redis.Redis:
    """A client of the test's own that never starts a server: only the processes under test
    may (``client=`` keeps Queue from making one that would)."""
    return redis.Redis(unix_socket_path=str(folder / "server.sock"), decode_responses=True)


def _state(client: redis.Redis, job_id: int) -> str | None:
    """The job's state, or None while no server answers."""
    with Queue(client=client) as q:
        try:
            return q.get_job(job_id).state
        except redis.ConnectionError:
            return None


def _persisted(client: redis.Redis) -> None:
    """Once the server's append-only file has every write so far (fsync each second)."""
    wait_for(lambda: client.info("persistence")["aof_buffer_length"] == 0, timeout=10)


def _kill(pid: int) -> None:
    os.kill(pid, signal.SIGKILL)


def _watchdogs(folder: Path) -> list[int]:
    found = []
    for p in psutil.process_iter(["cmdline"]):
        cmdline = p.info["cmdline"] or []
        if any(a.endswith("embedded_watch.py") for a in cmdline) and str(folder) in cmdline:
            found.append(p.pid)
    return found


@pytest.fixture
def folder(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path / ".kue"
    _kill_servers_in(tmp_path)
    for pid in _watchdogs(tmp_path / ".kue"):
        with contextlib.suppress(psutil.NoSuchProcess):
            psutil.Process(pid).kill()


def test_workers_start_a_killed_server_again_and_lose_nothing(tmp_path: Path, folder: Path) -> None:
    """Two workers share the folder's server; it is SIGKILLed with a job active and another
    waiting. One of them starts it again from its append-only file (one server, never two),
    both reconnect, every job saved before and after completes, and each log says so in a
    line or two, not a line a try, then that Redis answers again."""
    email, sms = Worker(tmp_path, "email"), Worker(tmp_path, "sms")
    client = _client(folder)
    try:
        with Queue(client=client) as q:
            held = q.create_job("email", {"hold": True}).save()
            waiting = q.create_job("sms", {}).delay(1500).save()  # due after the kill
            wait_for(lambda: _state(client, held.id) == "active")
            _persisted(client)
            old = _server_pid(folder)
            assert old is not None and redis_servers_in(folder) == [old]
            killed_at = time.time()
            _kill(old)
            new = wait_for(lambda: (p := _server_pid(folder)) != old and p)
            wait_for(lambda: _state(client, held.id) is not None)
            restarted_in = (folder / "server.pid").stat().st_mtime - killed_at
            assert redis_servers_in(folder) == [new]
            assert q.get_job(held.id).state == "active"  # nothing lost, nothing moved
            (tmp_path / "go").touch()
            wait_for(lambda: _state(client, held.id) == "complete", timeout=30)
            wait_for(lambda: _state(client, waiting.id) == "complete", timeout=30)
            after = [q.create_job(t, {}).save() for t in ("email", "sms")]
            for job in after:
                wait_for(lambda job=job: _state(client, job.id) == "complete", timeout=30)
            assert q.get_job(held.id).result == {"by": "email"}
            assert redis_servers_in(folder) == [new]  # no second server, ever
        for worker in (email, sms):
            wait_for(lambda w=worker: "Redis answers again" in w.log.read_text(), timeout=15)
            said = [line for line in worker.lines() if "Redis unreachable" in line]
            assert 1 <= len(said) <= 3, worker.lines()
            assert len(worker.lines()) <= 5, worker.lines()
            assert "Redis answers again (after " in worker.lines()[-1], worker.lines()
        print(f"restarted {restarted_in:.2f} s after the kill;", *email.lines(), sep="\n")
    finally:
        client.close()
        email.stop()
        sms.stop()
    wait_for(lambda: not redis_servers_in(folder), timeout=15)  # the last out shut it down


def test_a_server_whose_users_were_killed_shuts_itself_down(tmp_path: Path, folder: Path) -> None:
    """The process that started it is SIGKILLed and no other uses it: its watchdog shuts it
    down cleanly (the job saved is there for the next process), and exits too. While its
    user lived, it stayed up."""
    worker = Worker(tmp_path, "email")
    client = _client(folder)
    try:
        with Queue(client=client) as q:
            job = q.create_job("sms", {}).save()  # a type nobody serves: it stays
        client.close()  # the test's own connection is not a user
        (server,) = redis_servers_in(folder)
        assert len(_watchdogs(folder)) == 1
        assert never(lambda: not embedded._alive(server), defaults.EMBEDDED_IDLE + 1)
        worker.proc.kill()
        worker.proc.wait(timeout=30)
        killed_at = time.monotonic()
        wait_for(lambda: not embedded._alive(server), timeout=20)
        gone_in = time.monotonic() - killed_at
        wait_for(lambda: not _watchdogs(folder), timeout=10)
    finally:
        worker.stop()
    assert not (folder / "server.pid").exists()  # a clean shutdown removes it
    seen, _ = _read(tmp_path, job.id)
    assert seen["type"] == "sms" and seen["state"] == "inactive"
    print(f"the server exited {gone_in:.2f} s after its only user was killed")


def test_a_server_whose_folder_was_removed_shuts_down_once_its_users_are_gone(
    tmp_path: Path, folder: Path
) -> None:
    """``rm -rf .kue`` under a running worker (a user starting afresh): nobody can find the
    server any more and its data is gone, so once the worker has stopped, its watchdog shuts
    it down without saving, rather than leave it running with no owner. (A connection the
    worker opens meanwhile starts a server in a new folder, which its stop shuts down.)"""
    worker = Worker(tmp_path, "email")
    (server,) = redis_servers_in(folder)
    try:
        assert len(_watchdogs(folder)) == 1
        shutil.rmtree(folder)
        assert never(lambda: not embedded._alive(server), defaults.EMBEDDED_IDLE + 1)
        worker.stop()  # gracefully: its own shutdown finds no folder, and leaves the server
        stopped_at = time.monotonic()
        wait_for(lambda: not embedded._alive(server), timeout=20)
        gone_in = time.monotonic() - stopped_at
        wait_for(lambda: not redis_servers_in(folder), timeout=10)  # nor a new one
        wait_for(lambda: not _watchdogs(folder), timeout=10)
    finally:
        worker.stop()
        with contextlib.suppress(psutil.NoSuchProcess):
            psutil.Process(server).kill()
    print(f"the server exited {gone_in:.2f} s after its last user stopped")


SERVE = textwrap.dedent(
    """
    import sys
    from werkzeug.serving import make_server
    from kue_http import create_app

    server = make_server("127.0.0.1", int(sys.argv[1]), create_app(), threaded=True)
    print("ready", flush=True)
    server.serve_forever()
    """
)


def _get(url: str) -> tuple[int, dict]:
    try:
        with urllib.request.urlopen(url, timeout=10) as res:
            return res.status, json.loads(res.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_the_dashboard_answers_again_after_the_server_is_killed(
    tmp_path: Path, folder: Path
) -> None:
    port = free_port()
    app = subprocess.Popen(
        [sys.executable, "-c", SERVE, str(port)],
        cwd=tmp_path,
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    client = _client(folder)
    try:
        assert app.stdout is not None and app.stdout.readline() == "ready\n"
        base = f"http://127.0.0.1:{port}"
        assert _get(f"{base}/api/stats")[0] == 200  # it started the server
        with Queue(client=client) as q:
            job = q.create_job("email", {"to": "a@b.c"}).save()
            _persisted(client)
        old = _server_pid(folder)
        assert old is not None
        _kill(old)
        wait_for(lambda: not embedded._alive(old))
        tries = []
        wait_for(lambda: tries.append(_get(f"{base}/api/job/{job.id}")) or tries[-1][0] == 200)
        assert tries[-1][1]["data"] == {"to": "a@b.c"}
        assert len(tries) <= 2, tries  # the first request after the kill, or the next
        assert _server_pid(folder) not in (None, old) and len(redis_servers_in(folder)) == 1
    finally:
        client.close()
        app.terminate()
        app.wait(timeout=30)


BOTH = textwrap.dedent(
    """
    import asyncio, os, signal, socket, time
    import redis
    from kue_core import Queue
    from kue_core.aio import AsyncQueue

    def kill_server():
        # Once its append-only file has every job saved: fsync each second, and a write
        # put off while the disk is busy (up to 2 s) is lost to a SIGKILL, as documented.
        r = redis.Redis(unix_socket_path=".kue/server.sock")
        deadline = time.monotonic() + 10
        while r.info("persistence")["aof_buffer_length"]:
            if time.monotonic() > deadline:
                raise SystemExit("the append-only file did not catch up")
            time.sleep(0.01)
        r.close()
        pid = int(open(".kue/server.pid").read())
        os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:  # until its socket refuses: it is gone
            with socket.socket(socket.AF_UNIX) as s:
                try:
                    s.connect(".kue/server.sock")
                except ConnectionRefusedError:
                    return pid
            time.sleep(0.01)
        raise SystemExit("the server outlived its SIGKILL")

    async def main():
        queue = Queue()
        first = queue.create_job("email", {"n": 1}).save()
        aq = AsyncQueue()
        second = await aq.create_job("email", {"n": 2}).save()
        for step in range(2):
            killed = kill_server()
            if step == 0:
                third = queue.create_job("email", {"n": 3}).save()
            else:
                third = await aq.create_job("email", {"n": 3}).save()
            new = int(open(".kue/server.pid").read())
            assert new != killed
            found = [(await aq.get_job(j.id)).data["n"] for j in (first, second, third)]
            print(step, found, [queue.get_job(j.id).data["n"] for j in (first, second, third)])
        await aq.close()

    asyncio.run(main())
    """
)


def test_both_clients_of_a_process_reconnect_to_a_restarted_server(
    tmp_path: Path, folder: Path
) -> None:
    """The server killed under a process's blocking and asyncio clients: the next call of
    either starts it again, and both go on with every job saved before."""
    done = subprocess.run(
        [sys.executable, "-c", BOTH],
        cwd=tmp_path,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "0 [1, 2, 3] [1, 2, 3]\n1 [1, 2, 3] [1, 2, 3]\n"
    assert done.stderr == ""
    wait_for(lambda: not redis_servers_in(folder), timeout=15)  # it shut it down at exit


def test_the_watchdog_waits_for_the_last_user_then_shuts_the_server_down(
    tmp_path: Path, folder: Path
) -> None:
    """The watchdog's loop, run in this process on a short idle time: it leaves a server
    with a user alone, and shuts it down, under the folder's lock, once the last one is gone
    for that long (the server's own watchdog, in its process, would too: it is left out)."""
    sock = embedded.start(folder)
    server = _server_pid(folder)
    assert server is not None
    link = embedded_watch.Link(sock)
    link.call("CLIENT", "SETNAME", embedded_watch.NAME)
    user = redis.Redis(unix_socket_path=sock)
    user.ping()
    assert link.others() == 1  # the user: neither watchdog counts
    watcher = threading.Thread(target=embedded_watch.watch, args=(link, str(folder), server, 0.3))
    watcher.start()
    try:
        assert never(lambda: not watcher.is_alive(), 1.0)  # a user: it stays up
        user.close()
        watcher.join(timeout=15)
        assert not watcher.is_alive() and not embedded._alive(server)
        assert not (folder / "server.pid").exists()  # SHUTDOWN SAVE, to the end
    finally:
        user.close()
        link.sock.close()
