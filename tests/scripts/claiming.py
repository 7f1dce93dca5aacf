"""What the script tests of pinned and fan-out jobs share: a worker's claim, the token of what
it claimed, and kue doctor finding nothing."""

from __future__ import annotations

from typing import Any

from kue_core import Queue, doctor

LEASE = 30_000


def claim(queue: Queue, worker: str, job_type: str = "t", lease: int = LEASE) -> Any:
    return queue.scripts.claim(job_type, worker, lease)


def token(claimed: Any) -> str:
    assert isinstance(claimed, tuple), claimed
    return str(claimed[1]["lease"])


def clean(queue: Queue) -> None:
    assert doctor.check(queue).findings == []
