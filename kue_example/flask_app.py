"""Recipe: a Flask application that serves kue's dashboard and API under ``/admin/queue``,
behind its own login (see docs/recipes.md).

The dashboard is a Flask app of its own, mounted inside this one (``kue_http.mount``); a
check of this app's session runs before every request it serves: pages send strangers to
the login form, the API answers them 401, and a signed-in user who is not an admin gets 403.
The dashboard's own protections (CSRF on writes, escaping, security headers) stay on::

    APP_SECRET_KEY=... APP_ADMIN_PASSWORD=... flask --app kue_example.flask_app run

(Flask finds :func:`create_app`; ``KUE_REDIS_URL`` and the other ``KUE_*`` settings apply.)
"""

from __future__ import annotations

import hmac
import os
import secrets
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote, urlsplit

from flask import Flask, Response, abort, jsonify, redirect, request, session
from markupsafe import escape
from werkzeug.security import check_password_hash, generate_password_hash
from werkzeug.wrappers import Response as Reply

from kue_http import mount

MOUNT = "/admin/queue"


def _local(target: str) -> str:
    """``target`` if it is a path of this site, else ``/``: never another host, however it is
    spelt (``//host``, ``/\\host``, ``https:``, control characters)."""
    parts = urlsplit(target)
    if (
        not target.startswith("/")
        or parts.scheme
        or parts.netloc
        or "\\" in target
        or any(ord(c) < 32 or ord(c) == 127 for c in target)
        or target.startswith("//")
    ):
        return "/"
    return target


def create_app(
    users: Mapping[str, tuple[str, bool]] | None = None,
    kue_config: Mapping[str, Any] | None = None,
) -> Flask:
    """The application. ``users``: name -> (password hash, is admin); by default one admin,
    ``admin``, whose password is ``$APP_ADMIN_PASSWORD``. ``kue_config``: the dashboard's
    settings (see ``kue_http.config``; ``KUE_*`` variables otherwise)."""
    app = Flask(__name__)
    app.secret_key = os.environ.get("APP_SECRET_KEY") or secrets.token_hex(32)
    if users is None:
        password = os.environ.get("APP_ADMIN_PASSWORD")
        users = {"admin": (generate_password_hash(password), True)} if password else {}
    accounts = dict(users)

    @app.get("/")
    def home() -> str:
        who = session.get("user")
        if who is None:
            return '<p>Welcome. <a href="/login">Sign in</a></p>'
        return (
            f'<p>Signed in as {escape(who)}. <a href="{MOUNT}/">Queue</a></p>'
            '<form method="post" action="/logout">'
            f'<input type="hidden" name="csrf" value="{escape(session["csrf"])}">'
            "<button>Sign out</button></form>"
        )

    def form_checked() -> None:
        """The form's token must be this session's: no other site can post it."""
        expected = session.get("csrf", "")
        if not expected or not hmac.compare_digest(request.form.get("csrf", ""), expected):
            abort(400, "the form expired: load it again")

    @app.get("/login")
    def login_form() -> str:
        session.setdefault("csrf", secrets.token_urlsafe(24))
        target = escape(request.args.get("next", "/"))
        return (
            '<form method="post" action="/login">'
            f'<input type="hidden" name="csrf" value="{escape(session["csrf"])}">'
            f'<input type="hidden" name="next" value="{target}">'
            '<input name="user" autocomplete="username">'
            '<input name="password" type="password" autocomplete="current-password">'
            "<button>Sign in</button></form>"
        )

    @app.post("/login")
    def login() -> Reply | tuple[str, int]:
        form_checked()
        name = request.form.get("user", "")
        account = accounts.get(name)
        if account is None or not check_password_hash(account[0], request.form.get("password", "")):
            return "wrong user or password", 401
        session.clear()  # a new session on sign-in
        session["user"] = name
        session["csrf"] = secrets.token_urlsafe(24)
        return redirect(_local(request.form.get("next", "/")))

    @app.post("/logout")
    def logout() -> Reply:
        form_checked()
        session.clear()
        return redirect("/")

    kue = mount(app, MOUNT, kue_config)

    def admins_only() -> Reply | tuple[Response, int] | None:
        """Before every request the dashboard serves: this app's session decides."""
        own = app.session_interface.open_session(app, request)  # the host's cookie
        name = own.get("user") if own is not None else None
        api = request.path.startswith(kue.config["KUE_API_PREFIX"] + "/")
        if name is None:
            if api:
                return jsonify(error="sign in first"), 401
            here = request.full_path if request.query_string else request.path
            return redirect("/login?next=" + quote(request.script_root + here))
        if not accounts.get(name, ("", False))[1]:
            return jsonify(error="admins only"), 403
        return None

    # First of the dashboard's checks: a stranger is turned away before anything else.
    kue.before_request_funcs.setdefault(None, []).insert(0, admins_only)
    return app
