"""Calls to the API checked against its own OpenAPI document: the status, and the answer
against the schema the document gives for that path, method and status."""

from __future__ import annotations

from typing import Any

import pytest
from flask.testing import FlaskClient


class Documented:
    """``check(method, url, path, status=200, **kw)``: the answer's JSON, once checked.
    Skips the test when ``jsonschema_rs`` is not installed."""

    def __init__(self, client: FlaskClient) -> None:
        self.jsonschema_rs = pytest.importorskip("jsonschema_rs")
        self.client = client
        self.doc: dict[str, Any] = client.get("/api/openapi.json").json

    def __call__(self, method: str, url: str, path: str, status: int = 200, **kw: Any) -> Any:
        res = getattr(self.client, method)(url, **kw)
        assert res.status_code == status, (url, res.json)
        doc = self.doc
        response = doc["paths"][path][method]["responses"][str(status)]
        if "$ref" in response:
            response = doc["components"]["responses"][response["$ref"].rsplit("/", 1)[1]]
        schema = response["content"]["application/json"]["schema"]
        validator = self.jsonschema_rs.validator_for({**schema, "components": doc["components"]})
        validator.validate(res.json)
        return res.json
