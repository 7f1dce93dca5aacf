"""kue_http: the Flask app factory and Kue's JSON API (the dashboard is to come).

Run it with ``gunicorn "kue_http:create_app()"``; settings come from ``KUE_*`` environment
variables (see :mod:`kue_http.config`).
"""

from .app import create_app
from .config import ConfigError

__all__ = ["ConfigError", "create_app"]
