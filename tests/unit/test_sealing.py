"""The keyring and the envelope of encryption at rest (``kue_core.base.sealing``), without
Redis: how keys are written, what a sealed field looks like, and what does not open."""

from __future__ import annotations

import base64
import json
import os

import pytest

from kue_core import CannotDecrypt, InvalidEncryptionKeys, sealing


def key(kid: str, raw: bytes | None = None) -> str:
    return f"{kid}:{base64.b64encode(raw or os.urandom(32)).decode()}"


def test_a_sealed_field_is_json_naming_its_key_and_opens_again() -> None:
    ring = sealing.keyring(key("k1"))
    assert ring is not None
    text = json.dumps({"email": "ada@example.com"})
    stored = ring.seal(text, "data")
    assert "ada@example.com" not in stored
    assert list(json.loads(stored)) == [sealing.SEALED]  # JSON: Node Kue reads an object
    assert sealing.is_sealed(stored) and sealing.key_id_of(stored) == "k1"
    assert ring.open(stored, "data") == text
    assert ring.seal(text, "data") != stored  # a nonce of its own each time


def test_the_first_key_seals_and_every_key_opens() -> None:
    old, new = key("old"), key("new")
    before = sealing.keyring(old)
    both = sealing.keyring(f"{new}, {old}")  # comma-separated, spaces allowed
    assert before is not None and both is not None
    assert both.ids == ["new", "old"] and both.newest == "new"
    stored = before.seal('"x"', "data")
    assert both.open(stored, "data") == '"x"'
    assert sealing.key_id_of(both.seal('"x"', "data")) == "new"
    with pytest.raises(CannotDecrypt) as missing:
        before.open(both.seal('"x"', "data"), "data")
    assert missing.value.key_id == "new" and missing.value.missing
    assert "'new'" in str(missing.value)


def changed(stored: str) -> str:
    """``stored`` with one character of its ciphertext changed."""
    at = stored.index("k1:") + 10
    return stored[:at] + ("A" if stored[at] != "A" else "B") + stored[at + 1 :]


def test_what_does_not_authenticate_does_not_open() -> None:
    raw = os.urandom(32)
    ring = sealing.keyring([key("k1", raw)])
    other = sealing.keyring([key("k1")])  # another key under the same id
    assert ring is not None and other is not None
    stored = ring.seal('{"a":1}', "data")
    for bad, field in [
        (stored, "result"),  # copied to another field
        (other.seal('{"a":1}', "data"), "data"),
        (changed(stored), "data"),
        ('{"kue:sealed":"k1:not base64!"}', "data"),
    ]:
        with pytest.raises(CannotDecrypt) as e:
            ring.open(bad, field)
        assert e.value.key_id == "k1" and not e.value.missing


@pytest.mark.parametrize(
    "keys",
    [
        "k1",  # no secret
        "k1:" + base64.b64encode(b"short").decode(),  # not 32 bytes
        "k1:!!!!",  # not base64
        "bad id:" + base64.b64encode(bytes(32)).decode(),
        ":" + base64.b64encode(bytes(32)).decode(),
        [key("k1", bytes(32)), key("k1", bytes(32))],  # an id twice (fixed: xdist's workers
        [key("k1", bytes(32)), 7],  # must collect the same parameters)
    ],
)
def test_keys_not_written_as_asked_are_refused(keys: object) -> None:
    with pytest.raises(InvalidEncryptionKeys):
        sealing.keyring(keys)  # type: ignore[arg-type]


def test_no_keys_is_no_keyring_and_the_keys_never_show() -> None:
    assert sealing.keyring(None) is None
    assert sealing.keyring("") is None
    assert sealing.keyring(" , ") is None
    assert sealing.keyring([]) is None
    secret = key("k1")
    ring = sealing.keyring(secret)
    assert ring is not None
    assert secret.split(":")[1] not in repr(ring)
    assert ring.texts() == [secret]  # what a worker's child process is given


def test_a_text_that_is_not_an_envelope() -> None:
    assert not sealing.is_sealed('{"kue:sealedx":1}')
    assert sealing.key_id_of('{"a":1}') is None


def test_the_scripts_know_an_envelope_by_the_same_prefix() -> None:
    """lib/finishing.lua keeps a sealed error whole in a history entry, telling it by how it
    begins: the writer's prefix here."""
    from pathlib import Path

    lua = Path(sealing.__file__).parent / "scripts" / "lib" / "finishing.lua"
    assert f"string.sub(text, 1, {len(sealing.PREFIX)}) == '{sealing.PREFIX}'" in lua.read_text()
