"""A Sphinx extension that writes the HTTP API's route reference (``_generated/routes.md``) from
the OpenAPI document kue_http serves, before the pages are read, so the reference cannot drift
from the routes: one section per tag, one entry per operation with its parameters, its body and
its answers, and the schemas they name at the end."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sphinx.application import Sphinx
from sphinx.config import Config

METHODS = ("get", "post", "put", "delete")


def schema_text(schema: dict[str, Any] | bool) -> str:
    """A short, one-line reading of a JSON schema, for a table cell."""
    if not isinstance(schema, dict):
        return "any" if schema else "nothing"
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[1]
        return f"[{name}](#schema-{name.lower()})"
    for key in ("anyOf", "oneOf"):
        if key in schema:
            return " or ".join(schema_text(s) for s in schema[key])
    if "enum" in schema:
        return " \\| ".join(f"`{json.dumps(v)}`" for v in schema["enum"])
    kind = schema.get("type", "any")
    if isinstance(kind, list):
        kind = " or ".join(kind)
    if kind == "array" and "items" in schema:
        return f"array of {schema_text(schema['items'])}"
    bounds = [f"≥ {schema['minimum']}" if "minimum" in schema else "", schema.get("format", "")]
    extra = ", ".join(b for b in bounds if b)
    return f"{kind} ({extra})" if extra else str(kind)


def cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def parameters_table(parameters: list[dict[str, Any]]) -> list[str]:
    if not parameters:
        return []
    rows = ["| Parameter | In | Type | Description |", "|---|---|---|---|"]
    for p in parameters:
        name = f"`{p['name']}`" + ("" if p.get("required") else " (optional)")
        kind = cell(schema_text(p.get("schema", {})))
        rows.append(f"| {name} | {p['in']} | {kind} | {cell(p.get('description', ''))} |")
    return [*rows, ""]


def answers(responses: dict[str, Any], shared: dict[str, Any]) -> list[str]:
    rows = ["| Status | Meaning | Body |", "|---|---|---|"]
    for status, answer in responses.items():
        if "$ref" in answer:
            answer = shared[answer["$ref"].rsplit("/", 1)[1]]
        schema = answer.get("content", {}).get("application/json", {}).get("schema")
        body = cell(schema_text(schema)) if schema else ""
        rows.append(f"| {status} | {cell(answer.get('description', ''))} | {body} |")
    return [*rows, ""]


def operation(
    path: str, method: str, op: dict[str, Any], shared_params: list[Any], shared: dict[str, Any]
) -> list[str]:
    lines = [f"### `{method.upper()} {path}`", "", cell(op.get("summary", "")) + ".", ""]
    if op.get("description"):
        lines += [op["description"], ""]
    lines += parameters_table(shared_params + op.get("parameters", []))
    body = op.get("requestBody")
    if body:
        schema = body["content"]["application/json"]["schema"]
        lines += [f"Body (JSON): {schema_text(schema)}. {body.get('description', '')}", ""]
    return lines + answers(op["responses"], shared)


def schema_section(name: str, schema: dict[str, Any]) -> list[str]:
    lines = [f"({'schema-' + name.lower()})=", f"### {name}", ""]
    if schema.get("description"):
        lines += [schema["description"], ""]
    properties = schema.get("properties")
    if not properties:
        return [*lines, f"{schema_text(schema)}.", ""]
    required = set(schema.get("required", []))
    lines += ["| Field | Type | Description |", "|---|---|---|"]
    for field, sub in properties.items():
        label = f"`{field}`" + ("" if field in required else " (optional)")
        about = sub.get("description", "") if isinstance(sub, dict) else ""
        lines.append(f"| {label} | {cell(schema_text(sub))} | {cell(about)} |")
    return [*lines, ""]


def render(document: dict[str, Any]) -> str:
    shared = document["components"]["responses"]
    lines = [
        "# Route reference",
        "",
        "Every route of the API under `/api`, generated from the OpenAPI document the server "
        "serves at `GET /api/openapi.json` ([a copy](../openapi.json) is kept in the "
        "repository). [HTTP API](../http-api.md) explains the settings, the errors and the "
        "security around them.",
        "",
    ]
    for tag in document["tags"]:
        lines += [f"## {tag['name'].capitalize()}", ""]
        for path, item in document["paths"].items():
            for method in METHODS:
                op = item.get(method)
                if op and tag["name"] in op.get("tags", []):
                    lines += operation(path, method, op, item.get("parameters", []), shared)
    lines += ["## Schemas", ""]
    for name, schema in document["components"]["schemas"].items():
        lines += schema_section(name, schema)
    return "\n".join(lines)


def write_routes(app: Sphinx, config: Config) -> None:
    from kue_http import config as http_config
    from kue_http import openapi

    target = Path(app.srcdir) / "_generated" / "routes.md"
    target.parent.mkdir(exist_ok=True)
    text = render(openapi.document("/api", http_config.DEFAULTS))
    if not target.exists() or target.read_text() != text:
        target.write_text(text)


def setup(app: Sphinx) -> dict[str, Any]:
    app.connect("config-inited", write_routes)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
