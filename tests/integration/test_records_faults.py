"""Records under crashes: worker processes SIGKILLed and paused past their lease while tagged,
indexed, tracked jobs finish under a tight retention. Afterwards every job is accounted for,
the tag counts, the index and the finished sets agree with the jobs, and ``kue doctor`` finds
nothing."""

from __future__ import annotations

import signal

import redis

from kue_core import Queue, doctor
from tests.conftest import wait_for
from tests.integration.test_control_faults import Workers

JOBS = 150
KEEP = 40


def _members(r: redis.Redis, key: str) -> set[int]:
    return {int(m.split("|")[1]) for m in r.zrange(key, 0, -1)}  # type: ignore[union-attr]


def test_records_stay_exact_through_kills_and_pauses(
    queue: Queue, r: redis.Redis, redis_url: str, prefix: str
) -> None:
    queue.set_retention(complete={"count": KEEP})
    saved = []
    for i in range(JOBS):
        job = queue.create_job("t", {"title": f"order {i} parcel"}).tags("batch", f"g{i % 3}")
        if i % 10 == 0:
            job.track().unique(f"u{i}")
        saved.append(job.save().id)
    workers = Workers(redis_url, prefix)
    try:
        first = workers.start("thread", 4)
        second = workers.start("thread", 4)
        ran = f"{prefix}:ran"
        wait_for(lambda: r.llen(ran) >= 30, timeout=30)
        first.kill()  # SIGKILL mid-flow: its running jobs' leases expire
        second.send_signal(signal.SIGSTOP)  # paused past its 600 ms lease
        workers.start("thread", 4)
        wait_for(lambda: r.llen(ran) >= 90, timeout=30)
        second.send_signal(signal.SIGCONT)
        waiting = ("inactive", "active", "delayed")
        wait_for(lambda: sum(queue.count(s) for s in waiting) == 0, timeout=60)
    finally:
        workers.close()

    complete, failed = (
        _members(r, queue.keys.state("complete")),
        _members(r, queue.keys.state("failed")),
    )
    assert len(complete) == KEEP  # retention trimmed as jobs finished
    assert _members(r, queue.keys.finished("complete")) == complete
    assert _members(r, queue.keys.finished("failed")) == failed  # stalled twice: failed
    done = {int(x.split(":")[0]) for x in r.lrange(ran, 0, -1)}  # type: ignore[union-attr]
    assert set(saved) <= done | failed  # nothing was lost
    kept = complete | failed
    assert {j for j in saved if r.exists(queue.keys.job(j))} == kept
    # Tags, their counts, the index and tracking name exactly the jobs that are left.
    assert _members(r, queue.keys.tag("batch")) == kept
    assert queue.tags() == {
        t: len(_members(r, queue.keys.tag(t)))
        for t in ("batch", "g0", "g1", "g2")
        if _members(r, queue.keys.tag(t))
    }
    assert _members(r, queue.keys.word("parcel")) == kept
    assert queue.search("parcel", count=0).total == len(kept)
    assert {j.id for j in queue.tracked()} == {j for j in saved[::10] if j in kept}
    # Unique keys of ended jobs were released: the same keys save new jobs.
    for i in range(0, JOBS, 10):
        assert not queue.create_job("t").unique(f"u{i}").save().deduplicated
    # The killed workers' registry entries are the sweep's to drop: not the records' concern.
    assert [f for f in doctor.check(queue).findings if f.kind != "gone-worker"] == []
