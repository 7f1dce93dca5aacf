"""``kue keys new``: a new encryption key, in the form every process takes it."""

from __future__ import annotations

import base64
import json

import pytest
from click.testing import CliRunner

from kue_cli.cli import cli
from kue_core import Queue, sealing


def test_a_new_key_is_one_a_queue_takes_and_never_the_same() -> None:
    runner = CliRunner()
    first = runner.invoke(cli, ["keys", "new", "--id", "payments-2026"])
    second = runner.invoke(cli, ["keys", "new"])
    assert first.exit_code == 0 and second.exit_code == 0
    ring = sealing.keyring([first.output.strip(), second.output.strip()])
    assert ring is not None and ring.ids[0] == "payments-2026" and ring.ids[1].startswith("k")
    assert first.output.split(":")[1] != second.output.split(":")[1]


def test_an_id_that_cannot_be_one_is_bad_usage() -> None:
    result = CliRunner().invoke(cli, ["keys", "new", "--id", "has space"])
    assert result.exit_code == 2
    assert "letters, digits" in result.output + result.stderr


def test_rotate_needs_keys_and_says_what_it_did(
    redis_url: str, prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    old = f"k1:{base64.b64encode(bytes(32)).decode()}"
    new = f"k2:{base64.b64encode(bytes(range(32))).decode()}"
    with Queue(redis_url, prefix=prefix, encryption_keys=old) as q:
        q.save_many([q.create_job("mail", {"i": i}) for i in range(3)])
    args = ["keys", "rotate", "--redis", redis_url, "--prefix", prefix]
    monkeypatch.delenv("KUE_ENCRYPTION_KEYS", raising=False)
    refused = CliRunner().invoke(cli, args)
    assert refused.exit_code == 2 and "no encryption keys" in refused.output + refused.stderr
    monkeypatch.setenv("KUE_ENCRYPTION_KEYS", f"{new},{old}")
    done = CliRunner().invoke(cli, [*args, "--json"])
    assert done.exit_code == 0, done.output
    assert json.loads(done.stdout) == {"key": "k2", "jobs": 3, "resealed": 3, "unopened": 0}
    again = CliRunner().invoke(cli, [*args, "--from-start"])
    assert again.exit_code == 0
    assert "3 jobs looked at, 0 values re-encrypted under key k2" in again.stdout
