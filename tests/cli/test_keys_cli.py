"""``kue keys new``: a new encryption key, in the form every process takes it."""

from __future__ import annotations

from click.testing import CliRunner

from kue_cli.cli import cli
from kue_core import sealing


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
