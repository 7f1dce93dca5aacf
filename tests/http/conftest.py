"""The app and its test client, against the suite's real Redis under a fresh prefix."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from flask import Flask
from flask.testing import FlaskClient

from kue_http import create_app


@pytest.fixture
def app(redis_url: str, prefix: str) -> Flask:
    """Small pages and quick keep-alives, so that limits and streams are quick to test."""
    return create_app(
        {
            "KUE_REDIS_URL": redis_url,
            "KUE_PREFIX": prefix,
            "KUE_MAX_PAGE": 50,
            "KUE_SSE_KEEPALIVE": 0.2,
        }
    )


@pytest.fixture
def client(app: Flask) -> Iterator[FlaskClient]:
    with app.test_client() as c:
        yield c
