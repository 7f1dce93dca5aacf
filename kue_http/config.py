"""Settings of the HTTP app: the ``config`` argument first, then ``KUE_*`` environment variables,
then the defaults below. Invalid values stop the app at start-up with a clear message."""

from __future__ import annotations

import importlib
import os
import re
from collections.abc import Mapping
from typing import Any

from kue_core import InvalidEncryptionKeys, sealing
from kue_core import defaults as core_defaults

from . import redaction, users

#: Every setting, with its default.
DEFAULTS: dict[str, Any] = {
    # Redis URL; None: $KUE_REDIS_URL, else the embedded Redis (as ``kue_core.Queue``).
    "KUE_REDIS_URL": None,
    # Key prefix; as ``kue_core.Queue``: an empty environment variable counts as unset.
    core_defaults.PREFIX_ENV: core_defaults.PREFIX,
    # Where the JSON API is mounted.
    "KUE_API_PREFIX": "/api",
    # Seconds a request may wait for Redis before it is answered 503 (never a hang).
    "KUE_REDIS_TIMEOUT": 5.0,
    # Largest request body accepted, in bytes (larger: 413).
    "KUE_MAX_BODY": 1024 * 1024,
    # Largest page of jobs one listing returns.
    "KUE_MAX_PAGE": 1000,
    # No writes at all: every write route answers 405.
    "KUE_READONLY": False,
    # Who may use the app: "basic:<user>:<password>" (HTTP basic auth), "bearer:<token>"
    # (Authorization: Bearer <token>), or None for no authentication.
    "KUE_AUTH": None,
    # Users with roles (viewer, operator, admin; see kue_http/users.py): "name:password:role",
    # comma-separated, and a file of them, one a line. Beside KUE_AUTH, which is one admin.
    "KUE_USERS": None,
    "KUE_USERS_FILE": None,
    # Who the request's user is, decided by the app kue is mounted in (see kue_http/users.py):
    # a function of the request that returns a kue_http.User or None, or "module:function"
    # naming one; None: kue's own authentication alone.
    "KUE_AUTHENTICATE": None,
    # Payload fields masked for every role, admin included, until revealed (see
    # kue_http/redaction.py): "<type>:<path>", comma-separated, * for every type, a path of
    # keys joined by dots ("signup:password,charge:card.number,*:token").
    "KUE_SENSITIVE_FIELDS": None,
    # The role from which a user may reveal a job's hidden payload (each reveal recorded in
    # the audit log): viewer, operator or admin.
    "KUE_REVEAL_ROLE": "admin",
    # Seconds POST /jobs/bulk waits for its action to end before it answers 202, with the
    # progress so far and where to follow it (the action goes on in the server process).
    "KUE_BULK_WAIT": 1.0,
    # Sample the statistics' history in the server process too (each minute once, whichever
    # process of the queue comes first), so that it is kept while no kue worker runs; never
    # in read-only mode.
    "KUE_HISTORY_SAMPLE": True,
    # Seconds between keep-alive comments on an idle event stream.
    "KUE_SSE_KEEPALIVE": 15.0,
    # The queue's encryption keys (as ``kue_core.Queue(encryption_keys=...)``, docs/security.md):
    # "<key id>:<32 bytes in base64>", comma-separated, the first the one that encrypts; None:
    # none, the jobs are read and written in clear.
    core_defaults.ENCRYPTION_KEYS_ENV: None,
    # The queue's payload limits and store (as kue_core.Queue(max_data_bytes=,
    # payload_store=, max_payload_bytes=), docs/payloads.md): a job's data larger than the
    # first goes to the store (a file:///path or s3://bucket/prefix URL), or, without one, is
    # refused (413); None: as kue_core.Queue reads the environment.
    core_defaults.MAX_DATA_BYTES_ENV: None,
    core_defaults.PAYLOAD_STORE_ENV: None,
    core_defaults.MAX_PAYLOAD_BYTES_ENV: None,
    # Where the job page links a job's trace: an http(s) URL with {trace_id} in it (Jaeger:
    # "http://jaeger:16686/trace/{trace_id}"); None: the trace id is shown as text.
    "KUE_TRACE_URL": None,
}

#: Settings whose environment variable, when empty, counts as not set (the ``kue`` command
#: and ``kue_core.Queue`` read it so).
_EMPTY_IS_UNSET = {core_defaults.PREFIX_ENV}

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


class ConfigError(ValueError):
    """A setting has a value the app cannot use."""


def load(config: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The settings: ``config``, then the environment, then :data:`DEFAULTS`, all checked;
    ``kue_users`` is the users they name, read (see kue_http/users.py)."""
    given = dict(config or {})
    out: dict[str, Any] = {}
    for name, default in DEFAULTS.items():
        if name in given:
            value = given.pop(name)
        elif name in os.environ and (os.environ[name] or name not in _EMPTY_IS_UNSET):
            value = os.environ[name]
        else:
            value = default
        out[name] = _check(name, value, default)
    out.update(given)  # other Flask settings pass through
    try:
        out["kue_users"] = users.from_settings(out["KUE_USERS"], out["KUE_USERS_FILE"])
        out["kue_sensitive"] = redaction.parse_sensitive(out["KUE_SENSITIVE_FIELDS"])
        out["KUE_REVEAL_ROLE"] = redaction.check_role(out["KUE_REVEAL_ROLE"])
    except (users.UsersError, redaction.SensitiveError) as e:
        raise ConfigError(str(e)) from None
    return out


def _check(name: str, value: Any, default: Any) -> Any:
    if value is None:
        return None
    if isinstance(default, bool):
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if text in _TRUE:
            return True
        if text in _FALSE:
            return False
        raise ConfigError(f"{name} must be true or false, got {value!r}")
    if isinstance(default, int | float):
        try:
            number = type(default)(value)
        except (TypeError, ValueError):
            raise ConfigError(f"{name} must be a positive number, got {value!r}") from None
        if number <= 0:
            raise ConfigError(f"{name} must be a positive number, got {value!r}")
        return number
    text = str(value)
    if name == "KUE_AUTH":
        return _check_auth(text)
    if name == "KUE_TRACE_URL":
        return _check_trace_url(text)
    if name == core_defaults.ENCRYPTION_KEYS_ENV:
        return _check_keys(text)
    if name == "KUE_AUTHENTICATE":
        return _check_hook(value)
    if name == "KUE_API_PREFIX" and (not text.startswith("/") or text.endswith("/")):
        raise ConfigError(f"{name} must start with / and not end with one, got {value!r}")
    return text


def _check_trace_url(text: str) -> str | None:
    if not text:
        return None
    if not re.fullmatch(r"https?://[^\s\"'<>]+", text) or text.count("{trace_id}") != 1:
        raise ConfigError(
            f"KUE_TRACE_URL must be an http(s) URL with {{trace_id}} in it once, got {text!r}"
        )
    return text


def _check_keys(text: str) -> str:
    """Encryption keys a queue takes; the error says what is wrong, never the keys."""
    try:
        sealing.keyring(text)
    except InvalidEncryptionKeys as e:
        raise ConfigError(f"{core_defaults.ENCRYPTION_KEYS_ENV}: {e}") from None
    return text


def _check_hook(value: Any) -> Any:
    """A function of the request, or ``"module:function"`` naming one (imported now)."""
    if callable(value):
        return value
    if not str(value).strip():
        return None
    module, colon, attr = str(value).partition(":")
    if not colon or not module or not attr:
        raise ConfigError(f"KUE_AUTHENTICATE must be a function or module:function, got {value!r}")
    try:
        found = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as e:
        raise ConfigError(f"KUE_AUTHENTICATE: cannot load {value!r}: {e}") from None
    if not callable(found):
        raise ConfigError(f"KUE_AUTHENTICATE: {value!r} is not a function")
    return found


def _check_auth(text: str) -> str | None:
    """``basic:<user>:<password>`` or ``bearer:<token>``; the error never repeats the value,
    which holds a secret."""
    if not text:
        return None
    scheme, _, secret = text.partition(":")
    user, colon, password = secret.partition(":")
    if (scheme == "basic" and user and colon and password) or (scheme == "bearer" and secret):
        return text
    raise ConfigError(
        "KUE_AUTH must be basic:<user>:<password> or bearer:<token> (value not shown)"
    )
