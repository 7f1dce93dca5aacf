"""The README's first quickstart command, as written, in a copy of the checkout: ``pip
install .`` builds the wheel and installs it (not editable) in a fresh virtualenv, and the
installed ``kue example`` serves the dashboard, its templates, styles and script from the
installed package, with jobs flowing on the embedded Redis, until Ctrl-C."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.cli.running import ROOT, Kue
from tests.cli.test_processes import get
from tests.conftest import free_port, redis_servers_in, wait_for

pytestmark = pytest.mark.timeout(600)


def quickstart() -> list[str]:
    """The commands of the README's Quickstart section, in order."""
    readme = (ROOT / "README.md").read_text()
    section = readme.split("\n## Quickstart\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```bash\n(.+?)\n```", section, re.S)


def copy_checkout(to: Path) -> Path:
    """The files a fresh clone has (tracked, or new and not ignored), nothing built."""
    names = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard", "-z"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.decode()
    for name in filter(None, names.split("\0")):
        if (ROOT / name).is_file():
            (to / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, to / name)
    return to


def test_the_readme_has_two_quickstart_commands() -> None:
    install_and_run, install_and_test = quickstart()
    assert "\n" not in install_and_run and install_and_run.endswith("kue example")
    assert "\n" not in install_and_test and install_and_test.endswith("python -m pytest")
    assert "pip install . " in install_and_run  # not editable: the wheel is what runs


def test_the_readme_opens_with_hello_py() -> None:
    """The README's first code is kue_example/hello.py (run in tests/cli/test_run_processes.py),
    word for word, its docstring aside."""
    readme = (ROOT / "README.md").read_text()
    first = re.search(r"```python\n(.+?)```", readme, re.S)
    hello = (ROOT / "kue_example" / "hello.py").read_text().split('"""', 2)[2].lstrip("\n")
    assert first and first.group(1) == hello
    assert readme.index("```python") < readme.index("\n## Quickstart\n")
    # The first screen says to install before the first thing to run.
    assert readme.index(".venv/bin/pip install .") < readme.index("```python")


def test_the_quickstart_installs_the_wheel_and_runs_the_example(tmp_path: Path) -> None:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs a git checkout to copy")
    repo = copy_checkout(tmp_path / "kue")
    port = free_port()
    # As a terminal runs it: bash, in a process group that Ctrl-C signals as a whole.
    env = {"KUE_EXAMPLE_PORT": str(port)}
    shell = Kue("-c", quickstart()[0], env=env, cwd=repo, exe=Path("/bin/bash"))
    try:
        base = shell.wait_for_line(r"dashboard is on (http://\S+)/", timeout=400).group(1)
        assert base == f"http://127.0.0.1:{port}"
        venv = repo / ".venv"

        # The installed package, not the checkout, serves the pages and their files.
        where = subprocess.run(
            [
                venv / "bin" / "python",
                "-c",
                "from kue_http.dashboard import dashboard as d; "
                "print(d.template_folder, d.static_folder)",
            ],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
        site = next((venv / "lib").glob("python3*/site-packages"))
        assert all(Path(p).is_relative_to(site) for p in where), where
        status, kind, page = get(base + "/")
        assert status == 200 and kind.startswith("text/html")
        assets = re.findall(r'(?:src|href)="(/static/[^"?]+)', page)
        assert {"/static/kue.js", "/static/kue.css", "/static/favicon.svg"} <= set(assets)
        for path in assets:
            status, _, body = get(base + path)
            assert status == 200 and body == (ROOT / path.lstrip("/")).read_text(), path

        # Jobs flow on the embedded Redis, whose data lives in ./.kue of the checkout.
        def completed() -> int:
            return int(json.loads(get(base + "/api/stats")[2])["completeCount"])

        assert wait_for(lambda: completed() >= 10, timeout=30)
        assert (repo / ".kue").is_dir() and redis_servers_in(repo / ".kue")

        shell.ctrl_c()
        assert shell.wait(timeout=60) == 0, shell.output
        assert shell.out[-1] == "stopped"
        assert wait_for(lambda: not redis_servers_in(repo / ".kue"), timeout=15)

        # The jobs outlive the demo: the installed `kue stats` finds them in ./.kue again.
        stats = subprocess.run(
            [venv / "bin" / "kue", "stats", "--json"],
            cwd=repo,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert stats.returncode == 0, stats.stderr
        assert json.loads(stats.stdout)["total"]["complete"] >= 10
    finally:
        shell.kill()
