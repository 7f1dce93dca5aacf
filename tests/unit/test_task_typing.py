"""Typed tasks are typed for mypy: ``enqueue`` takes the function's parameters (ParamSpec), on
both clients, so a wrong call is reported where it is written. mypy (strict) checks a program
here; the lines marked ``# E`` are the ones it must report, and no other."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from mypy import api

PROGRAM = """
from kue_core import Job, Queue
from kue_core.aio import AsyncQueue

queue = Queue("redis://127.0.0.1:1/0")
aq = AsyncQueue("redis://127.0.0.1:1/0")


@queue.task("email", attempts=5)
def send_email(to: str, subject: str, body: str = "") -> dict[str, bool]:
    return {"sent": bool(to and subject and body is not None)}


@aq.task
async def fetch(url: str, tries: int = 1) -> int:
    return tries


job: Job = send_email.enqueue("a@example.com", subject="hi")
send_email.options(delay=5_000, priority="critical").enqueue("b@example.com", "later")
sent: dict[str, bool] = send_email.result(job)
direct: dict[str, bool] = send_email("a@example.com", "direct")
send_email.enqueue("a@example.com", subjekt="hi")  # E
send_email.enqueue(5, "x")  # E
send_email.options(delay=5_000).enqueue("b@example.com")  # E
wrong: int = send_email("a", "b")  # E
send_email.every(60_000, "a@example.com", "hourly")
send_email.cron("0 * * * *", "a@example.com")  # E


async def main() -> None:
    got = await fetch.enqueue("https://example.com", tries=2)
    n: int = await fetch.result(got)
    await fetch.enqueue(3)  # E
    await send_email.on(aq).enqueue("a@example.com", "from asyncio")
    await send_email.on(aq).enqueue("a@example.com")  # E
    fetch.on(queue).enqueue("https://example.com")
    fetch.on(queue).enqueue(url=1)  # E
    coro_result: int = await fetch("https://example.com")
    print(n, coro_result)
"""


def test_mypy_reports_the_wrong_calls_and_only_those(tmp_path: Path) -> None:
    program = tmp_path / "tasks_program.py"
    program.write_text(PROGRAM)
    expected = {i for i, line in enumerate(PROGRAM.splitlines(), 1) if line.endswith("# E")}
    out, err, status = api.run(
        [
            "--strict",
            "--no-incremental",
            "--cache-dir",
            str(tmp_path / "cache"),
            "--python-version",
            "3.11",
            str(program),
        ]
    )
    reported = {int(m.group(1)) for m in re.finditer(r"tasks_program\.py:(\d+): error", out)}
    assert status == 1, err or out
    assert reported == expected, out


pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
