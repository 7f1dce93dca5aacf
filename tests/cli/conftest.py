"""Fixtures of the command-line tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.cli.running import Kue


@pytest.fixture
def run() -> Iterator[list[Kue]]:
    """The ``kue`` processes a test starts (append them): killed when it ends."""
    started: list[Kue] = []
    yield started
    for kue in started:
        kue.kill()
