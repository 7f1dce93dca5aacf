"""The statistics' history: sampled once a minute from the counters jobs already keep, read
per type and range, with the versions serving each type (kue_core.features.history)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import redis

from kue_core import InvalidJob, Queue, defaults, doctor
from kue_core.base.errors import KueError
from kue_core.features import history
from kue_core.features.history import STEPS, Point, quantile
from kue_core.features.timings import Recorder
from kue_core.store.calls import Op, Read
from tests.conftest import finish, server_ms, wait_for


def _sample(queue: Queue) -> bool:
    return queue.scripts.drive(history.sample(queue.keys))


def _next_minute(queue: Queue, r: redis.Redis) -> bool:
    """Sample again as if a minute had passed since the last sample: the minute the last
    sample wrote is set back one (its point is the one written again)."""
    minute = int(r.get(queue.keys.series_minute) or 0)
    r.set(queue.keys.series_minute, minute - 1)
    return _sample(queue)


def sampled(queue: Queue, job_type: str | None, span: str) -> dict[str, Any]:
    """The point of ``span`` that holds the minute the last sample wrote (the minute before
    it was taken): not always the last point, as the clock may have turned since."""
    minute = int(queue.client.get(queue.keys.series_minute) or 0) - 1
    found = queue.stats_history(job_type, span)
    at = minute * 60_000 // found["step_ms"] * found["step_ms"]
    (point,) = [p for p in found["points"] if p["at"] == at]
    return point  # type: ignore[no-any-return]


def _timing(queue: Queue, job_type: str, kind: str, *ms: int) -> None:
    recorder = Recorder()
    now = server_ms(queue.client)
    for each in ms:
        recorder.add(job_type, kind, each, now)
    recorder.flush(queue.client, queue.keys)


@pytest.fixture
def hq(redis_url: str, prefix: str) -> Iterator[Queue]:
    # A lease no load outlasts: a worker's registration, which says its version, expires 3
    # leases after its last heartbeat, and a process held up that long under load (1.8 s of a
    # 600 ms lease, two cores, under coverage) rightly drops out of the versions serving.
    q = Queue(redis_url, prefix=prefix, lease_ms=30_000, version="2.0.1")
    yield q
    q.close()


def test_a_minute_s_completions_failures_backlog_and_times(queue: Queue, r: redis.Redis) -> None:
    for _ in range(5):
        queue.create_job("email").save()
    queue.create_job("video").delay(600_000).save()
    assert _sample(queue)  # the first sample: where the next one starts from
    for ok in (True, True, True, False):
        finish(queue, "email", ok)
    _timing(queue, "email", "wait", 3, 7, 7, 40)
    _timing(queue, "email", "run", 200, 300, 300, 2000)
    assert _next_minute(queue, r)
    email = queue.stats_history("email", "1h")
    assert email["type"] == "email" and email["range"] == "1h" and email["step_ms"] == 60_000
    assert len(email["points"]) == 60
    last = sampled(queue, "email", "1h")
    assert last["at"] == (int(r.get(queue.keys.series_minute) or 0) - 1) * 60_000
    assert (last["complete"], last["failed"]) == (3, 1)
    assert (last["waiting"], last["delayed"]) == (1, 0)  # one email left waiting
    assert last["wait"]["count"] == 4 and last["wait"]["mean_ms"] == 14.2
    # 4 runs: 200 in (100, 250], 300 twice in (250, 500], 2000 in (1000, 2500].
    assert last["run"]["p50_ms"] == 375.0 and last["run"]["p99_ms"] == 2440.0
    video = sampled(queue, "video", "1h")
    assert (video["complete"], video["waiting"], video["delayed"]) == (0, 0, 1)
    every = queue.stats_history(None, "1h")
    assert every["type"] is None
    assert sampled(queue, None, "1h")["delayed"] == 1 and sampled(queue, None, "1h")["waiting"] == 1
    assert every["total"]["complete"] == 3 and every["total"]["failed"] == 1
    # The hour and the day grow by the minute; the backlog is the highest of their minutes.
    for span in ("7d", "30d"):
        point = sampled(queue, "email", span)
        assert (point["complete"], point["failed"], point["waiting"]) == (3, 1, 5)
        assert point["run"]["count"] == 4


def test_the_first_sample_counts_a_new_queue_s_first_jobs(queue: Queue, r: redis.Redis) -> None:
    """No history yet, and every job the counters hold ended within the day: a newcomer's
    first jobs show in the first sample, rather than zeros."""
    for _ in range(4):
        queue.create_job("email").save()
    for ok in (True, True, False):
        finish(queue, "email", ok)
    _timing(queue, "email", "run", 200, 300, 300)
    assert _sample(queue)  # the first sample ever
    first = sampled(queue, "email", "1h")
    assert (first["complete"], first["failed"], first["waiting"]) == (2, 1, 1)
    assert first["run"]["count"] == 3
    assert queue.stats_history(None, "24h")["total"]["complete"] == 2
    finish(queue, "email", True)
    assert _next_minute(queue, r)  # and from there on, what each minute adds
    assert sampled(queue, "email", "1h")["complete"] == 1
    assert sampled(queue, "email", "7d")["complete"] == 3  # the hour grew by both


def test_the_first_sample_keeps_an_older_deployment_s_counters_out(
    queue: Queue, r: redis.Redis
) -> None:
    """Totals of months (more than the minute counters of the day add up to) are where the
    history starts from: the first minute shows the backlog alone, not months of jobs."""
    r.hset(queue.keys.totals, mapping={"complete:email": 90_000, "failed:email": 700})
    queue.create_job("email").save()
    queue.create_job("email").save()
    finish(queue, "email", True)  # today's, among the months': not told apart
    assert _sample(queue)
    first = sampled(queue, "email", "1h")
    assert (first["complete"], first["failed"], first["waiting"]) == (0, 0, 1)
    finish(queue, "email", False)
    assert _next_minute(queue, r)
    assert (sampled(queue, "email", "1h")["complete"], sampled(queue, "email", "1h")["failed"]) == (
        0,
        1,
    )
    assert sampled(queue, "email", "7d")["failed"] == 1


def test_a_minute_is_sampled_once(queue: Queue, r: redis.Redis) -> None:
    queue.create_job("email").save()
    assert _sample(queue)
    assert not _sample(queue)  # the same minute: another keeper already wrote it
    # A sample made of figures read before another process wrote one is not written.
    minute = int(r.get(queue.keys.series_minute) or 0)
    r.set(queue.keys.series_minute, minute - 1)
    op = history.sample(queue.keys)
    step = next(op)
    while isinstance(step, Read):
        step = op.send(queue.scripts.drive(_replay(step)))
    r.set(queue.keys.series_minute, minute)  # another process sampled meanwhile
    written = r.hgetall(queue.keys.series_last)
    with pytest.raises(StopIteration) as done:
        op.send(queue.scripts.call(step))
    assert done.value.value is False
    assert r.hgetall(queue.keys.series_last) == written


def _replay(step: Read) -> Op[Any]:
    """An operation of one step, to run a step of another by hand."""
    return (yield step)


def test_an_idle_type_writes_nothing(queue: Queue, r: redis.Redis) -> None:
    queue.create_job("email").save()
    assert _sample(queue)
    finish(queue, "email", True)
    assert _next_minute(queue, r)
    minute_keys = sorted(r.scan_iter(f"{queue.prefix}:history:m:*:email"))
    assert len(minute_keys) == 1
    written = r.hgetall(minute_keys[0])
    assert len(written) == 1
    assert _next_minute(queue, r)  # nothing done, nothing waiting: the point stays
    assert r.hgetall(minute_keys[0]) == written
    assert sampled(queue, "email", "1h")["complete"] == 1


def test_points_expire_with_their_range(queue: Queue, r: redis.Redis) -> None:
    queue.create_job("email").save()
    assert _sample(queue)
    finish(queue, "email", True)
    assert _next_minute(queue, r)
    for code, step in STEPS.items():
        (key,) = r.scan_iter(f"{queue.prefix}:history:{code}:*:email")
        assert 0 < r.ttl(key) <= step.keep_s
    assert r.ttl(queue.keys.series_last) == -1  # one hash, rewritten by every sample


def test_unsampled_minutes_have_no_backlog(queue: Queue) -> None:
    points = queue.stats_history("email", "1h")["points"]
    assert all(p["waiting"] is None and p["complete"] == 0 for p in points)
    assert all(p["wait"]["p50_ms"] is None for p in points)


def test_the_day_turning_keeps_the_last_day_s_times(queue: Queue, r: redis.Redis) -> None:
    queue.create_job("email").save()
    assert _sample(queue)
    last = json.loads(r.hget(queue.keys.series_last, "email") or "{}")
    yesterday = (datetime.now(UTC).date() - timedelta(days=1)).isoformat()
    key = queue.keys.timings("email", yesterday, "run")
    r.hset(key, mapping={"count": 3, "sum": 30, "le:10": 3})
    r.expire(key, 60)
    # The last sample read yesterday's histogram at one run; two came after it.
    last.update(day=yesterday, run=[1, 10, 0, 1, *[0] * 13])
    r.hset(queue.keys.series_last, "email", json.dumps(last))
    _timing(queue, "email", "run", 30)
    assert _next_minute(queue, r)
    run = sampled(queue, "email", "1h")["run"]
    assert run["count"] == 3 and run["mean_ms"] == pytest.approx(50 / 3, abs=0.1)


def test_deploys_mark_when_the_versions_serving_a_type_change(
    redis_url: str, prefix: str, queue: Queue, r: redis.Redis
) -> None:
    def serve(version: str) -> Queue:
        # A lease no load outlasts (see hq): a registration expired under load would make a
        # deploy marker of its own.
        q = Queue(redis_url, prefix=prefix, lease_ms=30_000, version=version)
        q.process("email", 1, lambda job: None)
        wait_for(lambda: any(w.get("version") == version for w in queue.workers()))
        return q

    # The workers' keepers sample too: whichever writes a minute's sample, it is the same.
    old = serve("1.0")
    _sample(queue)
    new = serve("1.1")
    _next_minute(queue, r)
    old.close()
    wait_for(lambda: len(queue.workers()) == 1)
    _next_minute(queue, r)
    new.close()
    _next_minute(queue, r)  # no worker: the last versions stand
    changes = queue.stats_history("email", "24h")["deploys"]
    assert [(c["was"], c["versions"]) for c in changes] == [
        ([], ["1.0"]),
        (["1.0"], ["1.0", "1.1"]),
        (["1.0", "1.1"], ["1.1"]),
    ]
    assert all(c["at"] <= server_ms(r) for c in changes)
    assert queue.stats_history(None, "24h")["deploys"] == changes  # all: the same here
    assert queue.stats_history("video", "24h")["deploys"] == []


def test_a_worker_samples_on_its_own(hq: Queue, r: redis.Redis) -> None:
    hq.process("email", 1, lambda job: None)
    wait_for(lambda: r.exists(hq.keys.series_minute), timeout=defaults.HISTORY_CHECK + 5)
    assert hq.workers()[0]["version"] == "2.0.1"


def test_bad_arguments(queue: Queue, r: redis.Redis) -> None:
    with pytest.raises(InvalidJob, match="range must be one of 1h, 24h, 7d, 30d"):
        queue.stats_history("email", "2d")
    with pytest.raises(InvalidJob):
        queue.stats_history("", "1h")
    with pytest.raises(InvalidJob, match="version"):
        Queue(prefix=queue.prefix, client=queue.client, version="1 0")
    with pytest.raises(KueError, match="malformed"):  # a key not the history's
        queue.scripts.call(
            history.calls.sample(queue.keys, "", 1, [1, "other", 0, "x", 60, 0, "k", 0])
        )
    assert not r.exists(queue.keys.series_minute)


def test_points_read_back_as_written() -> None:
    point = Point(3, 1, None, 7, [2, 30, 0, 2, *[0] * 13], [0] * 17)
    assert Point.decode(point.encode()) == point
    assert Point.decode("garbage") == Point()
    assert quantile([0] * 17, 0.5) is None
    assert quantile([1, 999_999, *[0] * 14, 1], 0.99) == defaults.DURATION_BUCKETS_MS[-1]


def test_a_job_pays_nothing(queue: Queue, r: redis.Redis) -> None:
    """Saving and finishing jobs writes no key of the history: only a sample does."""
    queue.create_job("email").save()
    finish(queue, "email", True)
    assert not list(r.scan_iter(f"{queue.prefix}:history:*"))


def test_the_doctor_bounds_the_history_bulk_records_and_the_audit_log(
    queue: Queue, r: redis.Redis
) -> None:
    queue.create_job("email").save()
    assert _sample(queue)
    finish(queue, "email", True)
    assert _next_minute(queue, r)
    assert doctor.check(queue).healthy  # as the sampler writes them
    (hour,) = r.scan_iter(f"{queue.prefix}:history:h:*:email")
    r.persist(hour)
    run = queue.keys.bulk("f" * 32)
    r.hset(run, mapping={"action": "retry", "state": "done"})  # as if its expiry was lost
    r.set(queue.keys.bulk("not-a-run"), "x")  # not a record: not the doctor's to bound
    pipe = r.pipeline(transaction=False)
    for _ in range(2 * defaults.AUDIT_MAX_ENTRIES + 1):
        pipe.xadd(queue.keys.audit, {"action": "create"})
    pipe.execute()
    report = doctor.check(queue)
    assert sorted((f.kind, f.key) for f in report.findings) == [
        ("long-audit", queue.keys.audit),
        ("unbounded-bulk", run),
        ("unbounded-history", hour),
    ]
    assert [o.status for o in doctor.repair(queue, report.findings)] == ["repaired"] * 3
    assert 0 < r.ttl(hour) <= STEPS["h"].keep_s
    assert 0 < r.ttl(run) * 1000 <= defaults.BULK_KEEP_MS
    assert r.ttl(queue.keys.bulk("not-a-run")) == -1
    assert r.xlen(queue.keys.audit) < 2 * defaults.AUDIT_MAX_ENTRIES
    assert doctor.check(queue).healthy
