"""Bulk actions on a state, the outcome counters (per minute, totals, durations) and search."""

from __future__ import annotations

import pytest
import redis

from kue_core import InvalidJob, Queue, defaults
from kue_core.base.keys import zid
from kue_core.features.tally import Tally
from kue_core.store import calls
from tests.conftest import finish, free_port, snapshot, written_since


def test_retry_all_failed_of_one_type(queue: Queue) -> None:
    emails = [queue.create_job("email").attempts(2).save() for _ in range(3)]
    video = queue.create_job("video").save()
    for _ in emails:
        finish(queue, "email", ok=False)
        finish(queue, "email", ok=False)  # second attempt: failed for good
    finish(queue, "video", ok=False)
    assert queue.count("failed") == 4

    assert queue.retry_all("email") == 3
    assert queue.ids("inactive") == [j.id for j in emails]
    assert queue.ids("failed") == [video.id]
    again = queue.get_job(emails[0].id)  # type: ignore[arg-type]
    assert again.to_dict()["attempts"]["made"] == 0  # a retry gets its attempts anew
    assert [h["state"] for h in queue.history(emails[0].id)][-1] == "inactive"  # type: ignore[arg-type]
    assert queue.retry_all() == 1 and queue.count("failed") == 0


def test_promote_all_delayed_and_remove_all(queue: Queue, r: redis.Redis) -> None:
    delayed = [queue.create_job("t").delay(60_000).save() for _ in range(3)]
    assert queue.promote_all() == 3
    assert queue.ids("inactive") == [j.id for j in delayed]
    assert r.llen(queue.keys.tokens("t")) == 3  # one wake-up per job made inactive
    assert queue.remove_all("inactive", "t") == 3
    assert queue.counts() == dict.fromkeys(queue.counts(), 0)
    for job in delayed:
        assert not r.exists(queue.keys.job(job.id))  # type: ignore[arg-type]


def test_bulk_runs_in_batches_and_skips_stale_members(
    queue: Queue, r: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(defaults, "BULK_BATCH", 4)
    jobs = [queue.create_job("t").save() for _ in range(10)]
    for job in jobs:
        job.set_state("complete")
    # Left by an interrupted client: a member with no hash, and one of a job in another state.
    r.zadd(queue.keys.state("complete"), {zid(999_999): 0})
    other = queue.create_job("t").save()
    r.zadd(queue.keys.state("complete"), {zid(other.id): 0})  # type: ignore[arg-type]

    assert queue.remove_all("complete") == 10
    assert r.zcard(queue.keys.state("complete")) == 0
    assert queue.ids("inactive") == [other.id]  # not removed: it was not complete


def test_bulk_refuses_active_and_unknown_states(queue: Queue, r: redis.Redis) -> None:
    queue.create_job("t").save()
    queue.scripts.call(calls.claim(queue.keys, "t", "w1", 10_000))
    before = snapshot(r, queue.prefix)
    with pytest.raises(InvalidJob, match="not active"):
        queue.remove_all("active")
    with pytest.raises(InvalidJob):
        queue.remove_all("nope")
    with pytest.raises(InvalidJob):
        queue.retry_all("bad type with\nnewline")
    assert not written_since(r, queue.prefix, before)


def _complete_tallied(queue: Queue, tally: Tally, job_type: str) -> int:
    """Claim and complete the next job of ``job_type``, counted as a worker counts its own."""
    claimed = queue.scripts.call(calls.claim(queue.keys, job_type, "kue:test:1", 10_000))
    assert isinstance(claimed, tuple)
    job_id, fields = claimed
    c = calls.complete(queue.keys, job_id, fields["lease"], "{}", None, tallied=True)
    ended = queue.scripts.call(c)
    assert ended.outcome == "complete" and ended.tally is not None
    at, ms = ended.tally
    job = queue.get_job(job_id)
    assert ms == job.duration and at == job.updated_at  # type: ignore[union-attr]
    tally.add(job_type, at, ms)
    return job_id


@pytest.mark.parametrize("counted_by", ["script", "worker"])
def test_outcome_counters(queue: Queue, counted_by: str) -> None:
    """The same counters whether complete.lua adds them or a worker's tally does."""
    for _ in range(3):
        queue.create_job("email").save()
    queue.create_job("video").save()
    tally = Tally()
    done: list[int] = []
    for job_type in ("email", "email", "video"):
        if counted_by == "script":
            done.append(finish(queue, job_type, ok=True))
        else:
            done.append(_complete_tallied(queue, tally, job_type))
    finish(queue, "email", ok=False)
    if counted_by == "worker":
        assert queue.totals()["complete"] == {} and queue.work_time() == 0  # not yet added
        tally.flush(queue.client, queue.keys)
        tally.flush(queue.client, queue.keys)  # nothing twice
    durations = [queue.get_job(i).duration for i in done]  # type: ignore[union-attr]
    assert queue.work_time() == sum(durations)  # type: ignore[arg-type]
    minute = queue.keys.minute("complete", queue.get_job(done[0]).updated_at // 60_000)  # type: ignore[union-attr, operator]
    assert 0 < queue.client.ttl(minute) <= defaults.MINUTE_COUNTER_TTL

    minutes = queue.throughput(5)
    assert len(minutes) == 5
    assert minutes[-1]["at"] % 60_000 == 0 and minutes[-1]["at"] - minutes[0]["at"] == 240_000
    assert sum(m["complete"] for m in minutes) == 3
    assert sum(m["failed"] for m in minutes) == 1

    totals = queue.totals()
    assert totals["complete"] == {"email": 2, "video": 1}
    assert totals["failed"] == {"email": 1}
    assert sum(n for _, n in totals["durations"]) == 3
    assert totals["durations"][-1][0] is None  # the last bucket has no upper bound


@pytest.mark.slow
def test_a_tally_kept_when_redis_fails(queue: Queue) -> None:
    """Counts that could not be added are added by the next flush, with those since."""
    tally = Tally()
    tally.add("email", 120_000, 7)
    down = redis.Redis(port=free_port(), socket_connect_timeout=0.5)
    with pytest.raises(redis.ConnectionError):
        tally.flush(down, queue.keys)
    tally.add("email", 180_000, 100_000_000)
    tally.flush(queue.client, queue.keys)
    assert queue.work_time() == 100_000_007
    totals = queue.totals()
    assert totals["complete"] == {"email": 2}
    assert dict(totals["durations"])[10] == 1 and dict(totals["durations"])[None] == 1
    got = queue.client.mget([queue.keys.minute("complete", m) for m in (2, 3)])
    assert got == ["1", "1"]


def test_a_refused_completion_has_nothing_to_count(queue: Queue) -> None:
    queue.create_job("t").save()
    claimed = queue.scripts.call(calls.claim(queue.keys, "t", "w1", 10_000))
    assert isinstance(claimed, tuple)
    stale = calls.complete(queue.keys, claimed[0], "not-the-lease", "{}", None, tallied=True)
    ended = queue.scripts.call(stale)
    assert ended.outcome == "refused" and ended.tally is None
    queue.remove(claimed[0])  # a job gone meanwhile
    gone = calls.complete(queue.keys, claimed[0], claimed[1]["lease"], "{}", None, tallied=True)
    ended = queue.scripts.call(gone)
    assert (ended.outcome, ended.next_job) == ("refused", None)
    assert ended.tally is None


def test_a_retried_attempt_is_not_counted_as_failed(queue: Queue) -> None:
    queue.create_job("t").attempts(2).save()
    claimed = queue.scripts.call(calls.claim(queue.keys, "t", "w1", 10_000))
    assert claimed and claimed != "paused"
    outcome = queue.scripts.call(
        calls.fail(queue.keys, claimed[0], claimed[1]["lease"], "x", "x", 0, None)
    ).outcome
    assert outcome == "inactive"
    assert queue.totals()["failed"] == {}


def test_throughput_refuses_bad_windows(queue: Queue) -> None:
    for bad in (0, -1, defaults.THROUGHPUT_MINUTES + 1, "60", True):
        with pytest.raises(InvalidJob):
            queue.throughput(bad)  # type: ignore[arg-type]


def test_search_by_type_title_and_id(queue: Queue) -> None:
    a = queue.create_job("email", {"title": "Welcome Ada"}).save()
    b = queue.create_job("video-transcode", {"title": "cat.mp4"}).save()
    c = queue.create_job("email", {"to": "welcome@example.com"}).save()  # no title
    assert queue.search("welcome") == [a.id]  # data other than the title is not searched
    assert queue.search("EMAIL") == [c.id, a.id]  # newest first
    assert queue.search("transcode") == [b.id]
    assert queue.search(str(b.id)) == [b.id]
    assert queue.search("email", count=1) == [c.id]
    assert queue.search("email", count=1).total == 2
    assert queue.search("email", offset=1) == [a.id]
    assert queue.search("nothing like it") == []
    assert queue.search("²") == []  # a digit to str.isdigit(), not a job id
    for bad in ("", "   ", None, "--"):
        with pytest.raises(InvalidJob):
            queue.search(bad)  # type: ignore[arg-type]
