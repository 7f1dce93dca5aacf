"""Dependencies under crashes: chains and fan-ins run by several worker processes, some
SIGKILLed and one paused past its lease while they complete dependencies. Afterwards no job is
lost, every dependent was released exactly once and only after all it waits for completed,
the blocked indexes hold exactly the jobs still blocked, and ``kue doctor`` finds nothing."""

from __future__ import annotations

import random
import signal
from typing import Any

import redis

from kue_core import Queue, doctor
from tests.conftest import wait_for
from tests.integration.test_control_faults import Workers

CHAINS, LINKS = 12, 8
FANS, CHILDREN = 4, 12
#: Each job runs this long, so that the kills find jobs running.
WORK = {"sleep": 0.04}


def _members(r: redis.Redis, key: str) -> set[int]:
    return {int(m.split("|")[1]) for m in r.zrange(key, 0, -1)}  # type: ignore[union-attr]


def _build(queue: Queue) -> dict[int, list[int]]:
    """The jobs, each with the ids it depends on."""
    deps: dict[int, list[int]] = {}
    for c in range(CHAINS):
        prev = queue.create_job("t", {"chain": c, **WORK}).save()
        deps[prev.id] = []  # type: ignore[index]
        for _ in range(1, LINKS):
            job = queue.create_job("t", WORK).depends_on(prev)
            if c % 2:
                job.on_dependency_failure("fail")
            prev = job.save()
            deps[prev.id] = [prev.dependencies()[0]["id"]]  # type: ignore[index]
    for _ in range(FANS):
        kids = [queue.create_job("t", WORK) for _ in range(CHILDREN)]
        parent = queue.flow(queue.create_job("t", {"fan": True, **WORK}), kids)
        deps[parent.id] = [k.id for k in kids]  # type: ignore[index,misc]
        deps.update({k.id: [] for k in kids})  # type: ignore[misc]
    return deps


def _at(history: list[dict[str, Any]], state: str) -> list[int]:
    return [e["at"] for e in history if e["state"] == state]


def test_dependents_are_released_once_through_kills_and_pauses(
    queue: Queue, r: redis.Redis, redis_url: str, prefix: str
) -> None:
    deps = _build(queue)
    rng = random.Random(19)
    workers = Workers(redis_url, prefix)
    ran = f"{prefix}:ran"
    try:
        # Every worker up before any job runs: else the first ones started may run most of
        # the jobs while the others start, and the kills below find none running.
        queue.pause("t")
        procs = [workers.start("thread", 3) for _ in range(3)]
        queue.resume("t")
        paused = None
        for target in (10, 25, 40, 55, 70, 85):
            wait_for(lambda t=target: r.llen(ran) >= t, timeout=30)  # type: ignore[misc]
            victim = procs.pop(rng.randrange(len(procs)))
            if paused is None:
                victim.send_signal(signal.SIGSTOP)  # past its 600 ms lease
                paused = victim
            else:
                victim.kill()
            procs.append(workers.start("thread", 3))
        assert paused is not None
        paused.send_signal(signal.SIGCONT)
        waiting = ("inactive", "active", "delayed")
        wait_for(lambda: sum(queue.count(s) for s in waiting) == 0, timeout=90)
    finally:
        workers.close()

    k = queue.keys
    complete, failed = _members(r, k.state("complete")), _members(r, k.state("failed"))
    blocked = _members(r, k.state("blocked"))
    stalled = [j for j in deps if r.hget(k.job(j), "stalls")]
    assert stalled  # the kills and the pause caught jobs running
    assert complete | failed | blocked == set(deps)  # nothing lost
    assert not (complete & failed) and not (blocked & (complete | failed))
    assert _members(r, k.type_state("t", "blocked")) == blocked
    for jid, needs in deps.items():
        job = queue.get_job(jid)
        history = job.history()
        released = [e for e in history if e.get("unblocked")]
        assert len(released) <= 1, (jid, history)  # never twice
        if not needs:
            continue
        if jid in blocked:  # only behind a failed job, under the policy wait (or behind a
            # job itself blocked so), never once all it waits for completed (a lost release)
            assert job.on_dependency_failure() == "wait"
            assert not released and any(n in failed | blocked for n in needs), (jid, needs)
            assert job.blocked_by is None or job.blocked_by in failed
            continue
        if job.state == "failed" and job.error and job.error.startswith("dependency "):
            assert any(n in failed for n in needs) and not released
            continue
        # It ran: released once, after every job it waits for completed.
        assert len(released) == 1 and all(n in complete for n in needs), (jid, history)
        last_done = max(_at(queue.get_job(n).history(), "complete")[-1] for n in needs)
        assert released[0]["at"] >= last_done and _at(history, "active")[0] >= last_done
        assert set(job.children_results()) == set(needs)
    # Nothing is awaited that has ended, and the doctor finds nothing (a killed worker's
    # registry entry is the registry sweep's to drop).
    assert all(queue.get_job(m).state not in ("complete", "failed") for m in _members(r, k.awaited))
    assert [f for f in doctor.check(queue).findings if f.kind != "gone-worker"] == []
