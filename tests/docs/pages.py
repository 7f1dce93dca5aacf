"""The pages whose examples the suite checks: the README and every page of docs/."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.docs.markdown import Block, read

ROOT = Path(__file__).resolve().parent.parent.parent
DOCS = ROOT / "docs"
#: The README and every page under docs/ but the build's (``_build``, ``_generated``).
PAGES = [
    ROOT / "README.md",
    *sorted(
        page
        for page in DOCS.rglob("*.md")
        if not any(part.startswith("_") for part in page.relative_to(DOCS).parts)
    ),
]


def params() -> list[object]:
    """The pages as test parameters, named by their paths."""
    return [pytest.param(page, id=page.relative_to(ROOT).as_posix()) for page in PAGES]


def blocks_of(page: Path) -> list[Block]:
    return read(page, ROOT)
