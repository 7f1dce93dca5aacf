"""kue_http: the Flask app factory, Kue's JSON API and the live dashboard.

Run it with ``gunicorn "kue_http:create_app()"``; settings come from ``KUE_*`` environment
variables (see :mod:`kue_http.config`). ``mount(app, "/kue")`` serves it inside another app.
"""

from .app import close, create_app, mount
from .config import ConfigError
from .users import User

__all__ = ["ConfigError", "User", "close", "create_app", "mount"]
