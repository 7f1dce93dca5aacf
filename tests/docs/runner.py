"""Running a page's blocks as a reader would: in order, in one empty folder, each run block a
fresh process (``python`` for a python block, ``bash -e`` for a shell one) with the folder as
its working directory, and what it prints compared with the page's ``output`` block.

An output block may write ``...`` for any text (doctest's ELLIPSIS: ids, times, durations);
trailing spaces and blank lines at the end are not compared. A console block marked ``run`` is
a transcript: each ``$`` command runs in turn and prints what the lines after it show.

The pages show the dashboard on port 3000; the tests run in parallel, so each page has a free
port of its own: ``127.0.0.1:3000`` and ``localhost:3000`` in what a block runs or saves and in
what it prints stand for it, and ``kue dashboard`` and ``kue example`` take it
(``KUE_DASHBOARD_PORT``).
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import replace
from pathlib import Path

from tests.docs.markdown import Block, transcript
from tests.docs.pages import ROOT

#: How long one block may take (a run-until or background block: to print its text).
BLOCK_TIMEOUT = 60.0
#: How long a transcript's command is run again while what it prints is not yet what the page
#: shows: the figures a worker adds to Redis every second (``kue stats``'s wait and run) may
#: not be in yet when a command runs right after the jobs ended (as a reader's would be).
SETTLE_S = 10.0
#: How long a program has to exit once it got SIGINT.
STOP_TIMEOUT = 30.0
#: The port the pages show the dashboard on, and what ``kue dashboard`` prints once it serves.
PAGE_PORT = 3000
DASHBOARD_UP = "kue dashboard: http"
_PAGE_ADDRESS = re.compile(rf"\b(127\.0\.0\.1|localhost):{PAGE_PORT}(?!\d)")


class ExampleFailed(AssertionError):
    """A block that failed: the message names ``page:line`` and shows what it printed."""


def matches(expected: str, actual: str) -> bool:
    """Whether ``actual`` is ``expected``, where ``...`` in ``expected`` stands for any text
    (across lines too)."""
    pattern = ".*?".join(re.escape(part) for part in _tidy(expected).split("..."))
    return re.fullmatch(pattern, _tidy(actual), re.S) is not None


def _tidy(text: str) -> str:
    return "\n".join(line.rstrip() for line in text.splitlines()).strip("\n")


def _ctrl_c_as_in_a_terminal() -> None:
    """A process started while this one ignores SIGINT ignores it too (it was started in the
    background by a shell, or a test left it so): then a block stopped with Ctrl-C never
    stops (once in CI: "still running after 30 s", its output 'up' and nothing on stderr).
    Caught here, the blocks' processes get SIGINT's default, as in a terminal."""
    main = threading.current_thread() is threading.main_thread()
    if main and signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


class Proc:
    """A block's process, its output read as it comes (so that a text can be waited for)."""

    def __init__(self, block: Block, argv: list[str], cwd: Path, env: dict[str, str]) -> None:
        self.block = block
        _ctrl_c_as_in_a_terminal()
        # A session of its own: SIGINT goes to its process group, as Ctrl-C in a terminal.
        self.popen = subprocess.Popen(
            argv,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        self.out: list[bytes] = []
        self.err: list[bytes] = []
        self._readers = [
            threading.Thread(target=self._read, args=(self.popen.stdout, self.out), daemon=True),
            threading.Thread(target=self._read, args=(self.popen.stderr, self.err), daemon=True),
        ]
        for reader in self._readers:
            reader.start()

    @staticmethod
    def _read(stream: object, into: list[bytes]) -> None:
        for chunk in iter(lambda: stream.read1(65536), b""):  # type: ignore[attr-defined]
            into.append(chunk)

    @property
    def stdout(self) -> str:
        return b"".join(self.out).decode(errors="replace")

    @property
    def stderr(self) -> str:
        return b"".join(self.err).decode(errors="replace")

    def failed(self, why: str) -> ExampleFailed:
        return ExampleFailed(
            f"{self.block.where}: {why}\n--- the block ---\n{self.block.code}"
            f"--- stdout ---\n{self.stdout}--- stderr ---\n{self.stderr}"
        )

    def wait(self, timeout: float) -> int:
        try:
            code = self.popen.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise self.failed(f"still running after {timeout:g} s") from None
        for reader in self._readers:
            reader.join(timeout=5)
        return code

    def wait_for_text(self, text: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while text not in self.stdout and text not in self.stderr:
            if self.popen.poll() is not None:
                self.wait(5)
                raise self.failed(f"exited ({self.popen.returncode}) before printing {text!r}")
            if time.monotonic() > deadline:
                self.kill()
                raise self.failed(f"did not print {text!r} within {timeout:g} s")
            time.sleep(0.02)

    def interrupt(self) -> None:
        """Ctrl-C, and the process must exit with status 0."""
        with suppress(ProcessLookupError):
            os.killpg(self.popen.pid, signal.SIGINT)
        code = self.wait(STOP_TIMEOUT)
        if code != 0:
            raise self.failed(f"exited with status {code} after Ctrl-C (SIGINT)")

    def kill(self) -> None:
        with suppress(ProcessLookupError):
            os.killpg(self.popen.pid, signal.SIGKILL)
        self.popen.wait()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def environment(redis_url: str, folder: Path, port: int | None = None) -> dict[str, str]:
    """A terminal's: this Python's ``bin`` first on PATH (``python``, ``kue``), no kue
    setting but the Redis and the page's port (and the suite's: no history sampling), the
    folder and the checkout importable."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("KUE_")}
    env["KUE_REDIS_URL"] = redis_url
    env["KUE_DASHBOARD_PORT"] = env["KUE_EXAMPLE_PORT"] = str(port or free_port())
    env["KUE_HISTORY_SAMPLE"] = os.environ.get("KUE_HISTORY_SAMPLE", "0")
    env["PYTHONUNBUFFERED"] = "1"
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    # The checkout after the folder: what an editable install imports, and what mypy (which
    # cannot follow an editable install's import hook) then finds as an installed package.
    path = [str(folder), str(ROOT), *filter(None, env.get("PYTHONPATH", "").split(os.pathsep))]
    env["PYTHONPATH"] = os.pathsep.join(path)
    return env


@contextmanager
def page_runner(folder: Path, scripts: Path, env: dict[str, str]) -> Iterator[PageRunner]:
    """A runner for one page; the page's background programs are stopped when it ends (with
    Ctrl-C, checked, when the page passed; killed when it did not)."""
    runner = PageRunner(folder, scripts, env)
    try:
        yield runner
        for proc in reversed(runner.background):
            proc.interrupt()
    finally:
        for proc in runner.background:
            proc.kill()


class PageRunner:
    def __init__(self, folder: Path, scripts: Path, env: dict[str, str]) -> None:
        self.folder = folder
        self.scripts = scripts
        self.env = env
        self.background: list[Proc] = []
        self.dashboard: Proc | None = None

    def local(self, text: str) -> str:
        """``text`` with the pages' port 3000 the page's own."""
        port = self.env["KUE_DASHBOARD_PORT"]
        return _PAGE_ADDRESS.sub(lambda m: f"{m[1]}:{port}", text)

    def run(self, blocks: list[Block]) -> int:
        """Run the page's blocks in order; the number of blocks run."""
        ran = 0
        last: Proc | None = None
        for block in blocks:
            if block.marker == "file":
                target = self.folder / block.value
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(self.local(block.code), encoding="utf-8")
            elif block.marker == "output":
                assert last is not None  # the parser checked it
                if not matches(self.local(block.code), last.stdout):
                    raise last.failed(
                        f"printed something else than {block.where} shows:\n{block.code}"
                    )
            elif block.runs:
                if block.marker == "run-with-dashboard":
                    self.start_dashboard(block)
                ran += 1
                if block.is_transcript:
                    self.replay(block)
                    continue
                last = self.start(block)
                if block.marker == "background":
                    self.background.append(last)
                    last.wait_for_text(block.value, BLOCK_TIMEOUT)
                elif block.marker == "run-until":
                    try:
                        last.wait_for_text(block.value, BLOCK_TIMEOUT)
                        last.interrupt()
                    finally:
                        last.kill()
                else:
                    code = last.wait(BLOCK_TIMEOUT)
                    if code != 0:
                        raise last.failed(f"exited with status {code}")
        return ran

    def replay(self, block: Block) -> None:
        """A console transcript: each command in turn, what it prints compared with the lines
        the page shows after it. A command whose output the page shows may exit with any
        status (``kue doctor`` says 1 for problems found: what it prints is the check); one
        shown without output must exit 0. One whose output differs runs again, for
        ``SETTLE_S`` at most, until it prints what the page shows."""
        for command in transcript(block):
            step = replace(block, line=command.line, code=command.command)
            settled = time.monotonic() + SETTLE_S
            proc = self.start(step)
            code = proc.wait(BLOCK_TIMEOUT)
            while command.output and not matches(self.local(command.output), proc.stdout):
                if time.monotonic() > settled:
                    shown = command.output
                    raise proc.failed(f"printed something else than the page shows:\n{shown}")
                time.sleep(0.2)  # (a process per look: no busier than that)
                proc = self.start(step)
                code = proc.wait(BLOCK_TIMEOUT)
            if not command.output and code != 0:
                raise proc.failed(f"exited with status {code}")

    def start_dashboard(self, block: Block) -> None:
        """A ``kue dashboard`` on the page's port, in the background until the page ends."""
        if self.dashboard is None:
            serve = replace(block, code="kue dashboard\n", marker="background")
            self.dashboard = Proc(serve, ["kue", "dashboard"], self.folder, self.env)
            self.background.append(self.dashboard)
            self.dashboard.wait_for_text(DASHBOARD_UP, BLOCK_TIMEOUT)

    def start(self, block: Block) -> Proc:
        if block.is_python:
            # Padded so that a traceback's line numbers are the page's.
            name = re.sub(r"\W", "_", block.page.removesuffix(".md"))
            script = self.scripts / f"{name}_line{block.line}.py"
            script.write_text("\n" * block.line + self.local(block.code), encoding="utf-8")
            argv = [sys.executable, str(script)]
        else:
            argv = ["bash", "-e", "-o", "pipefail", "-c", self.local(block.code)]
        return Proc(block, argv, self.folder, self.env)
