"""A ``kue`` command run as a real process, with its output read line by line."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: The console script ``pip install`` made beside this interpreter.
KUE = Path(sys.executable).parent / "kue"


class Kue:
    """``kue ARGS`` in a process group of its own (as a shell runs it), from the checkout."""

    def __init__(
        self, *args: str, env: dict[str, str] | None = None, cwd: Path = ROOT, exe: Path = KUE
    ) -> None:
        assert exe.exists(), f"{exe} is missing: pip install -e '.[test]' makes it"
        base = {k: v for k, v in os.environ.items() if not k.startswith("KUE_")}
        self.proc = subprocess.Popen(
            [str(exe), *args],
            cwd=cwd,
            env={**base, **(env or {})},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        self.out: list[str] = []
        self.err: list[str] = []
        self._readers = [
            threading.Thread(target=self._read, args=(stream, lines), daemon=True)
            for stream, lines in ((self.proc.stdout, self.out), (self.proc.stderr, self.err))
        ]
        for reader in self._readers:
            reader.start()

    @staticmethod
    def _read(stream: object, lines: list[str]) -> None:
        for line in stream:  # type: ignore[attr-defined]
            lines.append(line.rstrip("\n"))

    @property
    def output(self) -> str:
        return "\n".join(self.out + self.err)

    def wait_for_line(self, pattern: str, timeout: float = 30) -> re.Match[str]:
        """The first line of stdout or stderr matching ``pattern``."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in self.out + self.err:
                found = re.search(pattern, line)
                if found:
                    return found
            if self.proc.poll() is not None:
                break
            time.sleep(0.02)
        raise AssertionError(f"no line matching {pattern!r}; output so far:\n{self.output}")

    def send(self, sig: signal.Signals) -> None:
        """``sig`` to the command's process, as ``kill`` or Ctrl-C in a terminal would."""
        os.kill(self.proc.pid, sig)

    def ctrl_c(self) -> None:
        """SIGINT to the whole process group, as Ctrl-C in a terminal sends it."""
        os.killpg(self.proc.pid, signal.SIGINT)

    def wait(self, timeout: float = 30) -> int:
        code = self.proc.wait(timeout)
        for reader in self._readers:
            reader.join(5)
        return code

    def kill(self) -> None:
        """SIGKILL to the whole process group (the command and its children), if still up."""
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)


#: Seconds of a ``kue worker`` lease in the process tests: a heartbeat every 0.1 s.
LEASE = "0.3"
#: A lease no load outlasts, for a worker no test kills or stops (``--lease`` given again
#: overrides ``LEASE``): one held up past a short lease (two cores, under coverage) rightly
#: loses what it runs, which then runs again.
LONG_LEASE = ("--lease", "30")


def start_worker(
    run: list[Kue], redis_url: str, prefix: str, worker_id: str, handler: str, *more: str
) -> Kue:
    """``kue worker tests.cli.handlers:<handler> --id <worker_id>`` on type ``job`` (2 slots,
    lease ``LEASE``, ``more`` arguments after), appended to ``run``; returned once it runs."""
    kue = Kue(
        "worker", f"tests.cli.handlers:{handler}", "-t", "job", "-c", "2", "--lease", LEASE,
        "--id", worker_id, "--redis", redis_url, "--prefix", prefix, *more,
    )  # fmt: skip
    run.append(kue)
    kue.wait_for_line(rf"worker pid {kue.proc.pid}, id {worker_id}: ")
    return kue


def doctor_finds_nothing(prefix: str, redis_url: str) -> None:
    """``kue doctor`` on the queue answers healthy (exit 0)."""
    from click.testing import CliRunner

    from kue_cli.cli import cli

    result = CliRunner().invoke(cli, ["doctor", "--redis", redis_url, "--prefix", prefix])
    assert result.exit_code == 0 and result.stdout.startswith("healthy"), result.output
