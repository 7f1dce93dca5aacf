"""Fixtures for the Kue interoperability tests: Node Kue 0.11.6 processes on the test Redis.

``tests/interop/node`` pins kue 0.11.6 (``package.json``, ``package-lock.json``); when its
``node_modules`` lacks kue, the session installs it once with ``npm ci``. Each Node process
runs ``node/kue_driver.js``: it takes commands as JSON lines on stdin and prints replies and
Kue's events as JSON lines on stdout (see the header of that file).
"""

from __future__ import annotations

import fcntl
import itertools
import json
import os
import queue as queue_module
import shutil
import subprocess
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

NODE_DIR = Path(__file__).parent / "node"
DRIVER = NODE_DIR / "kue_driver.js"
KUE_VERSION = "0.11.6"
#: Seconds `npm ci` may take to install kue and its dependencies.
NPM_CI_TIMEOUT = 300
#: Seconds a Node process may take to start and subscribe to the events channel.
START_TIMEOUT = 20.0
#: Seconds a command or an awaited event may take.
REPLY_TIMEOUT = 10.0

Message = dict[str, Any]


def _installed_kue() -> str | None:
    try:
        manifest = json.loads((NODE_DIR / "node_modules" / "kue" / "package.json").read_text())
    except (OSError, ValueError):
        return None
    version = manifest.get("version")
    return version if isinstance(version, str) else None


@pytest.fixture(scope="session")
def kue_installed() -> Path:
    """The driver directory, with kue 0.11.6 installed (by ``npm ci`` when it is missing)."""
    npm = shutil.which("npm")
    assert npm is not None, "npm is needed to install kue"
    # Another test session may be installing at the same time: one at a time.
    with open(NODE_DIR / "package.json") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _installed_kue() is None:
            try:
                done = subprocess.run(
                    [npm, "ci", "--prefix", str(NODE_DIR), "--no-audit", "--no-fund"],
                    capture_output=True,
                    text=True,
                    timeout=NPM_CI_TIMEOUT,
                )
            except subprocess.TimeoutExpired:
                pytest.fail(f"npm ci in {NODE_DIR} took more than {NPM_CI_TIMEOUT} s")
            if done.returncode != 0:
                pytest.fail(f"npm ci in {NODE_DIR} failed:\n{done.stdout}\n{done.stderr}")
    version = _installed_kue()
    assert version == KUE_VERSION, f"kue {version} is installed, the tests need {KUE_VERSION}"
    return NODE_DIR


def driver_args(redis_url: str, prefix: str) -> tuple[list[str], dict[str, str]]:
    """The driver's options for this Redis URL and prefix, and its environment (password)."""
    url = urllib.parse.urlsplit(redis_url)
    env = dict(os.environ)
    if url.password:
        env["KUE_INTEROP_REDIS_PASSWORD"] = urllib.parse.unquote(url.password)
    query = urllib.parse.parse_qs(url.query)
    if url.scheme == "unix":
        args = ["--socket", url.path, "--db", query.get("db", ["0"])[0]]
    elif url.scheme == "redis":
        db = url.path.strip("/") or query.get("db", ["0"])[0]
        args = ["--host", url.hostname or "127.0.0.1", "--port", str(url.port or 6379)]
        args += ["--db", db]
    else:
        pytest.skip(f"Node Kue cannot connect to a {url.scheme}:// Redis")
    return [*args, "--prefix", prefix], env


class NodeKue:
    """One Node process running Kue 0.11.6 on the given Redis and prefix."""

    def __init__(self, node_dir: Path, redis_url: str, prefix: str, stderr: Path) -> None:
        args, env = driver_args(redis_url, prefix)
        self.stderr_path = stderr
        self._stderr = open(stderr, "wb")  # noqa: SIM115 (closed in close())
        self.proc = subprocess.Popen(
            ["node", str(DRIVER), *args],
            cwd=node_dir,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            encoding="utf-8",
            bufsize=1,
        )
        self._lines: queue_module.Queue[Message | None] = queue_module.Queue()
        #: Every message read so far (replies and events), in order.
        self.seen: list[Message] = []
        self._req = itertools.count(1)
        self._reader = threading.Thread(target=self._read, name="node-kue-reader", daemon=True)
        self._reader.start()

    def ready(self) -> NodeKue:
        """Wait until Kue has subscribed to the events channel: it misses no event after."""
        self.expect(lambda m: m["event"] == "ready", START_TIMEOUT)
        return self

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                message = json.loads(line)
            except ValueError:
                message = {"event": "unparsed", "line": line}
            self._lines.put(message)
        self._lines.put(None)  # the process closed its stdout: it is gone

    def _stderr_tail(self) -> str:
        try:
            text = self.stderr_path.read_text(errors="replace")
        except OSError:
            return ""
        lines = [ln for ln in text.splitlines() if "circular dependency" not in ln]
        return "\n".join(lines[-30:])

    def expect(self, match: Callable[[Message], bool], timeout: float = REPLY_TIMEOUT) -> Message:
        """The first message (already seen or still to come) that ``match`` accepts."""
        for seen in self.seen:
            if match(seen):
                return seen
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            try:
                message = self._lines.get(timeout=max(0.0, left))
            except queue_module.Empty:
                raise AssertionError(
                    f"Node Kue gave no matching message within {timeout} s; it said: "
                    f"{self.seen[-20:]}\nstderr:\n{self._stderr_tail()}"
                ) from None
            if message is None:
                self._lines.put(None)  # keep the end marker for later waits
                raise AssertionError(
                    f"Node Kue closed its output (exit code {self.proc.poll()}); it said: "
                    f"{self.seen[-20:]}\nstderr:\n{self._stderr_tail()}"
                )
            self.seen.append(message)
            if match(message):
                return message

    def _drain(self) -> None:
        """Move the messages read so far into ``seen``."""
        while True:
            try:
                message = self._lines.get_nowait()
            except queue_module.Empty:
                return
            if message is None:
                self._lines.put(None)
                return
            self.seen.append(message)

    def event(
        self, name: str, job_id: int, scope: str = "job", timeout: float = REPLY_TIMEOUT
    ) -> Message:
        """The first event ``name`` Kue gave for job ``job_id`` (``scope``: job, queue, worker)."""
        return self.expect(
            lambda m: m["event"] == name and m.get("scope") == scope and m.get("id") == job_id,
            timeout,
        )

    def events(self, job_id: int, scope: str = "job") -> list[tuple[str, list[Any]]]:
        """(name, args) of every event of job ``job_id`` Kue gave so far, in order."""
        self._drain()
        return [
            (m["event"], m.get("args", []))
            for m in self.seen
            if m.get("scope") == scope and m.get("id") == job_id
        ]

    def request(self, cmd: str, **fields: Any) -> Message:
        """Send one command; its reply (AssertionError if Kue answered with an error)."""
        req = next(self._req)
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"req": req, "cmd": cmd, **fields}) + "\n")
        self.proc.stdin.flush()
        reply = self.expect(lambda m: m.get("req") == req)
        assert reply["event"] == "reply", f"Node Kue refused {cmd}: {reply}"
        return reply

    def close(self) -> None:
        """Ask the process to quit, and kill it if it has not within a few seconds."""
        if self.proc.poll() is None:
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.write(json.dumps({"req": 0, "cmd": "quit"}) + "\n")
                self.proc.stdin.close()
            except OSError:
                pass
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)
        self._reader.join(timeout=5)
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        self._stderr.close()


@pytest.fixture
def node_kue(
    kue_installed: Path, redis_url: str, prefix: str, tmp_path: Path
) -> Iterator[Callable[[], NodeKue]]:
    """Start Node Kue processes on the test's Redis and prefix: ``node_kue()`` starts one,
    ready (subscribed to the events channel). Every process is stopped after the test, killed
    if it does not quit."""
    started: list[NodeKue] = []

    def start() -> NodeKue:
        process = NodeKue(kue_installed, redis_url, prefix, tmp_path / f"node-{len(started)}.err")
        started.append(process)
        return process.ready()

    yield start
    errors: list[Exception] = []
    for process in started:
        try:
            process.close()
        except Exception as e:  # the others are still stopped; the first error is raised
            errors.append(e)
        finally:
            if process.proc.poll() is None:
                process.proc.kill()
                process.proc.wait(timeout=5)
    if errors:
        raise errors[0]
