"""docs/tutorial.md, followed as a reader would: its files written out as given, the worker and
the scripts run as real processes from the tutorial's folder, and what they print compared with
what the tutorial says they print."""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from kue_core import Queue
from tests.cli.running import KUE, ROOT, Kue
from tests.conftest import wait_for

PYTHON = Path(sys.executable)
TUTORIAL = (ROOT / "docs" / "tutorial.md").read_text()


def blocks(language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```", TUTORIAL, re.S | re.M)


def files() -> dict[str, str]:
    """The tutorial's Python files, by the name each block's first line gives."""
    named = {}
    for code in blocks("python"):
        first = code.split("\n", 1)[0]
        assert first.startswith("# ") and first.endswith(".py"), first
        named[first[2:]] = code
    return named


def command(prefix: str) -> list[str]:
    """The first command of the tutorial's shell blocks that starts with ``prefix``."""
    for code in blocks("bash"):
        for line in code.splitlines():
            if line.startswith(prefix):
                return shlex.split(line.split("  #", 1)[0])
    raise AssertionError(f"no {prefix!r} command in the tutorial")


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    for name, code in files().items():
        (tmp_path / name).write_text(code)
    return tmp_path


def test_the_tutorial_runs_as_written(
    run: list[Kue], folder: Path, redis_url: str, prefix: str, queue: Queue
) -> None:
    settings = {"KUE_REDIS_URL": redis_url, "KUE_PREFIX": prefix, "PYTHONUNBUFFERED": "1"}
    # A terminal with the tutorial's virtualenv active, and no kue settings but the test's.
    env = {k: v for k, v in os.environ.items() if not k.startswith("KUE_")} | settings
    env["PATH"] = f"{PYTHON.parent}{os.pathsep}{env.get('PATH', '')}"

    def shell(*args: str) -> str:
        done = subprocess.run(args, cwd=folder, env=env, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout

    worker = Kue(*command("kue worker")[1:], env=settings, cwd=folder)
    run.append(worker)
    wait_for(lambda: queue.workers() != [], timeout=30)
    assert shell(str(PYTHON), "enqueue.py") == blocks("text")[0]  # prints what it says
    assert "email" in shell(str(KUE), *command("kue stats")[1:])
    shown = shell(str(KUE), *command("kue job show")[1:])
    assert "sending 'hello' to ada@example.com" in shown and "complete" in shown
    assert shell(str(PYTHON), "later.py") == "delayed 1\n"
    worker.send(signal.SIGTERM)
    assert worker.wait() == 0, worker.output

    served = Kue("serve.py", env=settings, cwd=folder, exe=PYTHON)
    run.append(served)
    wait_for(lambda: queue.workers() != [], timeout=30)
    job = queue.create_job("email", {"to": "barbara@example.com", "subject": "hi"}).save()
    assert job.wait(10) == {"sent": True, "to": "barbara@example.com"}
    served.ctrl_c()
    assert served.wait() == 0, served.output
