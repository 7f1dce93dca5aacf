"""``kue keys``: the encryption keys of a queue (``Queue(encryption_keys=...)``,
``$KUE_ENCRYPTION_KEYS``; see ``kue_core.base.sealing``). ``kue keys new`` prints a new key."""

from __future__ import annotations

import base64
import secrets
from datetime import UTC, datetime

import click

from kue_core import InvalidEncryptionKeys, sealing

from . import cli as main
from .errors import BadUsage


@main.cli.group(short_help="Encryption keys: make a new one.")
def keys() -> None:
    """The keys a queue encrypts its jobs' data and results with. A key is written
    ``<key id>:<32 bytes in base64>``; KUE_ENCRYPTION_KEYS holds them comma-separated, the
    one that encrypts first, those that only decrypt after it."""


@keys.command(name="new")
@click.option(
    "--id",
    "key_id",
    help="The key's id (letters, digits and . _ -, at most 32): by default k and today's date.",
)
def new(key_id: str | None) -> None:
    """Print a new key: 32 random bytes from the system's source, under an id. Put it first
    in KUE_ENCRYPTION_KEYS of every process once every process has it after its old ones."""
    kid = key_id or "k" + datetime.now(UTC).strftime("%Y%m%d")
    text = f"{kid}:{base64.b64encode(secrets.token_bytes(32)).decode('ascii')}"
    try:
        sealing.keyring(text)
    except InvalidEncryptionKeys as e:
        raise BadUsage(str(e)) from None
    click.echo(text)
