"""The Queue facade against a real Redis: ordering, Kue's range rules, counts, validation."""

from __future__ import annotations

from typing import Any

import pytest
import redis

from kue_core import InvalidJob, JobNotFound, Queue, defaults
from kue_core.store import calls
from tests.conftest import finish, keys_under


@pytest.fixture
def queue(client: Any) -> Any:
    """Every test here runs on both clients: ``Queue`` and ``AsyncQueue`` (see
    ``client`` in tests/conftest.py)."""
    return client


def _save_with_id(queue: Queue, r: redis.Redis, job_id: int, priority: str = "normal") -> int:
    r.set(queue.keys.ids, job_id - 1)
    job = queue.create_job("t").priority(priority).save()
    assert job.id == job_id
    return job_id


def test_priority_then_fifo_across_id_lengths(queue: Queue, r: redis.Redis) -> None:
    for jid in (9, 10, 100):
        _save_with_id(queue, r, jid)
    _save_with_id(queue, r, 200, "low")
    _save_with_id(queue, r, 300, "critical")
    assert queue.ids("inactive") == [300, 9, 10, 100, 200]
    assert queue.ids("inactive", "t") == [300, 9, 10, 100, 200]


def test_range_windows_by_score_then_sorts_by_id(queue: Queue, r: redis.Redis) -> None:
    for jid in (9, 10, 100):
        _save_with_id(queue, r, jid, "low")
    _save_with_id(queue, r, 150, "critical")
    # Window = the two best-scored jobs (150, then 9); page sorted by id.
    assert [j.id for j in queue.range_by_state("inactive", 0, 1)] == [9, 150]
    assert [j.id for j in queue.range_by_state("inactive", 0, 1, "desc")] == [150, 9]
    # desc only reverses the page; it does not pick the lowest-priority window.
    assert [j.id for j in queue.range_by_state("inactive", 0, 0, "desc")] == [150]
    assert [j.id for j in queue.range_by_type("t", "inactive", 0, -1)] == [9, 10, 100, 150]
    assert [j.id for j in queue.range(0, -1)] == [9, 10, 100, 150]
    assert queue.range_by_state("inactive", 10, 20) == []
    assert queue.range_by_type("nope", "inactive", 0, -1) == []


def test_a_types_delayed_jobs_are_soonest_due_first(
    queue: Queue, r: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kue scores a type's delayed set by priority (Node Kue reads it so, and it stays so);
    its list is by due time, as the all-types list is: read whole, or walked for a big type."""
    given = (("critical", 50_000), ("low", 10_000), ("normal", 30_000), ("high", 20_000))
    jobs = [queue.create_job("t").priority(p).delay(ms).save() for p, ms in given]
    queue.create_job("u").delay(5_000).save()  # another type's, due first
    soonest = [jobs[1].id, jobs[3].id, jobs[2].id, jobs[0].id]
    member = f"{len(str(jobs[0].id)):02d}|{jobs[0].id}"
    assert r.zscore(queue.keys.type_state("t", "delayed"), member) == -15  # Kue's layout
    for limit in (defaults.DUE_SORT_LIMIT, 2):
        monkeypatch.setattr(defaults, "DUE_SORT_LIMIT", limit)
        monkeypatch.setattr(defaults, "DUE_WALK_BATCH", 2)
        assert [j.id for j in queue.page("delayed", "t", count=10)] == soonest, limit
        assert [j.id for j in queue.page("delayed", "t", count=10, desc=True)] == soonest[::-1]
        assert [j.id for j in queue.page("delayed", "t", offset=1, count=2)] == soonest[1:3]
        assert queue.page("delayed", "t", offset=4, count=2) == []
        # Kue's range: the window by due time, then sorted by id.
        assert [j.id for j in queue.range_by_type("t", "delayed", 0, 1)] == sorted(soonest[:2])
        window = queue.range_by_type("t", "delayed", -2, -1, "desc")
        assert [j.id for j in window] == sorted(soonest[2:], reverse=True)
        assert queue.range_by_type("t", "delayed", 3, 1) == []
        assert queue.range_by_type("none", "delayed", 0, -1) == []
    # The all-types list, as it was: the other type's job, due first, comes first.
    assert [j.id for j in queue.page("delayed", count=1)] == [jobs[-1].id + 1]


def test_range_drops_ids_without_a_hash(queue: Queue, r: redis.Redis) -> None:
    a = queue.create_job("t").save()
    r.zadd(queue.keys.state("inactive"), {"02|77": 0})
    assert [j.id for j in queue.range_by_state("inactive", 0, -1)] == [a.id]


def test_range_arguments_are_checked(queue: Queue) -> None:
    with pytest.raises(InvalidJob, match="order"):
        queue.range(0, 1, "sideways")
    with pytest.raises(InvalidJob, match="from"):
        queue.range("0", 1)  # type: ignore[arg-type]
    with pytest.raises(InvalidJob, match="state"):
        queue.range_by_state("bogus", 0, 1)


def test_counts_types_and_work_time(queue: Queue, r: redis.Redis) -> None:
    queue.create_job("email").save()
    queue.create_job("email").delay(5000).save()
    queue.create_job("video").save().set_state("failed")
    assert queue.counts() == {
        "inactive": 1,
        "active": 0,
        "complete": 0,
        "failed": 1,
        "delayed": 1,
        "blocked": 0,
        "pinned": 0,
        "suspended": 0,
    }
    assert queue.counts("email") == {
        "inactive": 1,
        "active": 0,
        "complete": 0,
        "failed": 0,
        "delayed": 1,
        "blocked": 0,
        "pinned": 0,
        "suspended": 0,
    }
    assert queue.count("failed", "video") == 1
    assert queue.types() == ["email", "video"]
    assert queue.work_time() == 0  # not null on a fresh Redis
    r.incrby(queue.keys.work_time, 105)
    assert queue.work_time() == 105


def test_get_job_and_to_dict(queue: Queue) -> None:
    job = queue.create_job("probe", {"title": "p1"}).priority("high").attempts(3).save()
    got = queue.get_job(job.id).to_dict()  # type: ignore[arg-type]
    assert list(got) == [
        "id",
        "type",
        "data",
        "priority",
        "progress",
        "state",
        "created_at",
        "promote_at",
        "updated_at",
        "attempts",
    ]
    assert got["id"] == job.id and got["type"] == "probe" and got["data"] == {"title": "p1"}
    assert got["priority"] == -10 and got["progress"] == 0 and got["state"] == "inactive"
    assert isinstance(got["created_at"], int)
    assert got["attempts"] == {"made": 0, "remaining": 3, "max": 3}
    assert queue.get_job(str(job.id)).id == job.id
    delayed = queue.get_job(queue.create_job("t").delay(1500).ttl(900).save().id).to_dict()  # type: ignore[arg-type]
    assert delayed["delay"] == 1500 and delayed["ttl"] == 900
    assert delayed["promote_at"] == delayed["created_at"] + 1500


def test_unknown_and_invalid_ids(queue: Queue) -> None:
    with pytest.raises(JobNotFound, match='job "424242" doesnt exist'):
        queue.get_job(424242)
    for bad in ("abc", -1, 0, 1.5, True, "1e3"):
        with pytest.raises(InvalidJob):
            queue.get_job(bad)  # type: ignore[arg-type]
    assert queue.get_log(424242) == []


@pytest.mark.parametrize(
    ("build", "field"),
    [
        (lambda q: q.create_job(None), "type"),
        (lambda q: q.create_job(""), "type"),
        (lambda q: q.create_job("a\x00b"), "type"),
        (lambda q: q.create_job("t", {"x": {1, 2}}).save(), "data"),
        (lambda q: q.create_job("t", {"x": float("nan")}).save(), "data"),
        (lambda q: q.create_job("t").priority("urgent"), "priority"),
        (lambda q: q.create_job("t").delay(-5), "delay"),
        (lambda q: q.create_job("t").attempts(0), "attempts"),
        (lambda q: q.create_job("t").backoff("0; evil()"), "backoff"),
        (lambda q: q.create_job("t").set_state("bogus"), "state"),
        (lambda q: q.save_many([q.create_job("t"), q.create_job("t", {"x": object()})]), "data"),
    ],
)
def test_bad_input_names_the_field_and_writes_nothing(
    queue: Queue, r: redis.Redis, build, field
) -> None:  # type: ignore[no-untyped-def]
    # The queue's own keys: the server's whole count also moves as keys of earlier tests
    # expire (a worker's registration lives 1.8 s after its last beat).
    before = keys_under(r, queue.prefix)
    with pytest.raises(InvalidJob, match=field):
        build(queue)
    assert keys_under(r, queue.prefix) == before


def test_save_many_assigns_ids_in_order(queue: Queue, r: redis.Redis, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from kue_core import defaults

    monkeypatch.setattr(defaults, "SAVE_CHUNK", 7)  # several pipelined chunks
    jobs = queue.save_many(queue.create_job("bulk", {"i": i}) for i in range(30))
    assert [j.id for j in jobs] == list(range(1, 31))
    assert queue.count("inactive", "bulk") == 30
    assert r.llen(queue.keys.tokens("bulk")) == 30
    assert [j.data["i"] for j in queue.range_by_type("bulk", "inactive", 0, -1)] == list(range(30))
    with pytest.raises(InvalidJob, match="saved already"):
        queue.save_many([jobs[0]])


def test_save_many_survives_a_flushed_script_cache(
    queue: Queue, r: redis.Redis, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    from kue_core import defaults

    monkeypatch.setattr(defaults, "SAVE_CHUNK", 2)
    r.script_flush()
    jobs = queue.save_many([queue.create_job("t") for _ in range(5)])
    assert [j.id for j in jobs] == [1, 2, 3, 4, 5]
    r.script_flush()
    assert queue.create_job("t").save().id == 6


# -- complete and failed jobs by finish time (Queue.page(by="finished")) -------------------
def _by_finish(r: redis.Redis, queue: Queue, state: str, ids: list[int]) -> list[int]:
    """The reference order: finish time (the index's score), then id; ids missing from the
    index after, by id."""
    scores = {i: r.zscore(queue.keys.finished(state), f"{len(str(i)):02d}|{i}") for i in ids}
    indexed = sorted((s, i) for i, s in scores.items() if s is not None)
    return [i for _, i in indexed] + sorted(i for i, s in scores.items() if s is None)


def _finished(queue: Queue, state: str, job_type: str | None = None, **kwargs: Any) -> list[int]:
    return [j.id for j in queue.page(state, job_type, by="finished", **kwargs)]  # type: ignore[misc]


@pytest.mark.parametrize("state", ["complete", "failed"])
def test_finished_jobs_page_by_finish_time(
    queue: Queue, r: redis.Redis, redis_url: str, prefix: str, state: str
) -> None:
    worker = Queue(redis_url, prefix=prefix)
    try:
        for jid, job_type, priority in ((9, "a", "low"), (10, "b", "high"), (100, "a", "normal")):
            _save_with_id(worker, r, jid, priority)
            worker.get_job(jid).move(job_type)
        order = [finish(worker, t, ok=state == "complete") for t in ("b", "a", "a")]
    finally:
        worker.close()
    every = _by_finish(r, queue, state, order)
    assert sorted(every) == [9, 10, 100]
    assert _finished(queue, state, count=10) == every
    assert _finished(queue, state, desc=True, count=10) == every[::-1]
    assert _finished(queue, state, offset=1, count=1) == every[1:2]
    assert _finished(queue, state, desc=True, offset=2, count=5) == every[::-1][2:]
    of_a = [i for i in every if i != 10]
    assert _finished(queue, state, "a", count=10) == of_a
    assert _finished(queue, state, "a", desc=True, offset=1, count=10) == of_a[::-1][1:]
    assert _finished(queue, state, "b", count=0) == []
    # A job finished by a Kue worker that does not write the index comes last, by id.
    r.zrem(queue.keys.finished(state), "02|10")
    assert _finished(queue, state, count=10) == [i for i in every if i != 10] + [10]
    assert _finished(queue, state, desc=True, count=10) == [i for i in every[::-1] if i != 10] + [
        10
    ]
    assert _finished(queue, state, "b", desc=True, count=10) == [10]


def test_a_type_with_many_finished_jobs_among_others(
    queue: Queue, r: redis.Redis, sync_queue: Queue
) -> None:
    """Past a few thousand jobs of the type, the page walks the finish times (the other way
    reads the type's finish times whole): both give the same order."""
    big = queue.save_many([queue.create_job("big") for _ in range(2500)])
    small = queue.save_many([queue.create_job("small") for _ in range(5)])
    sync_queue.scripts.call(
        calls.bulk(queue.keys, queue.keys.state("inactive"), "inactive", "complete", 10_000)
    )
    every = _by_finish(r, queue, "complete", [j.id for j in big + small])  # type: ignore[misc]
    of_big = [i for i in every if i <= big[-1].id]  # type: ignore[operator]
    assert _finished(queue, "complete", "big", desc=True, count=3) == of_big[::-1][:3]
    assert _finished(queue, "complete", "big", offset=2498, count=5) == of_big[2498:]
    assert _finished(queue, "complete", "small", desc=True, count=10) == [j.id for j in small[::-1]]


def test_finish_order_is_for_finished_states_only(queue: Queue) -> None:
    for state in ("inactive", "active", "delayed", "blocked", "pinned"):
        with pytest.raises(InvalidJob, match="finish time"):
            queue.page(state, by="finished")
    for bad in ("done", "", None):
        with pytest.raises(InvalidJob, match="by is one of"):
            queue.page("complete", by=bad)  # type: ignore[arg-type]
