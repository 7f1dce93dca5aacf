"""The dependency floors: pyproject.toml's ``>=`` floors and .ci/minimums.txt (the exact pins
CI installs to run the core tests at those floors) name the same versions, so neither can
drift from the other. Under that CI run (``KUE_TEST_MINIMUMS=1``) the versions installed are
checked as well: the tests did run at the floors."""

from __future__ import annotations

import os
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]
MINIMUMS = ROOT / ".ci" / "minimums.txt"


def _project() -> dict[str, object]:
    with open(ROOT / "pyproject.toml", "rb") as f:
        project: dict[str, object] = tomllib.load(f)["project"]
    return project


def _floor(requirement: Requirement) -> Version:
    """The version of the requirement's one ``>=`` clause (and it has no other clause)."""
    clauses = list(requirement.specifier)
    assert [c.operator for c in clauses] == [">="], (
        f"{requirement}: give a floor, and only a floor (>=)"
    )
    return Version(clauses[0].version)


def _floors(requirements: list[str]) -> dict[str, Version]:
    floors: dict[str, Version] = {}
    for line in requirements:
        requirement = Requirement(line)
        name = canonicalize_name(requirement.name)
        assert name not in floors, f"{name} is listed twice"
        floors[name] = _floor(requirement)
    return floors


def _minimums() -> dict[str, Version]:
    pins: dict[str, Version] = {}
    for line in MINIMUMS.read_text("utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        requirement = Requirement(line)
        clauses = list(requirement.specifier)
        assert [c.operator for c in clauses] == ["=="], f"{line}: pin it exactly (==)"
        assert not requirement.extras and requirement.marker is None, line
        name = canonicalize_name(requirement.name)
        assert name not in pins, f"{name} is pinned twice in {MINIMUMS.name}"
        pins[name] = Version(clauses[0].version)
    return pins


def test_every_runtime_floor_is_pinned_in_the_minimums() -> None:
    dependencies = _project()["dependencies"]
    assert isinstance(dependencies, list)
    floors, pins = _floors(dependencies), _minimums()
    assert sorted(floors) == sorted(pins), "the same dependencies, one line each"
    differ = {name: (str(floors[name]), str(pins[name])) for name in floors}
    assert {n: v for n, v in differ.items() if v[0] != v[1]} == {}, (
        "pyproject.toml's floor and .ci/minimums.txt's pin differ: raise both at once"
    )


def test_every_test_dependency_has_a_floor() -> None:
    optional = _project()["optional-dependencies"]
    assert isinstance(optional, dict)
    _floors(optional["test"])


@pytest.mark.skipif(
    os.environ.get("KUE_TEST_MINIMUMS") != "1", reason="only in CI's minimum-versions run"
)
def test_the_minimums_are_what_is_installed() -> None:
    installed = {name: Version(metadata.version(name)) for name in _minimums()}
    assert installed == _minimums()
