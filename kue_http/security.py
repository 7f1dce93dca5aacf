"""What every request passes before a route runs, and what every response carries.

- **Authentication** (``KUE_AUTH``): HTTP basic auth or a bearer token, compared in constant
  time. The health check stays open, so that a load balancer can probe it; it tells nothing
  but up or down.
- **Users with roles** (``KUE_USERS``, ``KUE_USERS_FILE``; kue_http/users.py): a write needs
  the ``operator`` role, one of :data:`ADMIN_WRITES` the ``admin`` role, a reveal the role of
  ``KUE_REVEAL_ROLE``; short of it, 403.
- **Read-only mode** (``KUE_READONLY``): every write method answers 405.
- **CSRF**: a cross-site page can make a browser send a GET, or a POST with a form or text
  body, but nothing else without a CORS preflight, which this app never approves. So a write
  must not carry a body other than JSON, a POST must carry JSON, and a write from a browser
  (which names its ``Origin``) must come from this app's own origin.
- **Headers**: no CORS headers at all; no sniffing, no framing, no referrer, a strict
  Content Security Policy, and no caching of answers that hold job data.
"""

from __future__ import annotations

import hmac
from urllib.parse import urlsplit

from flask import Flask, Response, current_app, g, jsonify, request
from werkzeug.exceptions import Forbidden, MethodNotAllowed, UnsupportedMediaType

from . import users

WRITES = frozenset({"POST", "PUT", "PATCH", "DELETE"})

#: Writes only an ``admin`` may make: the queue's settings, and a job's data, which a role
#: below is not shown (kue_http/redaction.py).
ADMIN_WRITES = frozenset(
    {
        "kue_api.set_retention",
        "kue_api.put_limits",
        "kue_api.remove_limits",
        "kue_api.put_schedule",
        "kue_api.remove_schedule",
        "kue_api.pause_schedule",
        "kue_api.resume_schedule",
        "kue_api.update_data",
    }
)
#: The write whose role is the ``KUE_REVEAL_ROLE`` setting.
REVEAL = "kue_api.reveal"

#: Endpoints served without authentication.
OPEN_ENDPOINTS = frozenset({"kue_api.health"})

HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Content-Security-Policy": (
        "default-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'none'; "
        "form-action 'self'; frame-ancestors 'none'"
    ),
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Resource-Policy": "same-origin",
}


def init_app(app: Flask) -> None:
    app.before_request(_guard)
    app.after_request(_headers)


def _guard() -> Response | None:
    user = _authenticated()
    if request.endpoint not in OPEN_ENDPOINTS and user is None:
        return _challenge()
    g.kue_user = user or users.ANYONE
    if request.method in WRITES and request.routing_exception is None:  # 404, 405 first
        if current_app.config["KUE_READONLY"]:
            raise MethodNotAllowed(description="this dashboard is read-only")
        needed = needed_role(request.endpoint)
        if not g.kue_user.may(needed):
            raise Forbidden(
                description=f"the {g.kue_user.role} role may only read"
                if g.kue_user.role == "viewer" and needed != "viewer"
                else f"this needs the {needed} role; yours is {g.kue_user.role}"
            )
        _check_csrf()
    return None


def needed_role(endpoint: str | None) -> str:
    """The role a write to ``endpoint`` needs."""
    if endpoint == REVEAL:
        role: str = current_app.config["KUE_REVEAL_ROLE"]
        return role
    return "admin" if endpoint in ADMIN_WRITES else "operator"


def user() -> users.User:
    """Who makes the request (see kue_http/users.py)."""
    return g.get("kue_user") or users.ANYONE


def _authenticated() -> users.User | None:
    """Who the request's user is: the host app's (``KUE_AUTHENTICATE``), ``KUE_AUTH``'s admin,
    one of the users, or nobody (None); anyone an admin when none of them is set."""
    hook = current_app.config["KUE_AUTHENTICATE"]
    if hook is not None:
        found = hook(request)
        if found is not None:
            if not isinstance(found, users.User) or found.role not in users.ROLES:
                raise TypeError(f"KUE_AUTHENTICATE returned {found!r}, not a kue_http.User")
            return found
    setting: str | None = current_app.config["KUE_AUTH"]
    known = current_app.config["kue_users"]
    if not setting and not known:
        return None if hook is not None else users.ANYONE
    given = request.authorization
    if given is None:
        return None
    if given.type == "bearer":
        name, secret = "", given.token or ""
    else:
        name, secret = given.username or "", given.password or ""
    if setting:
        scheme, _, expected = setting.partition(":")
        supplied = secret if scheme == "bearer" else f"{name}:{secret}"
        if given.type == scheme and hmac.compare_digest(supplied.encode(), expected.encode()):
            return users.User(name or "token", "admin")
    return users.signed_in(known, given.type, name, secret)


def _challenge() -> Response:
    setting = current_app.config["KUE_AUTH"] or ""
    scheme = "basic" if current_app.config["kue_users"] else setting.partition(":")[0]
    response = jsonify({"error": "authentication required"})
    response.status_code = 401
    if scheme == "basic":
        response.headers["WWW-Authenticate"] = 'Basic realm="kue", charset="UTF-8"'
    elif scheme == "bearer":
        response.headers["WWW-Authenticate"] = 'Bearer realm="kue"'
    return response


def _check_csrf() -> None:
    has_body = bool(request.content_length) or "chunked" in request.headers.get(
        "Transfer-Encoding", ""
    )
    if (has_body or request.method == "POST") and not request.is_json:
        raise UnsupportedMediaType(description="a write must send its body as application/json")
    origin = request.headers.get("Origin")
    if origin is not None and _origin(origin) != _origin(request.host_url):
        raise Forbidden(description="a write must come from this site (Origin does not match)")


def _origin(url: str) -> tuple[str, str]:
    parts = urlsplit(url)
    return parts.scheme, parts.netloc.lower()


def _headers(response: Response) -> Response:
    for name, value in HEADERS.items():
        response.headers.setdefault(name, value)
    if response.mimetype in ("application/json", "text/event-stream"):
        response.headers.setdefault("Cache-Control", "no-store")
    return response
