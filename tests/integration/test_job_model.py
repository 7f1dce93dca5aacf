"""The Job model against a real Redis: what its attributes hold before and after the job runs,
and its options (delay given as a time)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
import redis

from kue_core import InvalidJob, Queue
from kue_core.base.keys import zid
from kue_core.jobs.job import Job
from kue_core.store import calls

W = "worker-a"


@pytest.fixture
def queue(client: Any) -> Any:
    """Every test here runs on both clients: ``Queue`` and ``AsyncQueue`` (see
    ``client`` in tests/conftest.py)."""
    return client


def _claim(queue: Queue, job_type: str = "t") -> tuple[int, str]:
    claimed = queue.scripts.call(calls.claim(queue.keys, job_type, W, 60_000))
    assert isinstance(claimed, tuple)
    return claimed[0], claimed[1]["lease"]


# -- result and progress_data ---------------------------------------------------------------
def _unset_fields_are_none(job: Job) -> None:
    assert job.result is None and job.progress_data is None
    out = job.to_dict()
    assert "result" not in out and "progress_data" not in out  # as Kue's JSON leaves them out


def test_result_and_progress_data_are_none_until_set(sync_queue: Queue) -> None:
    job = sync_queue.create_job("t")
    _unset_fields_are_none(job)
    job.save()
    _unset_fields_are_none(job)
    _unset_fields_are_none(sync_queue.get_job(job.id))  # type: ignore[arg-type]
    job_id, lease = _claim(sync_queue)
    sync_queue.scripts.call(calls.fail(sync_queue.keys, job_id, lease, "E", "E", -1, None))
    _unset_fields_are_none(sync_queue.get_job(job_id))


def test_result_and_progress_data_once_stored(sync_queue: Queue) -> None:
    job = sync_queue.create_job("t").save()
    job.progress(1, 2, {"step": 1})
    assert job.progress_data == {"step": 1} and job.to_dict()["progress_data"] == {"step": 1}
    job_id, lease = _claim(sync_queue)
    sync_queue.scripts.call(calls.complete(sync_queue.keys, job_id, lease, '{"ok":true}', None))
    done = sync_queue.get_job(job_id)
    assert done.result == {"ok": True} and done.progress_data == {"step": 1}
    out = done.to_dict()
    assert out["result"] == {"ok": True} and out["progress_data"] == {"step": 1}


def test_a_stored_null_result_is_kept_in_the_json(sync_queue: Queue) -> None:
    """A handler that returned None leaves ``null`` in the hash, which Kue's JSON shows."""
    sync_queue.create_job("t").save()
    job_id, lease = _claim(sync_queue)
    sync_queue.scripts.call(calls.complete(sync_queue.keys, job_id, lease, "null", None))
    done = sync_queue.get_job(job_id)
    assert done.result is None
    assert "result" in done.to_dict() and done.to_dict()["result"] is None


# -- delay(datetime): Kue's delay(Date) -----------------------------------------------------
def _ms(when: datetime) -> int:
    return int(when.timestamp() * 1000)


def _server_now(r: redis.Redis) -> datetime:
    seconds, micros = r.time()
    return datetime.fromtimestamp(int(seconds) + int(micros) / 1e6, UTC)


def test_delay_until_a_time_is_due_exactly_then_on_the_redis_clock(
    queue: Queue, r: redis.Redis
) -> None:
    when = (_server_now(r) + timedelta(minutes=10)).replace(microsecond=250_000)
    job = queue.create_job("t").delay(when)
    assert 500_000 < job.delay() <= 700_000  # a guess on the local clock, before the save
    job.save()
    assert job.state == "delayed"
    h = r.hgetall(queue.keys.job(job.id))  # type: ignore[arg-type]
    # The time itself, however long after delay() the job was saved: computed by save.lua.
    assert int(h["promote_at"]) == _ms(when)
    assert r.zscore(queue.keys.state("delayed"), zid(job.id)) == _ms(when)  # type: ignore[arg-type]
    assert int(h["created_at"]) + int(h["delay"]) == _ms(when)  # Kue's reading of the fields
    loaded = queue.get_job(job.id)  # type: ignore[arg-type]
    assert loaded.state == "delayed" and loaded.promote_at == _ms(when)


def test_delay_until_a_time_in_any_zone_is_that_instant(queue: Queue, r: redis.Redis) -> None:
    when = _server_now(r).replace(microsecond=0) + timedelta(hours=1)
    elsewhere = when.astimezone(timezone(timedelta(hours=5, minutes=30)))
    job = queue.create_job("t").delay(elsewhere).save()
    assert int(r.hget(queue.keys.job(job.id), "promote_at")) == _ms(when)  # type: ignore[arg-type]


def test_delay_until_a_past_time_runs_at_once(sync_queue: Queue, r: redis.Redis) -> None:
    past = _server_now(r) - timedelta(seconds=30)
    job = sync_queue.create_job("t").delay(past)
    assert job.delay() == 0
    job.save()
    assert job.state == "inactive"
    assert "delay" not in r.hgetall(sync_queue.keys.job(job.id))  # type: ignore[arg-type]
    assert sync_queue.scripts.call(calls.claim(sync_queue.keys, "t", W, 60_000)) is not None
    long_ago = sync_queue.create_job("t").delay(datetime(1901, 1, 1, tzinfo=UTC)).save()
    assert long_ago.state == "inactive"


def test_a_time_without_a_zone_is_refused(queue: Queue, r: redis.Redis, prefix: str) -> None:
    with pytest.raises(InvalidJob, match="time zone"):
        queue.create_job("t").delay(datetime.now() + timedelta(hours=1))
    assert not list(r.scan_iter(match=f"{prefix}:*"))


def test_save_many_and_update_take_a_time(queue: Queue, r: redis.Redis) -> None:
    when = _server_now(r).replace(microsecond=0) + timedelta(minutes=5)
    jobs = queue.save_many([queue.create_job("t").delay(when), queue.create_job("t").delay(1000)])
    scores = [r.zscore(queue.keys.state("delayed"), zid(j.id)) for j in jobs]  # type: ignore[arg-type]
    assert scores[0] == _ms(when)
    later = when + timedelta(minutes=5)
    job = queue.get_job(jobs[1].id).delay(later)  # type: ignore[arg-type]
    job.update()
    h = r.hgetall(queue.keys.job(job.id))  # type: ignore[arg-type]
    assert int(h["promote_at"]) == _ms(later)
    assert int(h["created_at"]) + int(h["delay"]) == _ms(later)
    assert r.zscore(queue.keys.state("delayed"), zid(job.id)) == _ms(later)  # type: ignore[arg-type]
    job.delay(2000).update()  # back to a delay in ms: counted from creation, as Kue counts it
    assert int(r.hget(queue.keys.job(job.id), "promote_at")) == int(h["created_at"]) + 2000  # type: ignore[arg-type]
