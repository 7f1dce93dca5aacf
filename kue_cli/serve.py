"""Serving the app: werkzeug's development server in a thread, or gunicorn (gthread)."""

from __future__ import annotations

import socket
import threading
from typing import Any

from flask import Flask
from gunicorn.app.base import BaseApplication
from werkzeug.serving import BaseWSGIServer, make_server

from kue_http import close, create_app

from .errors import Unavailable


class DevServer:
    """werkzeug's threaded server, serving in a background thread."""

    def __init__(self, server: BaseWSGIServer, app: Flask) -> None:
        self._server = server
        self._app = app
        self.url = f"http://{netloc(server.host, server.port)}"
        self._thread = threading.Thread(target=server.serve_forever, name="kue-http", daemon=True)
        self._thread.start()

    def shutdown(self) -> None:
        """Stop serving; end the event streams still open and close the app's Redis
        connections (so that an embedded Redis sees this process leave)."""
        self._server.shutdown()
        self._thread.join()
        close(self._app)


def start_dev_server(app: Flask, host: str, port: int) -> DevServer:
    check_port(host, port)  # werkzeug prints its own message and exits 1 on a taken port
    return DevServer(make_server(host, port, app, threaded=True), app)


def check_port(host: str, port: int) -> None:
    """Fail now, with a clear message, when ``host:port`` cannot be listened on."""
    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
        with socket.create_server((host, port), family=family):
            pass
    except OSError as e:
        raise Unavailable(f"cannot listen on {netloc(host, port)}: {e.strerror or e}") from None


def netloc(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


class _Gunicorn(BaseApplication):  # type: ignore[misc]
    """gunicorn running ``create_app(config)`` in each of its worker processes."""

    def __init__(self, config: dict[str, Any], options: dict[str, Any]) -> None:
        self.app_config = config
        self.options = options
        super().__init__()

    def load_config(self) -> None:
        for key, value in self.options.items():
            self.cfg.set(key, value)

    def load(self) -> Flask:
        return create_app(self.app_config)


def run_gunicorn(config: dict[str, Any], host: str, port: int, workers: int, threads: int) -> None:
    """Serve until gunicorn is told to stop (SIGTERM: gracefully; SIGINT: at once)."""
    _Gunicorn(
        config,
        {
            "bind": netloc(host, port),
            "workers": workers,
            "worker_class": "gthread",
            "threads": threads,
            "graceful_timeout": 10,
        },
    ).run()
