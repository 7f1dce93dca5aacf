"""The import graph: the import contract of pyproject.toml (import-linter: the packages in
layers, no circle inside one, every import counted); inside kue_core nothing imports upward
and nothing imports in a circle (imports inside functions included; only ``if TYPE_CHECKING:``
blocks, which never run, are left out); and kue_http uses only kue_core's public names."""

from __future__ import annotations

import ast
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

import kue_core

ROOT = Path(__file__).resolve().parents[2]
CORE = ROOT / "kue_core"

#: Each kue_core module's floor (DESIGN §2): a module imports only modules on its own floor
#: or below. A new module must be given its floor here.
FLOORS = {
    # 1. pure: no Redis connection
    "defaults": 1,
    "errors": 1,
    "states": 1,
    "keys": 1,
    "backoff": 1,
    "retry": 1,
    "signals": 1,
    "checks": 1,
    "unique": 1,
    "values": 1,
    "records": 1,
    "schedule_rules": 1,
    "lua_source": 1,
    "calls": 1,
    # 2. connection, scripts, events
    "cluster": 2,
    "embedded": 2,
    "connection": 2,
    "scripts": 2,
    "runner": 2,
    "claims": 1,
    "events": 2,
    "control": 2,
    "pins": 2,
    "stats": 2,
    "timings": 2,
    "tally": 2,
    "job_records": 2,
    "search": 2,
    "retention": 2,
    "flows": 2,
    "schedules": 2,
    "limits": 2,
    "feeds": 2,
    "runs": 2,
    "ops": 2,
    "record_ops": 2,
    "job_spec": 2,
    "job_options": 2,
    "flow_ops": 2,
    "waiting": 2,
    "tracing": 1,
    "aio_events": 2,
    "aio_scripts": 2,
    "aio_pipe": 2,
    "aio_cluster": 2,
    "aio_job": 3,
    "aio_plans": 3,
    "aio_records": 3,
    # 3. the job model
    "job": 3,
    # 4. workers: middleware, how a run ends, an attempt, children, promotion, slots, keeper
    "outcome": 4,
    "middleware": 4,
    "attempt": 4,
    "isolation": 4,
    "promoter": 4,
    "reserve": 1,
    "slots": 4,
    "identity": 4,
    "worker": 4,
    "worker_state": 4,
    "serving": 4,
    "keeper": 4,
    # 5. the facade
    "queue": 5,
    "queue_records": 4,
    "queue_schedules": 4,
    "queue_workers": 5,
    "aio": 5,
    # the package's public names (the doctor, a package of its own, is checked by the
    # import contract in pyproject.toml)
    "__init__": 7,
}


def _runs(tree: ast.AST) -> Iterator[ast.AST]:
    """Every node that can run: everything but the bodies of ``if TYPE_CHECKING:``."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            yield from (n for child in node.orelse for n in (child, *_runs(child)))
            continue
        yield node
        yield from _runs(node)


def _core_imports(path: Path) -> set[str]:
    """The kue_core modules that ``path`` (a kue_core module) imports."""
    found = set()
    for node in _runs(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            if node.module:
                found.add(node.module.split(".")[0])
            else:  # from . import x
                found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module.split(".")[0] == "kue_core":
                parts = node.module.split(".")
                found.update([parts[1]] if len(parts) > 1 else [a.name for a in node.names])
        elif isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] == "kue_core" and len(parts) > 1:
                    found.add(parts[1])
    return {name for name in found if (CORE / f"{name}.py").exists()}


def _graph() -> dict[str, set[str]]:
    return {p.stem: _core_imports(p) for p in CORE.glob("*.py")}


def test_the_import_contract_holds(capsys: pytest.CaptureFixture[str]) -> None:
    """``lint-imports``, as from the checkout: what it prints says which import breaks what.
    Its cache stays out of the tree (each test worker would write one). (Not in CI's
    minimum-versions virtualenv, which has the runtime floors and pytest only.)"""
    lint_imports = pytest.importorskip("importlinter.cli").lint_imports

    config = str(ROOT / "pyproject.toml")
    assert lint_imports(config_filename=config, no_cache=True, no_logo=True) == 0, (
        capsys.readouterr().out
    )


def test_every_module_has_a_floor() -> None:
    assert set(_graph()) == set(FLOORS)


def test_nothing_imports_upward() -> None:
    upward = [
        f"{module} (floor {FLOORS[module]}) imports {target} (floor {FLOORS[target]})"
        for module, targets in _graph().items()
        for target in targets
        if FLOORS[target] > FLOORS[module]
    ]
    assert upward == []


def test_no_import_cycles() -> None:
    graph = _graph()
    done: set[str] = set()

    def visit(module: str, path: list[str]) -> None:
        if module in path:
            pytest.fail("import cycle: " + " -> ".join([*path[path.index(module) :], module]))
        if module in done:
            return
        for target in sorted(graph[module]):
            visit(target, [*path, module])
        done.add(module)

    for module in sorted(graph):
        visit(module, [])


def test_the_checker_sees_function_local_and_type_checking_imports() -> None:
    source = (
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from .queue import Queue\n"
        "def f():\n    from .worker import describe\n"
        "from . import defaults\n"
    )
    tree = ast.parse(source)
    names = {
        n.module or n.names[0].name
        for n in _runs(tree)
        if isinstance(n, ast.ImportFrom) and n.level == 1
    }
    assert names == {"worker", "defaults"}


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
