"""The command line's errors and exit codes (see :mod:`kue_cli.cli`)."""

from __future__ import annotations

import click

EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_UNAVAILABLE = 3


class Refused(click.ClickException):
    """The state of things does not allow it now (a complete job cannot be cancelled): exit 1."""

    exit_code = EXIT_FAILED


class Failed(click.ClickException):
    """What the command followed ended badly (a job it streamed failed): exit 1."""

    exit_code = EXIT_FAILED


class BadUsage(click.ClickException):
    """Invalid input: trying again will not help (exit 2)."""

    exit_code = EXIT_USAGE


class Unavailable(click.ClickException):
    """Redis or the port cannot be had now; trying again later may help (exit 3)."""

    exit_code = EXIT_UNAVAILABLE
