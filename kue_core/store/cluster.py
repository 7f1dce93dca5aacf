"""Redis Cluster: a connection pool whose connections all go to the primary of one hash slot.

Every key of a queue carries the prefix, and a prefix with a hash tag (``{q}``) puts them all
in one slot; so one queue needs exactly one node, the primary that owns that slot, and the
transition scripts stay atomic. Everything kue_core does (Lua, pipelines, blocking waits with
``CLIENT UNBLOCK``, pub/sub, whose messages a cluster forwards to every node) then runs
unchanged on a plain :class:`redis.Redis` over this pool.

The pool finds the owner with ``CLUSTER SLOTS`` on any node it knows, and finds it again
when the slot moves (a ``MOVED`` reply names the new owner) or the owner stops answering
(failover). A ``MOVED`` reply means the command did not run: it surfaces as
:class:`Redirected`, a ``ConnectionError`` that redis-py's retries and ours resend.

While the slot migrates, its keys are split between two nodes and no script can see the
whole queue: ``ASK`` replies and scripts stopped at their fence (see ``lib/fence.lua``) are
:class:`Redirected` too, and are resent until the slot has moved.
"""

from __future__ import annotations

import threading
from typing import Any

import redis
from redis.backoff import ExponentialBackoff
from redis.connection import Connection, SSLConnection
from redis.crc import key_slot
from redis.exceptions import (
    AskError,
    ClusterDownError,
    MovedError,
    ResponseError,
    TryAgainError,
)
from redis.retry import Retry

from ..base.values import text

#: Settings a discovery connection keeps from the data connections (the rest are for those).
_DISCOVERY_SETTINGS = (
    "username",
    "password",
    "socket_connect_timeout",
    "ssl_ca_certs",
    "ssl_certfile",
    "ssl_keyfile",
    "ssl_cert_reqs",
)


#: In the error Redis gives a script that reads a key of a slot being migrated away (Redis
#: 6.2 says "Lua script attempted...", 7 "Script attempted...", Valkey 9 "Attempted to access
#: a non local key in a cluster node script"; read without case): the script stopped there.
_SCRIPT_FENCED = "attempted to access a non local key in a cluster node"


class Redirected(redis.ConnectionError):
    """The slot is served elsewhere, or nowhere for now: the command did not run.
    ``elsewhere``: whether the connection must be made again (to another node, or to ask
    the cluster again) before the command is sent again."""

    def __init__(self, message: str, *, elsewhere: bool = True) -> None:
        super().__init__(message)
        self.elsewhere = elsewhere


def hash_tag(prefix: str) -> str | None:
    """The hash tag of ``prefix`` as Redis Cluster reads it (the text between the first
    ``{`` and the first ``}`` after it, if not empty); None when it has none."""
    start = prefix.find("{")
    if start < 0:
        return None
    end = prefix.find("}", start + 1)
    if end <= start + 1:
        return None
    return prefix[start + 1 : end]


class SlotMap:
    """Where one slot is served, as last heard (what the blocking and the asyncio owners share;
    they differ in how they ask the cluster)."""

    def __init__(self, nodes: list[tuple[str, int]], slot: int, settings: dict[str, Any]) -> None:
        self.slot = slot
        self._nodes = list(nodes)
        self._settings = {k: v for k, v in settings.items() if k in _DISCOVERY_SETTINGS}
        self._ssl = bool(settings.get("ssl"))
        self._address: tuple[str, int] | None = None
        self._lock = threading.Lock()

    def known(self) -> tuple[str, int] | None:
        """The owner as last heard; None until asked, or once forgotten."""
        return self._address

    def moved(self, address: tuple[str, int]) -> None:
        with self._lock:
            self._address = address
            if address not in self._nodes:
                self._nodes.append(address)

    def forget(self) -> None:
        with self._lock:
            self._address = None

    def _probe_settings(self) -> dict[str, Any]:
        """Settings of a connection that asks a node for ``CLUSTER SLOTS``."""
        timeout = self._settings.get("socket_connect_timeout")
        return {"socket_timeout": timeout, "ssl": self._ssl, **self._settings}

    def _read(self, host: str, slots: list[Any]) -> tuple[str, int] | None:
        """The primary serving the slot in ``host``'s ``CLUSTER SLOTS`` reply (learning every
        node it names); None when the reply gives it none."""
        for row in slots:
            start, end, primary = row[0], row[1], row[2]
            if start <= self.slot <= end:
                for node in slots_nodes(slots, host):
                    if node not in self._nodes:
                        self._nodes.append(node)
                return text(primary[0]) or host, int(primary[1])
        return None

    def _none_serves(self, errors: list[str]) -> redis.ConnectionError:
        return redis.ConnectionError(
            f"no Redis Cluster node serves slot {self.slot}: " + "; ".join(errors)
        )


class SlotOwner(SlotMap):
    """Where one slot is served: asked of the cluster, remembered until it changes."""

    def address(self) -> tuple[str, int]:
        with self._lock:
            if self._address is None:
                self._address = self._discover()
            return self._address

    def _discover(self) -> tuple[str, int]:
        errors = []
        for host, port in list(self._nodes):
            probe = redis.Redis(host=host, port=port, **self._probe_settings())
            try:
                slots = probe.execute_command("CLUSTER SLOTS")  # type: ignore[no-untyped-call]
            except redis.RedisError as e:
                errors.append(f"{host}:{port}: {e}")
                continue
            finally:
                probe.close()
            owner = self._read(host, slots)
            if owner is not None:
                return owner
            errors.append(f"{host}:{port}: slot {self.slot} has no primary")
        raise self._none_serves(errors)


def redirected(error: ResponseError, owner: SlotMap) -> Redirected | None:
    """The :class:`Redirected` that Redis Cluster's ``error`` reply means, having told
    ``owner`` what it learnt; None for any other error."""
    if isinstance(error, MovedError):  # (a kind of AskError: first)
        owner.moved((error.host, int(error.port)))
        return Redirected(f"slot {error.slot_id} moved to {error.host}:{error.port}")
    if isinstance(error, ClusterDownError):
        owner.forget()
        return Redirected(f"the cluster cannot serve slot {owner.slot}: {error}")
    if isinstance(error, TryAgainError):  # keys split by a migration: the owner is the same
        return Redirected(f"slot {owner.slot} is migrating: {error}", elsewhere=False)
    if isinstance(error, AskError):
        # The slot is migrating and this key has moved (or is new). Asking the target would
        # split a queue's keys between two nodes: wait until the slot has moved, when the
        # owner answers MOVED.
        return Redirected(
            f"slot {error.slot_id} is migrating to {error.host}:{error.port}", elsewhere=False
        )
    if _SCRIPT_FENCED in str(error).lower():
        # A script met its fence (lib/fence.lua) on a migrating slot, before any write.
        return Redirected(f"slot {owner.slot} is migrating", elsewhere=False)
    return None


def slots_nodes(slots: list[Any], host: str) -> list[tuple[str, int]]:
    """Every node named in a ``CLUSTER SLOTS`` reply got from ``host``, primaries and
    replicas (an empty host is the one asked)."""
    return [(text(node[0]) or host, int(node[1])) for row in slots for node in row[2:]]


class _SlotConnection(Connection):
    """A connection to whichever primary serves the pool's slot now."""

    def __init__(self, *, slot_owner: SlotOwner, **kwargs: Any) -> None:
        self.slot_owner = slot_owner
        super().__init__(**kwargs)  # type: ignore[no-untyped-call]

    def connect_check_health(self, *args: Any, **kwargs: Any) -> None:
        address = self.slot_owner.address()
        if self._sock:
            if (self.host, self.port) == address:
                return
            # Pooled while the slot moved: a command without a key (SCRIPT LOAD, WAIT,
            # PUBLISH) would still go to the old owner and never be redirected.
            self.disconnect()
        self.host, self.port = address
        try:
            super().connect_check_health(*args, **kwargs)
        except redis.ConnectionError:
            self.slot_owner.forget()  # failed over, perhaps: ask the cluster again
            raise

    def read_response(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return super().read_response(*args, **kwargs)
        except ResponseError as e:
            redirect = redirected(e, self.slot_owner)
            if redirect is None:
                raise
            # One error reply: the connection is in step. Whoever reads it drops the
            # connection when the redirect is ``elsewhere`` (redis-py does, for a
            # ConnectionError), once the replies it waits for are read.
            raise redirect from None


class _SlotSSLConnection(_SlotConnection, SSLConnection):
    pass


class SlotPool(redis.ConnectionPool):
    """A pool of connections to the primary serving the slot of ``route`` (a key, or a prefix
    with a hash tag), found from the cluster nodes ``nodes``."""

    def __init__(self, nodes: list[tuple[str, int]], route: str, **kwargs: Any) -> None:
        ssl = bool(kwargs.pop("ssl", False))
        self.nodes = list(nodes)
        self.route = route
        self.slot_owner = SlotOwner(nodes, key_slot(route.encode()), {**kwargs, "ssl": ssl})
        kwargs.pop("connection_class", None)
        cls = _SlotSSLConnection if ssl else _SlotConnection
        # A redirected command did not run: send it again, to the new owner, a few times.
        retry = Retry(ExponentialBackoff(cap=1.0, base=0.05), 4, supported_errors=(Redirected,))
        super().__init__(connection_class=cls, slot_owner=self.slot_owner, retry=retry, **kwargs)

    def __repr__(self) -> str:
        return f"<SlotPool slot={self.slot_owner.slot} nodes={self.nodes}>"
