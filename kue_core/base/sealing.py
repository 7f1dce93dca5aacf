"""Encryption at rest: a queue's keys, and the envelope a job's payload is stored in.

A queue given keys (``Queue(encryption_keys=...)``, ``$KUE_ENCRYPTION_KEYS``) stores each
job's data, result, error, progress data and log lines as AES-256-GCM ciphertext,
authenticated, under the first of its keys; every key it has opens what was stored under it,
so a new key goes first and the old ones stay until nothing is stored under them
(``kue keys rotate``, kue_core/features/rotation.py). A key is written
``<key id>:<32 bytes in base64>``.

The stored text is JSON, so that Kue's own readers (Node Kue, its UI) see an opaque object
rather than an error: ``{"kue:sealed":"<key id>:<base64 of nonce, ciphertext and tag>"}``.
The field's name (``data``, ``result``, ``error``, ``progress``, ``log``) is authenticated
with it: a ciphertext copied to another field does not open. Reading looks at the text's
first characters only, so a queue without keys pays a prefix comparison per field read, and
an attribute read per write.

``cryptography`` is imported when a queue is first given keys, not before.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import re
from collections.abc import Sequence
from typing import Any

from .errors import CannotDecrypt, InvalidEncryptionKeys

__all__ = [
    "PREFIX",
    "SEALED",
    "Keyring",
    "envelope_key",
    "is_sealed",
    "key_id_of",
    "keyring",
    "of",
    "opened_text",
    "opened_value",
    "sealed_value",
]

#: The one key of a stored envelope.
SEALED = "kue:sealed"
#: How every envelope's text begins (the writer's exact bytes).
PREFIX = '{"kue:sealed":"'
_KEY_ID = re.compile(r"[A-Za-z0-9._-]{1,32}")
_NONCE = 12  # bytes: GCM's standard nonce, random per encryption


class Keyring:
    """A queue's encryption keys, by id; ``newest`` (the first given) encrypts."""

    __slots__ = ("_ciphers", "_keys", "newest")

    def __init__(self, keys: Sequence[tuple[str, bytes]]) -> None:
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        self._keys = list(keys)
        self._ciphers = {kid: AESGCM(key) for kid, key in keys}
        self.newest = keys[0][0]

    def texts(self) -> list[str]:
        """The keys as ``Queue(encryption_keys=...)`` takes them (a worker's child process
        makes its queue with them)."""
        return [f"{kid}:{base64.b64encode(key).decode('ascii')}" for kid, key in self._keys]

    def __repr__(self) -> str:  # never the keys themselves
        return f"<Keyring {list(self._ciphers)}>"

    @property
    def ids(self) -> list[str]:
        """The key ids, the one that encrypts first."""
        return list(self._ciphers)

    def seal(self, text: str, field: str) -> str:
        """``text`` (a field's JSON) as the envelope stored in its place."""
        nonce = os.urandom(_NONCE)
        sealed = self._ciphers[self.newest].encrypt(nonce, text.encode(), field.encode())
        body = base64.b64encode(nonce + sealed).decode("ascii")
        return f'{PREFIX}{self.newest}:{body}"}}'

    def open(self, stored: str, field: str) -> str:
        """The JSON text a field's envelope holds (``CannotDecrypt`` naming its key id when
        this keyring lacks the key, or the text does not authenticate)."""
        from cryptography.exceptions import InvalidTag

        kid, body = _parts(stored)
        cipher = self._ciphers.get(kid)
        if cipher is None:
            raise CannotDecrypt(kid, field, missing=True)
        try:
            raw = binascii.a2b_base64(body)  # what is not base64 fails the tag below
            return cipher.decrypt(raw[:_NONCE], raw[_NONCE:], field.encode()).decode()
        except (InvalidTag, ValueError, binascii.Error):
            raise CannotDecrypt(kid, field, missing=False) from None


def is_sealed(text: str) -> bool:
    """Whether a stored field's text is an envelope."""
    return text.startswith(PREFIX)


def key_id_of(stored: str) -> str | None:
    """The key id an envelope was sealed under; None for a text that is not one."""
    return _parts(stored)[0] if is_sealed(stored) else None


def _parts(stored: str) -> tuple[str, str]:
    """An envelope's key id and ciphertext (base64); ``("?", "")`` for a text that is not one.
    The writer's exact form is cut out directly (three times quicker than reading its JSON);
    another (an escaped copy read back from a history entry, say) is read as JSON."""
    if stored.endswith('"}') and "\\" not in stored and stored.count('"') == 4:
        inner = stored[len(PREFIX) : -2]
    else:
        try:
            inner = json.loads(stored)[SEALED]
        except (ValueError, KeyError, TypeError):
            return "?", ""
    if not isinstance(inner, str):
        return "?", ""
    kid, _, body = inner.partition(":")
    return kid, body


def keyring(keys: str | Sequence[str] | None) -> Keyring | None:
    """The keyring of ``keys`` (a comma-separated text, or a list of ``id:base64``); None for
    none given (an empty text, or an empty list): the queue stores its payloads in clear."""
    if keys is None:
        return None
    items = keys.split(",") if isinstance(keys, str) else list(keys)
    entries: list[tuple[str, bytes]] = []
    for item in items:
        if not isinstance(item, str):
            raise InvalidEncryptionKeys(f"an encryption key is a string, got {type(item).__name__}")
        item = item.strip()
        if not item and isinstance(keys, str):
            continue
        kid, sep, encoded = item.partition(":")
        if not sep or not _KEY_ID.fullmatch(kid):
            raise InvalidEncryptionKeys(
                "an encryption key is written <key id>:<32 bytes in base64>, its id of letters, "
                "digits and . _ - (at most 32); one of the keys given is not"
            )
        if any(kid == seen for seen, _ in entries):
            raise InvalidEncryptionKeys(f"the key id {kid!r} is given twice")
        try:
            key = base64.b64decode(encoded.strip(), validate=True)
        except (binascii.Error, ValueError):
            key = b""
        if len(key) != 32:
            raise InvalidEncryptionKeys(
                f"the key {kid!r} is not 32 bytes in base64 (AES-256): make one with "
                "`kue keys new` or base64 of 32 random bytes"
            )
        entries.append((kid, key))
    return Keyring(entries) if entries else None


def opened_text(ring: Keyring | None, text: str, field: str) -> str:
    """``text`` opened when it is sealed and ``ring`` can open it; else as it is (a text in
    clear, or one under a key the ring lacks: shown as stored)."""
    if ring is None or not text.startswith(PREFIX):
        return text
    try:
        return ring.open(text, field)
    except CannotDecrypt:
        return text


def envelope_key(value: Any) -> str | None:
    """The key id of a JSON value (read) that is an envelope, or None for any other value."""
    if value.__class__ is not dict or list(value) != [SEALED] or not isinstance(value[SEALED], str):
        return None
    return str(value[SEALED]).partition(":")[0]


def sealed_value(ring: Keyring, value: Any, field: str) -> Any:
    """A JSON value as its envelope (read): to keep sealed inside a JSON document."""
    return json.loads(ring.seal(json.dumps(value, separators=(",", ":")), field))


def opened_value(ring: Keyring | None, value: Any, field: str) -> Any:
    """A JSON value as an event carries it (read): an envelope opened under ``ring`` and read
    (``CannotDecrypt`` when it cannot be), any other value as it is."""
    if ring is None or envelope_key(value) is None:
        return value
    return json.loads(ring.open(f'{PREFIX}{value[SEALED]}"}}', field))


def of(host: Any) -> Keyring | None:
    """The keyring of a job's queue (either client's), if it has one."""
    return getattr(host, "keyring", None)
