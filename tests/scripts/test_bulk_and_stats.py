"""Bulk actions on a state, the outcome counters (per minute, totals, durations) and search."""

from __future__ import annotations

import pytest
import redis

from kue_core import InvalidJob, Queue, defaults
from kue_core.keys import zid
from tests.conftest import finish


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
    queue.scripts.claim("t", "w1", 10_000)
    before = {k: r.dump(k) for k in r.scan_iter(match=f"{queue.prefix}:*")}
    with pytest.raises(InvalidJob, match="not active"):
        queue.remove_all("active")
    with pytest.raises(InvalidJob):
        queue.remove_all("nope")
    with pytest.raises(InvalidJob):
        queue.retry_all("bad type with\nnewline")
    assert {k: r.dump(k) for k in r.scan_iter(match=f"{queue.prefix}:*")} == before


def test_outcome_counters(queue: Queue) -> None:
    for _ in range(3):
        queue.create_job("email").save()
    queue.create_job("video").save()
    for _ in range(2):
        finish(queue, "email", ok=True)
    finish(queue, "email", ok=False)
    finish(queue, "video", ok=True)

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


def test_a_retried_attempt_is_not_counted_as_failed(queue: Queue) -> None:
    queue.create_job("t").attempts(2).save()
    claimed = queue.scripts.claim("t", "w1", 10_000)
    assert claimed and claimed != "paused"
    outcome, _ = queue.scripts.fail(claimed[0], claimed[1]["lease"], "x", "x", 0, None)
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
