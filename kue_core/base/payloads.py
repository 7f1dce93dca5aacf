"""Large payloads kept outside Redis: the stores, and the reference a job keeps instead.

A queue given a ``max_data_bytes`` (``$KUE_MAX_DATA_BYTES``) keeps no job data or result
larger than that in Redis: with a payload store (``payload_store=``, ``$KUE_PAYLOAD_STORE``, a
URL: ``file:///path`` or ``s3://bucket/prefix``) the value goes there and the job's field holds
a reference, ``{"kue:stored":"<name>","bytes":<size>}`` (an opaque object to Node Kue); without
one, the save is refused (``PayloadTooLarge``, naming the size and the limit), as it is above
``max_payload_bytes`` (``$KUE_MAX_PAYLOAD_BYTES``) whatever the store. A stored value is what
Redis would have held: the JSON, encrypted first when the queue has keys (so the store holds
no payload in clear either).

Names are ``<queue prefix>/<field>/<random hex>``: a value is written once, before the job that
refers to it is saved, and never changed; the job's ``payloads`` field (``{"data": name,
"result": name}``) says which it holds, and when the job is removed (or its data replaced) the
names go to the list ``<prefix>:payloads:trash``, which a worker empties by deleting them from the
store (``sweep``). A reader looks at a field's first characters only, as for encryption.
"""

from __future__ import annotations

import json
import os
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import unquote, urlsplit

from .. import defaults
from .errors import InvalidJob, PayloadTooLarge, PayloadUnavailable

__all__ = [
    "PREFIX",
    "STORED",
    "FileStore",
    "Offload",
    "PayloadStore",
    "from_url",
    "name_of",
    "offload",
    "reference",
]

#: The one key of a reference (besides ``bytes``).
STORED = "kue:stored"
#: How every reference's text begins (the writer's exact bytes).
PREFIX = '{"kue:stored":"'
#: How a name's random part is made: 16 bytes, as hex.
_RANDOM_BYTES = 16


class PayloadStore(Protocol):
    """Where large payloads go: values by name, written once."""

    url: str
    #: Whether a read may take long (a request over the network): a worker's event loop then
    #: reads in a thread of its pool; a local file it reads itself (a thread's hand-off costs
    #: more than the read).
    slow: bool

    def put(self, name: str, value: bytes) -> None: ...

    def get(self, name: str) -> bytes:
        """The value (``KeyError`` when there is none)."""
        ...

    def delete(self, names: list[str]) -> None:
        """Delete these (a name that is not there is no error)."""
        ...

    def names(self, prefix: str) -> Iterator[tuple[str, float]]:
        """Every name under ``prefix``, with when it was written (seconds since the epoch)."""
        ...


class FileStore:
    """A directory (a volume every process of the queue shares): a value is a file, written
    to a temporary name, flushed to disk and renamed, so that a reader never sees half of one
    and a value whose job is saved survives a crash of the machine."""

    slow = False

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)
        self.url = self.root.absolute().as_uri()
        if not self.root.is_dir():
            raise InvalidJob(f"the payload store {self.url} is not a directory")

    def _path(self, name: str) -> Path:
        if not name or name.startswith("/") or ".." in name.split("/"):
            raise InvalidJob(f"not a payload name: {name!r:.100}")
        return self.root / name

    def put(self, name: str, value: bytes) -> None:
        path = self._path(name)
        path.parent.mkdir(parents=True, exist_ok=True)
        part = path.with_name(f".{path.name}.part")
        with open(part, "wb") as f:
            f.write(value)
            f.flush()
            os.fsync(f.fileno())
        os.replace(part, path)

    def get(self, name: str) -> bytes:
        try:
            return self._path(name).read_bytes()
        except FileNotFoundError:
            raise KeyError(name) from None

    def delete(self, names: list[str]) -> None:
        for name in names:
            self._path(name).unlink(missing_ok=True)

    def names(self, prefix: str) -> Iterator[tuple[str, float]]:
        base = self._path(prefix)
        if not base.is_dir():
            return
        for path in base.rglob("*"):
            if path.is_file() and not path.name.startswith("."):
                yield path.relative_to(self.root).as_posix(), path.stat().st_mtime


def from_url(url: str) -> PayloadStore:
    """The store a URL names: ``file:///path`` (an existing directory) or
    ``s3://bucket/prefix`` (needs ``pip install kue[s3]``; the endpoint and credentials are
    boto3's usual ones: ``AWS_ENDPOINT_URL``, ``AWS_ACCESS_KEY_ID``, ...)."""
    parts = urlsplit(url)
    if parts.scheme == "file" and parts.netloc in ("", "localhost") and parts.path:
        return FileStore(unquote(parts.path))
    if parts.scheme == "s3" and parts.netloc:
        from .s3_payloads import S3Store

        return S3Store(parts.netloc, unquote(parts.path).strip("/"))
    raise InvalidJob(f"a payload store is file:///path or s3://bucket/prefix, got {url!r:.200}")


def new_name(prefix: str, field: str) -> str:
    """A fresh name for a value of ``field`` of a queue under ``prefix``."""
    return f"{prefix}/{field}/{secrets.token_hex(_RANDOM_BYTES)}"


def reference(name: str, size: int) -> str:
    """The text a job's field holds for a value in the store."""
    return json.dumps({STORED: name, "bytes": size}, separators=(",", ":"))


def name_of(text: str) -> str | None:
    """The name a reference points to; None for a text that is not one."""
    if not text.startswith(PREFIX):
        return None
    try:
        found: Any = json.loads(text).get(STORED)
    except (ValueError, AttributeError):
        return None
    return found if isinstance(found, str) else None


class Offload:
    """A queue's payload limits and store: what of a value stays in Redis."""

    __slots__ = ("max_data_bytes", "max_payload_bytes", "prefix", "store")

    def __init__(
        self,
        prefix: str,
        max_data_bytes: int,
        store: PayloadStore | None,
        max_payload_bytes: int,
    ) -> None:
        self.prefix = prefix
        self.max_data_bytes = max_data_bytes
        self.store = store
        self.max_payload_bytes = max_payload_bytes

    @property
    def slow(self) -> bool:
        """Whether its store's reads may take long (see :class:`PayloadStore`)."""
        return self.store is not None and self.store.slow

    def __repr__(self) -> str:
        where = self.store.url if self.store is not None else "no store"
        return f"<Offload above {self.max_data_bytes} bytes to {where}>"

    def keeps(self, chars: int) -> bool:
        """Whether a JSON text of ``chars`` characters stays in Redis for sure, sealed or not
        (at most 4 bytes a character, and sealing's base64 makes 4 of 3, plus its envelope):
        then nothing of it is to be written to the store."""
        return 6 * chars + 100 <= self.max_data_bytes

    def check(self, text: str, field: str, why: str = "") -> None:
        """Raise ``PayloadTooLarge`` for a value that is to stay in Redis and is larger than
        the queue takes at all; with ``why``, larger than ``max_data_bytes`` (``why`` says
        why it cannot go to the store)."""
        limit = self.max_data_bytes if why else self.max_payload_bytes
        if len(text) > limit // 4:
            size = len(text.encode())
            if size > limit:
                raise PayloadTooLarge(
                    field, size, limit, f"max_data_bytes ({why})" if why else "max_payload_bytes"
                )

    def stored(self, text: str, field: str) -> tuple[str, str | None]:
        """``text`` (a field's JSON, sealed if the queue seals) as Redis is to hold it, and the
        name it was put in the store under (None: kept in Redis). Raises ``PayloadTooLarge``."""
        held, put = self.planned(text, field)
        if put is None:
            return held, None
        self.store.put(*put)  # type: ignore[union-attr]  # (planned: there is a store)
        return held, put[0]

    def planned(self, text: str, field: str) -> tuple[str, tuple[str, bytes] | None]:
        """As :meth:`stored`, but the value not yet written: what Redis is to hold, and the
        name and bytes to put in the store first (None: nothing). So that a save of several
        jobs checks them all before it writes any value."""
        if len(text) <= self.max_data_bytes // 4:  # no character takes more than 4 bytes
            return text, None
        raw = text.encode()
        if len(raw) <= self.max_data_bytes:
            return text, None
        if len(raw) > self.max_payload_bytes:
            raise PayloadTooLarge(field, len(raw), self.max_payload_bytes, "max_payload_bytes")
        if self.store is None:
            raise PayloadTooLarge(
                field, len(raw), self.max_data_bytes, "max_data_bytes (and no payload store)"
            )
        name = new_name(self.prefix, field)
        return reference(name, len(raw)), (name, raw)

    def put(self, planned: tuple[str, bytes]) -> None:
        """Write a value :meth:`planned` named."""
        assert self.store is not None
        self.store.put(*planned)

    def loaded(self, stored: str, field: str) -> str:
        """The text a reference stands for (``PayloadUnavailable`` when it cannot be read)."""
        name = name_of(stored) or "?"
        if self.store is None:
            raise PayloadUnavailable(name, field, missing=True)
        if not name.startswith(self.prefix + "/"):  # another queue's, or no name of ours
            raise PayloadUnavailable(name, field, missing=False)
        try:
            return self.store.get(name).decode()
        except (KeyError, InvalidJob):  # not there, or a name the store refuses (../)
            raise PayloadUnavailable(name, field, missing=False) from None
        except Exception as e:  # the store's own failure (a file system's, S3's): may pass
            failure = f"{type(e).__name__}: {e}"[:200]
            raise PayloadUnavailable(name, field, missing=False, failure=failure) from None


def offload(
    prefix: str,
    max_data_bytes: int | str | None = None,
    store: PayloadStore | str | None = None,
    max_payload_bytes: int | str | None = None,
) -> Offload | None:
    """A queue's :class:`Offload` from its arguments, or from the environment for those not
    given; None when neither gives a limit nor a store (a value of any size stays in Redis)."""
    if max_data_bytes is None:
        max_data_bytes = os.environ.get(defaults.MAX_DATA_BYTES_ENV) or None
    if store is None:
        store = os.environ.get(defaults.PAYLOAD_STORE_ENV) or None
    if max_payload_bytes is None:
        max_payload_bytes = os.environ.get(defaults.MAX_PAYLOAD_BYTES_ENV) or None
    if max_data_bytes is None and store is None and max_payload_bytes is None:
        return None
    hard = _bytes(max_payload_bytes, "max_payload_bytes", defaults.MAX_PAYLOAD_BYTES)
    default = min(defaults.OFFLOAD_BYTES, hard) if store is not None else hard
    threshold = _bytes(max_data_bytes, "max_data_bytes", default)
    if threshold > hard:
        raise InvalidJob(f"max_data_bytes ({threshold}) is above max_payload_bytes ({hard})")
    if isinstance(store, str):
        store = from_url(store)
    return Offload(prefix, threshold, store, hard)


def _bytes(value: int | str | None, name: str, default: int) -> int:
    if value is None:
        return default
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise InvalidJob(f"{name} is a number of bytes, got {value!r:.40}") from None
    if isinstance(value, bool) or number < 1:
        raise InvalidJob(f"{name} is a number of bytes above 0, got {value!r:.40}")
    return number
