"""The pages whose examples the suite checks: the README and every page of docs/."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.docs.markdown import Block, read

ROOT = Path(__file__).resolve().parent.parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

#: Pages whose blocks are not yet marked and checked: expected to fail until they are.
NOT_YET_CONVERTED = frozenset(
    [
        "docs/benchmarks.md",
        "docs/cli.md",
        "docs/cluster.md",
        "docs/contributing.md",
        "docs/dashboard.md",
        "docs/deployment.md",
        "docs/doctor.md",
        "docs/http-api.md",
        "docs/index.md",
        "docs/moving-from-kue.md",
        "docs/recipes.md",
        "docs/redis-layout.md",
        "docs/reference.md",
        "docs/rules.md",
        "docs/sentinel.md",
        "docs/tracing.md",
    ]
)


def params() -> list[object]:
    """The pages as test parameters, by path; those not yet converted expected to fail."""
    out: list[object] = []
    for page in PAGES:
        name = page.relative_to(ROOT).as_posix()
        xfail = pytest.mark.xfail(reason="not yet converted", strict=False)
        out.append(pytest.param(page, id=name, marks=xfail if name in NOT_YET_CONVERTED else ()))
    return out


def blocks_of(page: Path) -> list[Block]:
    return read(page, ROOT)
