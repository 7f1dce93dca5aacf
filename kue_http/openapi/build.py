"""The pieces the OpenAPI document is built from: operations (a read, a write), answers,
errors, parameters and schema shapes, and the values several parts share. Every other module
of the package builds on these; this one imports none of them."""

from __future__ import annotations

from typing import Any

from kue_core import PRIORITIES, PRIORITY_LIMIT, STATES, defaults

Schema = dict[str, Any]

INT64 = {"type": "integer", "format": "int64", "minimum": -(2**63), "maximum": 2**63 - 1}
COUNT = {"type": "integer", "minimum": 0}
MS = {"type": "integer", "minimum": 0, "description": "Unix time in milliseconds"}
#: Characters a job type may not hold (``kue_core.jobs.job.validate_type``).
CONTROL = r"\x00-\x1f\x7f"


def read(
    tag: str,
    summary: str,
    responses: Schema,
    *errors: int,
    parameters: list[Schema] | None = None,
) -> Schema:
    """A read: answers 401 without credentials and 503 when Redis does not answer."""
    operation: Schema = {"tags": [tag], "summary": summary}
    if parameters:
        operation["parameters"] = parameters
    operation["responses"] = {**responses, **error_refs(*errors, 401, 503)}
    return operation


def write(
    tag: str,
    summary: str,
    responses: Schema,
    *errors: int,
    parameters: list[Schema] | None = None,
    body: Schema | None = None,
) -> Schema:
    """A write: a read that also answers 403 (foreign Origin), 405 (read-only) and 415."""
    operation = read(tag, summary, responses, *errors, 403, 405, 415, parameters=parameters)
    if body is not None:
        operation["requestBody"] = body
    return operation


def ok(schema: Schema) -> Schema:
    return {"200": json_answer("OK", schema)}


def json_answer(description: str, schema: Schema) -> Schema:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def json_body(schema: Schema, description: str, *, required: bool = True) -> Schema:
    return {
        "required": required,
        "description": description,
        "content": {"application/json": {"schema": schema}},
    }


# -- errors --------------------------------------------------------------------------------
#: Status -> (name in components/responses, when it is answered).
ERRORS: dict[int, tuple[str, str]] = {
    400: ("BadRequest", "Bad input (nothing was written)"),
    401: ("Unauthorized", "No or wrong credentials (KUE_AUTH, KUE_USERS)"),
    403: (
        "Forbidden",
        "A write by a user whose role may only read (viewer), or from another site (Origin "
        "does not match)",
    ),
    404: ("NotFound", "No job (or worker process) with this id"),
    405: ("ReadOnly", "Read-only mode (KUE_READONLY): no writes"),
    409: ("Conflict", "The job's state does not allow this"),
    413: (
        "TooLarge",
        "The body is larger than KUE_MAX_BODY, or a job's data larger than the queue takes "
        "(KUE_MAX_DATA_BYTES without a payload store, KUE_MAX_PAYLOAD_BYTES): size and limit "
        "in bytes",
    ),
    415: ("NotJson", "A write's body is not application/json, or a POST has none"),
    503: ("Unavailable", "Redis is unavailable"),
}


def error_refs(*codes: int) -> Schema:
    return {
        str(code): {"$ref": f"#/components/responses/{ERRORS[code][0]}"} for code in sorted(codes)
    }


def error_response(code: int) -> Schema:
    response = json_answer(ERRORS[code][1], ref("TooLarge" if code == 413 else "Error"))
    if code == 401:  # (none when the host app signs users in: KUE_AUTHENTICATE alone)
        response["headers"] = {
            "WWW-Authenticate": {"required": False, "schema": {"type": "string"}},
        }
    return response


# -- parameters ----------------------------------------------------------------------------
def path_param(name: str, schema: Schema, description: str = "", example: Any = None) -> Schema:
    param: Schema = {"name": name, "in": "path", "required": True, "schema": schema}
    if description:
        param["description"] = description
    if example is not None:
        param["example"] = example
    return param


def query_param(name: str, schema: Schema, description: str = "", required: bool = False) -> Schema:
    param: Schema = {"name": name, "in": "query", "required": required, "schema": schema}
    if description:
        param["description"] = description
    return param


def type_query(description: str) -> Schema:
    """The optional ``type`` filter of bulk actions and events: any job type."""
    return query_param("type", job_type(), description)


def job_type(segment: bool = False) -> Schema:
    """A job type: not blank, no control characters; in a path segment, no ``/`` either
    (the route could not tell it apart from the next segment)."""
    bad = CONTROL + "/" if segment else CONTROL
    return {
        "type": "string",
        "minLength": 1,
        "maxLength": defaults.MAX_TYPE_LENGTH,
        "pattern": rf"^[^{bad}]*[^{bad}\s][^{bad}]*$",
    }


STATE = {"enum": list(STATES)}
PRIORITY = {
    "anyOf": [
        {"enum": list(PRIORITIES)},
        {"type": "integer", "minimum": 1 - PRIORITY_LIMIT, "maximum": PRIORITY_LIMIT - 1},
    ],
    "description": "A name, or an integer: lower runs sooner.",
}
MINUTES = {"type": "integer", "minimum": 1, "maximum": defaults.THROUGHPUT_MINUTES}
JOB_ID = path_param("id", {**INT64, "minimum": 1}, "A job id.", example=1)
STATE_PARAM = path_param("state", STATE, example="inactive")
TYPE_PARAM = path_param("type", job_type(segment=True), "A job type.", example="email")
DAY = query_param(
    "day",
    {"type": "string", "format": "date", "pattern": "^[0-9]{4}-[0-9]{2}-[0-9]{2}$"},
    f"A UTC day, YYYY-MM-DD (default today on the Redis server's clock); the figures are "
    f"kept {defaults.TIMINGS_DAYS} days.",
)
ORDER = path_param("order", {"enum": ["asc", "desc"]}, "Ids ascending (the default) or not.")
RANGE = [
    path_param("from", INT64, "First rank of the window (negative: from the end).", example=0),
    path_param("to", INT64, "Last rank of the window, included (-1: the last).", example=9),
]


# -- schemas -------------------------------------------------------------------------------
def ref(name: str) -> Schema:
    return {"$ref": f"#/components/schemas/{name}"}


def obj(properties: Schema, *, optional: str = "", closed: bool = True) -> Schema:
    """An object with these properties, all required but the ``optional`` ones (names
    separated by spaces); no others when ``closed``."""
    schema: Schema = {
        "type": "object",
        "required": [name for name in properties if name not in optional.split()],
        "properties": properties,
    }
    if closed:
        schema["additionalProperties"] = False
    return schema


def array(
    items: Schema, description: str = "", *, min_items: int = 0, max_items: int | None = None
) -> Schema:
    schema: Schema = {"type": "array", "items": items}
    if min_items:
        schema["minItems"] = min_items
    if max_items is not None:
        schema["maxItems"] = max_items
    if description:
        schema["description"] = description
    return schema


def names() -> Schema:
    """Job types, sorted."""
    return {"type": "array", "items": {"type": "string"}, "uniqueItems": True}


def message(text: str | None = None, *, pattern: str | None = None) -> Schema:
    message: Schema = {"type": "string"}
    if text is not None:
        message["const"] = text
    if pattern is not None:
        message["pattern"] = pattern
    return obj({"message": message})


def health(status: str, redis: str) -> Schema:
    return obj({"status": {"const": status}, "redis": {"const": redis}})


def changed(pattern: str) -> Schema:
    return obj({"message": {"type": "string", "pattern": pattern}, "job": ref("Job")})
