"""Fixtures of the kue rules tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.rules.helpers import WebService


@pytest.fixture
def service() -> Iterator[WebService]:
    """The local web service the rules' fetches call, for one test."""
    s = WebService()
    yield s
    s.close()
