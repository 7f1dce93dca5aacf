"""What the script tests share: a worker's claim, the token of what it claimed, the end of its
attempt (complete, fail: the script's named reply), and kue doctor finding nothing."""

from __future__ import annotations

from typing import Any

from kue_core import Queue, doctor
from kue_core.store import calls
from kue_core.store.calls import Next, Reported

LEASE = 30_000


def claim(queue: Queue, worker: str, job_type: str = "t", lease: int = LEASE) -> Any:
    return queue.scripts.call(calls.claim(queue.keys, job_type, worker, lease))


def token(claimed: Any) -> str:
    assert isinstance(claimed, tuple), claimed
    return str(claimed[1]["lease"])


def complete(queue: Queue, job_id: int, token: str, result: str, claim: Next | None) -> Reported:
    return queue.scripts.call(calls.complete(queue.keys, job_id, token, result, claim))


def fail(
    queue: Queue,
    job_id: int,
    token: str,
    message: str,
    text: str,
    retry_delay: int,
    claim: Next | None,
) -> Reported:
    return queue.scripts.call(
        calls.fail(queue.keys, job_id, token, message, text, retry_delay, claim)
    )


def live(queue: Queue) -> None:
    """Register, as a live worker process does (``heartbeat.lua`` start), every worker that
    holds an active job here: the script tests claim for workers that never ran, and a job
    whose worker holds no process lease is stuck (``kue doctor``)."""
    r = queue.client
    held = {
        r.hget(queue.keys.job(int(m.split("|")[1])), "workerId")
        for m in r.zrange(queue.keys.state("active"), 0, -1)
    }
    for worker in sorted(w for w in held if w):
        queue.scripts.call(calls.heartbeat(queue.keys, worker, LEASE, "{}", [], mode="start"))


def clean(queue: Queue) -> None:
    """kue doctor finds nothing, the workers holding jobs being live (see :func:`live`)."""
    live(queue)
    assert doctor.check(queue).findings == []
