"""``kue job stream ID``, a command of the ``kue job`` group (:mod:`kue_cli.jobs`): a job's
stream of partial output (``job.stream()`` in its handler, see
:mod:`kue_core.features.streams`), printed as it comes until the job ends, or what it holds
now with ``--once``.

Text parts are written as they come, with nothing added, so that a stream of tokens reads as
text; other values as compact JSON, a line each. Another attempt's parts (a retry's, a
recovered run's) follow the last one's, and a ``--- attempt N ---`` line on stderr says where
they start. Exit codes: 0 once the job has completed (with ``--once``: also while it runs), 1
once it has failed or was removed, or when ``--timeout`` runs out first; 2 for a bad id, a bad
``--after`` or an unknown job; 3 when Redis cannot be reached.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any, TextIO

import click

from kue_core import InvalidJob, KueError, Queue, StreamPart, defaults
from kue_core.base import checks

from . import cli as main
from .control import _queue
from .errors import BadUsage, Failed

#: Seconds a read of ``--once`` waits for a part: enough to take what is held, no more.
_ONCE_BLOCK = 0.001


@click.command("stream", short_help="Print a job's streamed output as it comes.")
@click.argument("job_id", metavar="ID")
@click.option(
    "--after",
    metavar="ENTRY_ID",
    help="Start after this part (its id, as --json prints it: <ms>-<seq>), to resume.",
)
@click.option("--once", is_flag=True, help="Print the parts held now, then exit.")
@click.option(
    "--json", "as_json", is_flag=True, help='One JSON object a part: {"id", "attempt", "value"}.'
)
@click.option(
    "--timeout",
    type=click.FloatRange(0, 86_400, min_open=True),
    metavar="SECONDS",
    help="Give up (exit 1) when the job has not ended after this long.",
)
@main.redis_options
def stream(
    job_id: str,
    after: str | None,
    once: bool,
    as_json: bool,
    timeout: float | None,
    redis_url: str | None,
    prefix: str,
) -> None:
    """Print the parts job ID streams (job.stream() in its handler) as they come, until the
    job has completed (exit 0) or failed (exit 1). Text parts are written as they are,
    nothing added between them; other values as compact JSON, a line each. When another
    attempt's parts begin (a retry's, a recovered run's), a line '--- attempt N ---' on
    stderr says so. With --once, print what the
    stream holds now and exit."""
    try:
        jid = checks.job_id(job_id)
    except KueError as e:
        raise BadUsage(str(e)) from None
    out = _Printer(sys.stdout, as_json)
    try:
        with _queue(redis_url, prefix, reads_only=True) as queue:
            queue.get_job(jid)  # an unknown job: bad usage
            ended = _follow(queue, jid, after, once, timeout, out)
            error = _error(queue, jid) if ended == "failed" else None
    finally:
        out.close()  # Ctrl-C and --timeout too
    if ended == "failed":
        raise Failed(f"job {jid} failed" + (f": {error}" if error else ""))
    if ended == "removed":
        raise Failed(f"job {jid} was removed before its stream was read to the end")


def _follow(
    queue: Queue, jid: int, after: str | None, once: bool, timeout: float | None, out: _Printer
) -> str | None:
    """Print the job's parts after ``after`` until it has ended (its last state) or, with
    ``once``, until a read finds nothing new (None while it runs)."""
    deadline = None if timeout is None else time.monotonic() + timeout
    last = after
    while True:
        block = _ONCE_BLOCK if once else defaults.STREAM_POLL
        if deadline is not None:
            block = max(_ONCE_BLOCK, min(block, deadline - time.monotonic()))
        try:
            got = queue.read_stream(jid, after=last, block=block)
        except InvalidJob as e:  # the only thing left to check is the position
            raise BadUsage(f"--after: {e}") from None
        for part in got.parts:
            out.part(part)
            last = part.id
        if got.ended is not None or (once and not got.parts):
            return got.ended
        if deadline is not None and time.monotonic() >= deadline:
            raise Failed(f"job {jid} had not ended after {timeout:g} s")


def _error(queue: Queue, jid: int) -> str | None:
    """The first line of a failed job's error (None when it has none, or is gone)."""
    found = queue.get_jobs([jid])
    error = found[0].error if found else None
    return str(error).splitlines()[0] if error else None


class _Printer:
    """Writes parts to ``out``: text as it is, other values a JSON line each (``as_json``:
    every part a JSON object a line); a new attempt's first part is announced on stderr.
    Knows whether the text left the line open, so that a JSON value or, in a terminal, the
    announcement starts a line of its own."""

    def __init__(self, out: TextIO, as_json: bool) -> None:
        self.out, self.as_json = out, as_json
        self.attempt: int | None = None
        self.open_line = False  # the last text written did not end its line
        self.tty = out.isatty()

    def part(self, part: StreamPart) -> None:
        if self.as_json:
            record = {"id": part.id, "attempt": part.attempt, "value": part.value}
            self._write(_compact(record) + "\n")
            return
        if self.attempt is not None and part.attempt != self.attempt:
            if self.tty:  # the announcement on a line of its own where both are shown
                self._end_line()
            click.echo(f"--- attempt {part.attempt} ---", err=True)
        self.attempt = part.attempt
        if isinstance(part.value, str):
            self._write(part.value)
        else:
            self._end_line()
            self._write(_compact(part.value) + "\n")

    def close(self) -> None:
        """In a terminal, end an open line (the prompt then starts a line of its own); into
        a pipe or a file, the text stays exactly as streamed."""
        if self.tty:
            self._end_line()

    def _end_line(self) -> None:
        if self.open_line:
            self._write("\n")

    def _write(self, text: str) -> None:
        if text:
            # Flushed: each part shows at once. color=True: click would strip ANSI escapes
            # going into a pipe, and the text goes there exactly as streamed.
            click.echo(text, file=self.out, nl=False, color=True)
            self.open_line = not text.endswith("\n")


def _compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
