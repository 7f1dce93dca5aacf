"""The app factory: ``create_app()``, also what gunicorn runs (``"kue_http:create_app()"``)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import redis
from flask import Flask, Request, Response, jsonify, render_template, request
from flask.json.provider import DefaultJSONProvider
from werkzeug.exceptions import BadRequest, HTTPException, RequestEntityTooLarge
from werkzeug.middleware.dispatcher import DispatcherMiddleware
from werkzeug.wrappers import Response as WerkzeugResponse

from kue_core import (
    BulkCountChanged,
    BulkNotFound,
    ConnectionFailed,
    HasDependents,
    InvalidJob,
    InvalidTransition,
    JobNotFound,
    KueError,
    PayloadTooLarge,
    Queue,
    ScheduleNotFound,
    WorkerNotFound,
    connection,
)
from kue_core import defaults as core_defaults

from . import (
    audit,
    bulk,
    control,
    flows,
    job_stream,
    limits,
    openapi,
    operations,
    records,
    reveal,
    rules,
    schedules,
    security,
    stream,
)
from . import config as settings
from .api import api
from .dashboard import dashboard
from .metrics import metrics
from .sampler import Sampler

log = logging.getLogger(__name__)

# Modules whose routes join the API blueprint when imported (the dashboard's package
# imports its own).
_ROUTES = (
    audit,
    bulk,
    operations,
    control,
    records,
    reveal,
    flows,
    schedules,
    limits,
    rules,
    stream,
    job_stream,
    openapi,
)

#: Library errors -> HTTP status.
_STATUS: tuple[tuple[type[Exception], int], ...] = (
    (JobNotFound, 404),
    (WorkerNotFound, 404),
    (BulkNotFound, 404),
    (PayloadTooLarge, 413),
    (ScheduleNotFound, 404),
    (InvalidJob, 400),
    (InvalidTransition, 409),
    (BulkCountChanged, 409),
    (ConnectionFailed, 503),
)


class _Json(DefaultJSONProvider):
    """Flask's JSON, but a body nested too deeply for the parser is bad input (400), not a
    ``RecursionError`` (500)."""

    sort_keys = False  # Kue's field order

    def loads(self, s: str | bytes, **kwargs: Any) -> Any:
        try:
            return super().loads(s, **kwargs)
        except RecursionError:
            raise ValueError("the JSON is nested too deeply") from None


class _Request(Request):
    """Flask's request, but a body that is not JSON says so, and where (Flask hides the
    parser's message outside debug mode)."""

    def on_json_loading_failed(self, e: ValueError | None) -> Any:
        if e is None:  # not sent as JSON: Flask's 415
            return super().on_json_loading_failed(e)
        raise BadRequest(f"the body is not valid JSON: {e}")


def create_app(config: Mapping[str, Any] | None = None) -> Flask:
    """A Flask app serving the dashboard at ``/`` and the JSON API under ``KUE_API_PREFIX``
    (see :mod:`kue_http.config` for every setting)."""
    app = Flask(__name__, static_folder=None, template_folder=None)  # the dashboard's own
    app.request_class = _Request
    app.config.update(settings.load(config))
    app.config["MAX_CONTENT_LENGTH"] = app.config["KUE_MAX_BODY"]
    app.json = _Json(app)
    url = app.config["KUE_REDIS_URL"]
    client = None
    if url:
        timeout = app.config["KUE_REDIS_TIMEOUT"]
        client = connection.from_url(
            url,
            route=app.config["KUE_PREFIX"],
            socket_timeout=timeout,
            socket_connect_timeout=timeout,
        )
    replicas = connection.url_options(url).get("replicas", 0) if url else 0
    try:
        app.extensions["kue"] = Queue(
            prefix=app.config["KUE_PREFIX"],
            client=client,
            replicas=replicas,
            encryption_keys=app.config[core_defaults.ENCRYPTION_KEYS_ENV] or "",
            max_data_bytes=app.config[core_defaults.MAX_DATA_BYTES_ENV],
            payload_store=app.config[core_defaults.PAYLOAD_STORE_ENV],
            max_payload_bytes=app.config[core_defaults.MAX_PAYLOAD_BYTES_ENV],
        )
    except InvalidJob as e:  # a payload limit or store it cannot use
        raise settings.ConfigError(str(e)) from None
    app.extensions["kue_streams"] = stream.Streams()
    if app.config["KUE_HISTORY_SAMPLE"] and not app.config["KUE_READONLY"]:
        sampler = app.extensions["kue_sampler"] = Sampler(app.extensions["kue"])
        sampler.ensure()
        app.before_request(sampler.ensure)  # again in a process forked from this one
    app.register_blueprint(api, url_prefix=app.config["KUE_API_PREFIX"])
    app.register_blueprint(metrics)
    app.register_blueprint(dashboard)
    security.init_app(app)
    _error_handlers(app)
    return app


def mount(host: Flask, path: str, config: Mapping[str, Any] | None = None) -> Flask:
    """Serve the dashboard and the API under ``path`` (``"/kue"``) inside another Flask app.

    The kue app keeps its own settings, security checks and error pages; requests under
    ``path`` go to it and every URL it makes starts with ``path``. Returns the kue app.
    """
    if not path.startswith("/") or path.endswith("/"):
        raise settings.ConfigError(f"mount path must start with / and not end with one: {path!r}")
    kue = create_app(config)
    host.wsgi_app = DispatcherMiddleware(host.wsgi_app, {path: kue.wsgi_app})  # type: ignore[method-assign]
    return kue


def close(app: Flask, timeout: float = 2.0) -> None:
    """For a server that stops: end the app's open event streams (waiting up to ``timeout``
    seconds) and its history sampler, then close its Redis connections."""
    app.extensions["kue_streams"].close(timeout)
    if "kue_sampler" in app.extensions:
        app.extensions["kue_sampler"].close()
    app.extensions["kue"].client.connection_pool.disconnect()


def _error_handlers(app: Flask) -> None:
    """JSON errors from the API, error pages from the dashboard."""

    api_prefix = app.config["KUE_API_PREFIX"] + "/"

    def page() -> bool:
        """Whether the request is for a dashboard page (routed, or not found outside the API)."""
        if request.blueprint is None:
            return not request.path.startswith(api_prefix)
        return request.blueprint == dashboard.name

    def reply(message: str, status: int, **details: Any) -> tuple[Response | str, int]:
        if page():
            return render_template("error.html", status=status, message=message), status
        return jsonify({"error": message, **details}), status

    @app.errorhandler(KueError)
    def kue_error(error: KueError) -> tuple[Response | str, int]:
        status = next((code for cls, code in _STATUS if isinstance(error, cls)), 400)
        if isinstance(error, HasDependents):  # the ids, for a client to act on
            return reply(str(error), status, dependents=error.dependents)
        if isinstance(error, BulkCountChanged):  # the count, for the operator to confirm
            return reply(str(error), status, matched=error.matched, expected=error.expected)
        if isinstance(error, PayloadTooLarge):  # both numbers, for the client to act on
            return reply(str(error), status, size=error.size, limit=error.limit)
        return reply(str(error), status)

    @app.errorhandler(redis.RedisError)
    def redis_error(error: redis.RedisError) -> tuple[Response | str, int]:
        log.warning("Redis error on %s %s: %s", request.method, request.path, error)
        return reply(f"Redis is unavailable: {error}", 503)

    @app.errorhandler(HTTPException)
    def http_error(error: HTTPException) -> WerkzeugResponse | tuple[Response | str, int]:
        if page():
            return reply(error.description or error.name, error.code or 500)
        response = error.get_response()
        body: dict[str, Any] = {"error": error.description or error.name}
        if isinstance(error, RequestEntityTooLarge):  # both numbers, as for a job's data
            size, limit = request.content_length, app.config["KUE_MAX_BODY"]
            body["limit"] = limit
            body["error"] = f"the body is larger than KUE_MAX_BODY ({limit:,} bytes)"
            if size:
                body["size"] = size
                body["error"] = f"the body is {size:,} bytes, above KUE_MAX_BODY of {limit:,} bytes"
        response.data = jsonify(body).get_data()
        response.content_type = "application/json"
        return response

    @app.errorhandler(Exception)
    def unexpected(error: Exception) -> tuple[Response | str, int]:
        log.exception("unexpected error on %s %s", request.method, request.path)
        return reply("internal error; see the server log", 500)
