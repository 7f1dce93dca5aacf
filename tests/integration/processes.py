"""Worker subprocesses for a fault test: each prints ``ready`` on its first line once it
serves; every one is woken (a stopped process dies of SIGKILL too) and killed at the end."""

from __future__ import annotations

import signal
import subprocess


class Processes:
    """The subprocesses one test started (a test file's ``Workers`` builds their argv)."""

    def __init__(self, redis_url: str, prefix: str) -> None:
        self.redis_url, self.prefix = redis_url, prefix
        self.procs: list[subprocess.Popen[str]] = []

    def launch(self, *argvs: list[str], env: dict[str, str] | None = None) -> subprocess.Popen[str]:
        """Start one process per argv, together, and wait until each is ready; the last."""
        started = [subprocess.Popen(a, stdout=subprocess.PIPE, text=True, env=env) for a in argvs]
        self.procs.extend(started)
        for proc in started:
            assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        return started[-1]

    def close(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGCONT)
                proc.kill()
            proc.wait(timeout=10)
