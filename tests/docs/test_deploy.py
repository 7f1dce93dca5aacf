"""The container example (deploy/Dockerfile, deploy/compose.yaml; shown in
docs/deployment.md) agrees with kue. No Docker runs in the suite, so what can be checked
without one is: the compose file parses and keeps the settings the deployment guide asks for
(an append-only file, no eviction, a stop grace period above the worker's shutdown timeout),
its build contexts and the Dockerfile's COPY sources exist and hold every package
``pip install .`` needs, every ``kue`` command it runs parses as the real CLI parses it and
names a handler that imports, gunicorn's options and app path are gunicorn's and kue's, and
the guide shows the two files as they are."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path
from typing import Any

import click
import pytest

from kue_cli import cli as kue_cli

yaml = pytest.importorskip("yaml")  # PyYAML: installed with the docs' Sphinx (MyST needs it)

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
COMPOSE = DEPLOY / "compose.yaml"
DOCKERFILE = DEPLOY / "Dockerfile"
GUIDE = ROOT / "docs" / "deployment.md"


def compose() -> dict[str, Any]:
    found = yaml.safe_load(COMPOSE.read_text("utf-8"))
    assert isinstance(found, dict)
    return found


def dockerfile_instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, rest) for each instruction, continuation lines joined."""
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text("utf-8"))
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def check_kue_command(args: list[str]) -> None:
    """Parse ``kue ARGS`` as the CLI would (options, their types and ranges), without running
    it, and import the handler a ``kue worker`` names."""
    assert args[0] == "kue"
    group = kue_cli.cli
    ctx = click.Context(group, info_name="kue")
    name, *rest = args[1:]  # the example gives kue's own options through the environment
    command = group.get_command(ctx, name)
    assert command is not None, f"kue has no command {name}"
    sub = command.make_context(name, rest, parent=ctx)
    if name == "worker":
        kue_cli.load_handler(sub.params["handler"], modules=True)


def test_the_compose_file_keeps_the_settings_the_guide_asks_for() -> None:
    services = compose()["services"]
    assert set(services) == {"valkey", "worker", "dashboard"}
    server = " ".join(services["valkey"]["command"])
    assert "--appendonly yes" in server and "--appendfsync everysec" in server
    assert "--maxmemory-policy noeviction" in server
    assert "valkey-data" in compose()["volumes"]
    assert any(v.endswith(":/data") for v in services["valkey"]["volumes"])
    for name in ("worker", "dashboard"):
        env = services[name]["environment"]
        assert env["KUE_REDIS_URL"] == "redis://valkey:6379/0"  # the server's service name
        assert services[name]["depends_on"]["valkey"]["condition"] == "service_healthy"
    worker = services["worker"]
    timeout = float(worker["command"][worker["command"].index("--shutdown-timeout") + 1])
    grace = worker["stop_grace_period"]
    assert grace.endswith("s") and float(grace[:-1]) > timeout
    assert worker["stop_signal"] == "SIGTERM"


def test_its_builds_and_the_dockerfile_copy_what_pip_install_needs() -> None:
    for service in compose()["services"].values():
        if "build" in service:
            context = (DEPLOY / service["build"]["context"]).resolve()
            assert context == ROOT
            assert (context / service["build"]["dockerfile"]).resolve() == DOCKERFILE
    copied = set()
    for word, rest in dockerfile_instructions():
        if word == "COPY":
            *sources, _ = rest.split()
            for source in sources:
                assert (ROOT / source).exists(), f"COPY {source}: not in the repository"
                copied.add(source)
    with (ROOT / "pyproject.toml").open("rb") as f:
        setup = tomllib.load(f)["tool"]["setuptools"]
    needed = {p.split(".")[0] for p in setup["packages"]} - set(setup["package-dir"])
    needed |= set(setup["package-dir"].values()) | {"pyproject.toml", "README.md"}
    assert needed <= copied, f"the image lacks {sorted(needed - copied)}"


def test_every_command_it_runs_exists() -> None:
    commands = [s["command"] for s in compose()["services"].values() if "command" in s]
    (cmd,) = [rest for word, rest in dockerfile_instructions() if word == "CMD"]
    commands.append(json.loads(cmd))
    kue, gunicorn = 0, 0
    for args in commands:
        if args[0] == "kue":
            check_kue_command(args)
            kue += 1
        elif args[0] == "gunicorn":
            from gunicorn.config import Config

            parsed = Config().parser().parse_args(args[1:])
            assert parsed.worker_class == "gthread"  # as kue dashboard --gunicorn
            (app,) = parsed.args
            module, _, call = app.partition(":")
            assert call == "create_app()" and module == "kue_http"
            assert callable(__import__(module).create_app)
            gunicorn += 1
    assert (kue, gunicorn) == (2, 1)  # the worker's, the image's default, the dashboard's


def test_a_bad_kue_command_is_seen() -> None:
    with pytest.raises(click.UsageError):
        check_kue_command(["kue", "worker", "x:y", "--no-such-option"])
    with pytest.raises(click.ClickException):
        check_kue_command(["kue", "worker", "no_such_module_here:handler", "-t", "email"])


def test_the_guide_shows_the_files_as_they_are() -> None:
    text = GUIDE.read_text("utf-8")
    for path, lang in ((DOCKERFILE, "dockerfile"), (COMPOSE, "yaml")):
        block = f"```{lang}\n{path.read_text('utf-8')}```"
        assert block in text, f"docs/deployment.md does not show {path.relative_to(ROOT)}"
    assert "docker compose -f deploy/compose.yaml up --build" in text
