"""``kue keys``: the encryption keys of a queue (``Queue(encryption_keys=...)``,
``$KUE_ENCRYPTION_KEYS``; see ``kue_core.base.sealing``). ``kue keys new`` prints a new key."""

from __future__ import annotations

import base64
import json
import secrets
from datetime import UTC, datetime

import click

from kue_core import InvalidEncryptionKeys, defaults, sealing

from . import cli as main
from .control import _queue
from .errors import BadUsage


@main.cli.group(short_help="Encryption keys: make a new one, rotate to the newest.")
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


@keys.command()
@click.option(
    "--batch",
    default=defaults.ROTATE_BATCH,
    show_default=True,
    type=click.IntRange(1, 10_000),
    help="Jobs read and re-encrypted a step.",
)
@click.option("--from-start", is_flag=True, help="From the first job, not where it stopped.")
@click.option("--json", "as_json", is_flag=True, help="Print what it did as JSON.")
@main.redis_options
def rotate(batch: int, from_start: bool, as_json: bool, redis_url: str | None, prefix: str) -> None:
    """Re-encrypt every stored job's data, result, error, progress data, log lines and
    history under the newest key (the first of KUE_ENCRYPTION_KEYS), a batch of jobs at a
    time. Safe beside running workers; Ctrl-C stops it after its step, and it goes on from
    there when run again. Values under a key it is not given are left and counted."""
    jobs = resealed = unopened = 0
    with _queue(redis_url, prefix) as queue:
        first = True
        while True:
            step = queue.rotate_keys(steps=1, batch=batch, from_start=from_start and first)
            first = False
            jobs, resealed = jobs + step.jobs, resealed + step.resealed
            unopened += step.unopened
            if not as_json:
                click.echo(
                    f"to key {step.key}: job {step.at} of {step.last}, {resealed} values "
                    f"re-encrypted",
                    err=True,
                )
            if step.done:
                break
    summary = {"key": step.key, "jobs": jobs, "resealed": resealed, "unopened": unopened}
    if as_json:
        click.echo(json.dumps(summary))
        return
    click.echo(
        f"{jobs} jobs looked at, {resealed} values re-encrypted under key {step.key}"
        + (f"; {unopened} under a key not given, left as they are" if unopened else "")
    )
