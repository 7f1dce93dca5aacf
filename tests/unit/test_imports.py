"""The import graph: the import contract of pyproject.toml (import-linter: the packages in
layers, kue_core's parts in layers, no circle inside any package, every import counted: inside
functions and under ``if TYPE_CHECKING:`` too); and kue_http uses only kue_core's public
names."""

from __future__ import annotations

import ast
import logging
import tomllib
from pathlib import Path

import pytest

import kue_core

ROOT = Path(__file__).resolve().parents[2]
CORE = ROOT / "kue_core"


def test_the_import_contract_holds(capsys: pytest.CaptureFixture[str]) -> None:
    """``lint-imports``, as from the checkout: what it prints says which import breaks what.
    Its cache stays out of the tree (each test worker would write one). (Not in CI's
    minimum-versions virtualenv, which has the runtime floors and pytest only.)"""
    lint_imports = pytest.importorskip("importlinter.cli").lint_imports

    config = str(ROOT / "pyproject.toml")
    loggers = logging.root.manager.loggerDict.values()
    enabled = [log for log in loggers if isinstance(log, logging.Logger) and not log.disabled]
    try:
        assert lint_imports(config_filename=config, no_cache=True, no_logo=True) == 0, (
            capsys.readouterr().out
        )
    finally:  # it configures logging as a program does, disabling the loggers that exist:
        for log in enabled:  # kue_core's would then log nothing in this test worker's later tests
            log.disabled = False


def test_the_layers_name_every_part_of_kue_core() -> None:
    """The layers contract holds only what it names: each module and subpackage of kue_core
    has its place there (a new one must be given one)."""
    with (ROOT / "pyproject.toml").open("rb") as f:
        contracts = tomllib.load(f)["tool"]["importlinter"]["contracts"]
    (layers,) = [c["layers"] for c in contracts if c.get("containers") == ["kue_core"]]
    named = {part.strip() for layer in layers for part in layer.split("|")}
    parts = {p.stem for p in CORE.glob("*.py") if p.stem != "__init__"} | {
        p.parent.name for p in CORE.glob("*/__init__.py")
    }
    assert parts == named


@pytest.mark.parametrize(
    "path",
    sorted([*(ROOT / "kue_http").rglob("*.py"), *(ROOT / "kue_rules").rglob("*.py")]),
    ids=lambda p: str(p.relative_to(ROOT)),
)
def test_kue_http_and_kue_rules_use_only_public_names(path: Path) -> None:
    """kue_core's names in ``__all__``, and the modules meant to be imported: the doctor's
    is the interface of the checks other packages plug in (``kue_rules.doctor``)."""
    private = []
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("kue_core"):
            if node.module == "kue_core.doctor":
                continue
            if node.module != "kue_core":
                private.append(f"from {node.module} import ...")
            else:
                private += [a.name for a in node.names if a.name not in kue_core.__all__]
        elif isinstance(node, ast.Import):
            private += [a.name for a in node.names if a.name.startswith("kue_core.")]
    assert private == []


def test_every_package_is_installed() -> None:
    """pyproject.toml lists the packages to install one by one: a subpackage missing there
    works from a checkout and is absent from the wheel."""
    with (ROOT / "pyproject.toml").open("rb") as f:
        listed = set(tomllib.load(f)["tool"]["setuptools"]["packages"])
    found = {
        ".".join(init.parent.relative_to(ROOT).parts)
        for top in ("kue_core", "kue_http", "kue_cli", "kue_rules", "kue_example")
        for init in (ROOT / top).rglob("__init__.py")
    }
    assert found <= listed, f"not in [tool.setuptools] packages: {sorted(found - listed)}"
