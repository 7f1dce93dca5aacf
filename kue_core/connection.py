"""Redis URL -> client, or the embedded server (:mod:`kue_core.store.embedded`) when no URL is
given.

URLs name one server (``redis://``, ``rediss://``, ``unix://``), a Redis Cluster
(``redis+cluster://host:port,host:port``: any nodes, the rest are discovered) or a primary
found through Sentinel (``redis+sentinel://host:26379,host:26379/service``). Either of the
last two with ``rediss+`` uses TLS.

Any of them may end in ``?replicas=N``: saves then return only once N replicas have the jobs
(see :func:`url_options`).

Every process that uses the embedded default with the same data directory shares one
server: the first starts it, later ones connect, the last to leave shuts it down. A client of
it (made here from no URL, or from its ``unix://`` URL) starts it again if it is gone.
"""

from __future__ import annotations

import atexit
import inspect
import os
import re
import threading
import weakref
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, unquote

import redis
import redis.asyncio
import redis.asyncio.connection as aio_connection
import redis.asyncio.sentinel
import redis.sentinel

from . import defaults
from .base.errors import ConnectionFailed, InvalidJob
from .store import embedded as embedded_server
from .store import embedded_conn
from .store.aio_cluster import AsyncSlotPool
from .store.cluster import SlotPool, hash_tag

_embedded: dict[str, redis.Redis] = {}
_embedded_lock = threading.Lock()

#: client -> the (url, route, options) it was made from, so a child process can make its own.
_sources: weakref.WeakKeyDictionary[redis.Redis, tuple[str, str | None, dict[str, Any]]] = (
    weakref.WeakKeyDictionary()
)

#: scheme -> (kind, TLS) for the URLs that name more than one server.
TOPOLOGIES = {
    "redis+cluster": ("cluster", False),
    "rediss+cluster": ("cluster", True),
    "redis+sentinel": ("sentinel", False),
    "rediss+sentinel": ("sentinel", True),
}
#: Query options those URLs take: TLS files for the data nodes, credentials for sentinels.
_TOPOLOGY_OPTIONS = {
    "ssl_ca_certs",
    "ssl_certfile",
    "ssl_keyfile",
    "ssl_cert_reqs",
    "sentinel_username",
    "sentinel_password",
}

#: Client options shared by every connection kue_core opens.
CLIENT_OPTIONS: dict[str, Any] = {
    "decode_responses": True,
    "socket_connect_timeout": defaults.CONNECT_TIMEOUT,
    "socket_timeout": defaults.SOCKET_TIMEOUT,
    "socket_keepalive": True,
    "health_check_interval": 30,
}


def from_url(url: str, *, route: str | None = None, **options: Any) -> redis.Redis:
    """A client for ``url`` (see the module's doc); ``options`` add to or replace
    :data:`CLIENT_OPTIONS` (``socket_timeout=5`` for a web app, say).

    On a Redis Cluster the client serves one queue: ``route`` is its prefix, which must carry
    a hash tag (``{q}``) so that all its keys share one slot, and every command goes to the
    primary of that slot."""
    merged = {**CLIENT_OPTIONS, **options}
    given = url
    url, _ = _kue_options(url)
    scheme = url.partition("://")[0].lower()
    try:
        if scheme in TOPOLOGIES:
            client = _topology(url, route, merged)
        else:
            if scheme == "unix":
                merged.pop("socket_keepalive", None)  # a TCP option; unix sockets refuse it
            client = _embedded_client(url, merged) or redis.Redis.from_url(url, **merged)
    except ValueError as e:
        raise ConnectionFailed(f"invalid Redis URL {redact(url)!r}: {e}") from None
    _sources[client] = (given, route, options)
    return client


def _embedded_client(url: str, options: dict[str, Any]) -> redis.Redis | None:
    """A client for ``url`` if it names an embedded server's socket: one that starts the
    server again when it is gone (see :mod:`kue_core.store.embedded_conn`)."""
    settings = {**options, **redis.connection.parse_url(url)}  # type: ignore[no-untyped-call]
    sock = str(settings.pop("path", ""))
    data_dir = embedded_server.folder_of(sock)
    if data_dir is None:
        return None
    settings.pop("connection_class", None)
    return redis.Redis(connection_pool=embedded_conn.pool(sock, data_dir, **settings))


def url_options(url: str) -> dict[str, int]:
    """The options of kue's own in ``url``'s query (``replicas``: how many replicas must
    confirm a save, with Redis ``WAIT``, before it counts as acknowledged)."""
    return _kue_options(url)[1]


def _kue_options(url: str) -> tuple[str, dict[str, int]]:
    """``url`` without kue's own options, and those options."""
    base, sep, query = url.partition("?")
    if not sep:
        return url, {}
    kept, ours = [], {}
    for part in query.split("&"):
        name, _, value = part.partition("=")
        if name != "replicas":
            kept.append(part)
        elif value.isdigit() and len(value) < 3:
            ours[name] = int(value)
        else:
            raise ConnectionFailed(f"replicas must be a whole number from 0 to 99, got {value!r}")
    return base + ("?" + "&".join(kept) if kept else ""), ours


def base_url(url: str) -> str:
    """``url`` without kue's own query options (see :func:`url_options`)."""
    return _kue_options(url)[0]


def queue_prefix(prefix: object) -> str:
    """A queue's key prefix: ``prefix`` (checked), else ``$KUE_PREFIX``, else Kue's ``q``."""
    if prefix is None:
        prefix = os.environ.get(defaults.PREFIX_ENV) or defaults.PREFIX
    if not isinstance(prefix, str) or not prefix or any(c.isspace() for c in prefix):
        raise InvalidJob(f"prefix must be a non-empty string without spaces, got {prefix!r}")
    return prefix


def source(client: redis.Redis) -> tuple[str, str | None, dict[str, Any]] | None:
    """The ``(url, route, options)`` that :func:`from_url` made ``client`` from, if it did:
    another process passes them to :func:`from_url` for a client of its own."""
    return _sources.get(client)


@dataclass(frozen=True)
class Topology:
    """A cluster or Sentinel URL, read: the nodes it names and the settings of the
    connections to make (see :func:`topology`)."""

    kind: str  # "cluster" or "sentinel"
    nodes: list[tuple[str, int]]
    #: For the data connections (the slot owner's, or the primary's).
    settings: dict[str, Any]
    #: For the connections to the sentinels; empty on a cluster.
    sentinel_settings: dict[str, Any] = field(default_factory=dict)
    service: str = ""
    db: int = 0


def topology(url: str, route: str | None, options: dict[str, Any]) -> Topology:
    """Read a cluster or Sentinel URL, ``scheme://[user:password@]host:port,...
    [/service[/db]][?option=value&...]``, checked (``ValueError``, or ``ConnectionFailed``
    for a cluster ``route`` without a hash tag), for a blocking or an asyncio client."""
    scheme, _, rest = url.partition("://")
    kind, tls = TOPOLOGIES[scheme.lower()]
    rest, _, query = rest.partition("?")
    netloc, _, path = rest.partition("/")
    creds, _, hosts = netloc.rpartition("@")
    default_port = 26379 if kind == "sentinel" else 6379
    nodes = [_address(h, default_port) for h in hosts.split(",") if h]
    if not nodes:
        raise ValueError("no host given")
    settings = dict(options)
    if creds:
        user, _, password = creds.partition(":")
        settings.update(username=unquote(user) or None, password=unquote(password) or None)
    extra = {}
    for name, values in parse_qs(query, keep_blank_values=True).items():
        if name not in _TOPOLOGY_OPTIONS:
            known = ", ".join(sorted(_TOPOLOGY_OPTIONS))
            raise ValueError(f"unknown option {name!r}; known: {known}")
        extra[name] = values[-1]
    tls_files = {k: v for k, v in extra.items() if k.startswith("ssl_")}
    if tls:
        settings.update(ssl=True, **tls_files)
    parts = [unquote(p) for p in path.split("/") if p]
    if kind == "cluster":
        if parts not in ([], ["0"]):
            raise ValueError("a Redis Cluster has only database 0")
        if route is None or hash_tag(route) is None:
            raise ConnectionFailed(
                f"on a Redis Cluster the prefix must carry a hash tag, like '{{q}}', so that "
                f"every key of a queue is in one slot; got {route!r}"
            )
        return Topology(kind, nodes, settings)
    if not parts or len(parts) > 2 or (len(parts) == 2 and not parts[1].isdigit()):
        raise ValueError("name the Sentinel service and, optionally, the database: /service[/db]")
    sentinel_settings = {
        "socket_connect_timeout": settings.get("socket_connect_timeout"),
        "socket_timeout": settings.get("socket_connect_timeout"),
        "username": extra.get("sentinel_username"),
        "password": extra.get("sentinel_password"),
    }
    if tls:
        sentinel_settings.update(ssl=True, **tls_files)
    db = int(parts[1]) if len(parts) == 2 else 0
    return Topology(kind, nodes, settings, sentinel_settings, parts[0], db)


def _topology(url: str, route: str | None, options: dict[str, Any]) -> redis.Redis:
    """A blocking client for a cluster or Sentinel URL (see :func:`topology`)."""
    t = topology(url, route, options)
    if t.kind == "cluster":
        return redis.Redis(connection_pool=SlotPool(t.nodes, route or "", **t.settings))
    sentinel = redis.sentinel.Sentinel(t.nodes, sentinel_kwargs=t.sentinel_settings)  # type: ignore[no-untyped-call]
    client: redis.Redis = sentinel.master_for(t.service, db=t.db, **t.settings)  # type: ignore[no-untyped-call]
    return client


def _address(text: str, default_port: int) -> tuple[str, int]:
    """``host``, ``host:port`` or ``[v6]:port`` -> (host, port)."""
    if text.startswith("["):
        host, _, tail = text[1:].partition("]")
        port = tail.removeprefix(":")
    else:
        host, _, port = text.rpartition(":") if ":" in text else (text, "", "")
    if not host:
        raise ValueError(f"bad address {text!r}")
    if port and not port.isdigit():
        raise ValueError(f"bad port in {text!r}")
    return unquote(host), int(port) if port else default_port


def server_ms(client: redis.Redis) -> int:
    """Now on the Redis server's clock, in ms: the clock every due time, window and
    heartbeat of the queue is kept in (the scripts read ``TIME``)."""
    seconds, micros = client.time()
    return int(seconds) * 1000 + int(micros) // 1000


def redact(url: str) -> str:
    """The URL with any password replaced, so it can be shown in errors and logs."""
    scheme, sep, rest = url.partition("://")
    if sep and "@" in rest.partition("?")[0]:
        creds, _, host = rest.rpartition("@")
        user = creds.split(":", 1)[0]
        url = f"{scheme}://{user}:***@{host}"
    return re.sub(r"(password=)[^&]*", r"\1***", url)


def embedded_folder(data_dir: str | os.PathLike[str] | None = None) -> str:
    """The absolute folder of the embedded Redis's data (default ``./.kue``)."""
    return embedded_server.folder(data_dir)


def embedded_exists(data_dir: str | os.PathLike[str] | None = None) -> bool:
    """Whether the folder holds an embedded Redis's data (its snapshot or append-only file):
    :func:`embedded` there would find jobs, not start an empty server."""
    return embedded_server.exists(data_dir)


def embedded_url(data_dir: str | os.PathLike[str] | None = None) -> str:
    """The ``unix://`` URL of the embedded Redis (started if need be), for other processes."""
    socket_path = embedded(data_dir).connection_pool.connection_kwargs["path"]
    return f"unix://{socket_path}"


def embedded(data_dir: str | os.PathLike[str] | None = None) -> redis.Redis:
    """A client of the embedded Redis whose data lives in ``data_dir`` (default ``./.kue``),
    shared by this process's queues; the server is started if none answers there (see
    :mod:`kue_core.store.embedded`), and shut down at exit by the last process that used it."""
    path = embedded_folder(data_dir)
    with _embedded_lock:
        client = _embedded.get(path)
        if client is None:
            sock = embedded_server.start(path)
            client = from_url(f"unix://{sock}")
            atexit.register(_leave_embedded, path, sock, client)
            _embedded[path] = client
        return client


def _leave_embedded(path: str, sock: str, client: redis.Redis) -> None:
    """At exit: this process's connections close, and the server stops if it was the last."""
    client.connection_pool.disconnect()
    embedded_server.stop(path, sock)


# -- asyncio clients ------------------------------------------------------------------------
def async_client(
    url: str | None, data_dir: str | os.PathLike[str] | None, prefix: str
) -> redis.asyncio.Redis:
    """An asyncio client for ``url`` (any URL :func:`from_url` takes: one server, a cluster,
    Sentinel), or for the embedded Redis (started if need be) when there is none."""
    options = dict(CLIENT_OPTIONS)
    url = base_url(url) if url else embedded_url(data_dir)
    scheme = url.partition("://")[0].lower()
    if scheme == "unix":
        options.pop("socket_keepalive", None)  # a TCP option; unix sockets refuse it
    # Calls at once are bounded by AsyncTransport (AIO_CONNECTIONS), event streams by their
    # listeners: the pool itself never refuses a connection.
    options["max_connections"] = 2**31 - 1
    try:
        if scheme not in TOPOLOGIES:
            pool = _async_embedded_pool(url, options) or redis.asyncio.ConnectionPool.from_url(
                url, **options
            )
            return redis.asyncio.Redis.from_pool(pool)
        t = topology(url, prefix, options)
    except ValueError as e:
        raise ConnectionFailed(f"invalid Redis URL {redact(url)!r}: {e}") from None
    if t.kind == "cluster":
        return redis.asyncio.Redis.from_pool(AsyncSlotPool(t.nodes, prefix, **t.settings))
    sentinel = redis.asyncio.sentinel.Sentinel(t.nodes, sentinel_kwargs=t.sentinel_settings)  # type: ignore[no-untyped-call]
    client: redis.asyncio.Redis = sentinel.master_for(t.service, db=t.db, **t.settings)
    return client


def _async_embedded_pool(url: str, options: dict[str, Any]) -> redis.asyncio.ConnectionPool | None:
    """A pool for ``url`` if it names an embedded server's socket: its connections start the
    server again when it is gone (see :mod:`kue_core.store.embedded_conn`)."""
    if url.partition("://")[0].lower() != "unix":
        return None
    settings = {**options, **redis.asyncio.connection.parse_url(url)}
    sock = str(settings.pop("path", ""))
    data_dir = embedded_server.folder_of(sock)
    if data_dir is None:
        return None
    settings.pop("connection_class", None)
    return embedded_conn.async_pool(sock, data_dir, **settings)


#: A blocking connection class -> its asyncio counterpart, for :func:`async_twin`.
_TWINS: dict[type[Any], type[Any]] = {
    redis.connection.Connection: aio_connection.Connection,
    redis.connection.SSLConnection: aio_connection.SSLConnection,
    redis.connection.UnixDomainSocketConnection: aio_connection.UnixDomainSocketConnection,
    embedded_conn.EmbeddedConnection: embedded_conn.AsyncEmbeddedConnection,
}


#: Connection settings that hold objects of the blocking client's own.
_OWN = frozenset({"retry", "redis_connect_func", "maint_notifications_config"})


def async_twin(client: redis.Redis, prefix: str) -> redis.asyncio.Redis | None:
    """An asyncio client to the server ``client`` talks to, with its settings: made from the
    same URL when :func:`from_url` made ``client``, else from its pool's connection settings
    (a plain or a blocking pool: the twin's pool is its own, a plain one); None for a client
    of a kind it cannot copy (a pool of another class: a Sentinel's own, say)."""
    made_from = source(client)
    if made_from is not None:
        url, _, options = made_from
        twin = async_client(url, None, prefix)
        if options:  # a caller's own options (socket_timeout=5, say) hold for the twin too
            twin.connection_pool.connection_kwargs.update(options)
        return twin
    pool = client.connection_pool
    plain = type(pool) in (redis.ConnectionPool, redis.BlockingConnectionPool)
    kind = _TWINS.get(pool.connection_class) if plain else None
    if kind is None:
        return None
    accepted = set(inspect.signature(kind.__init__).parameters) | set(
        inspect.signature(redis.asyncio.connection.AbstractConnection.__init__).parameters
    )
    # Objects made for blocking connections (a retry policy, a connect hook) are left out:
    # the asyncio connection makes its own.
    kwargs = {k: v for k, v in pool.connection_kwargs.items() if k in accepted and k not in _OWN}
    twin_pool = redis.asyncio.ConnectionPool(connection_class=kind, **kwargs)
    return redis.asyncio.Redis.from_pool(twin_pool)
