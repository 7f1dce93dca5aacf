"""Bulk actions on a filter (kue_core.features.bulk): count and act on every job of a state
that also has a type, a tag, words and an age; in batches; recorded, followed and stopped; a
run SIGKILLed part-way leaves what it did done, reads as interrupted, and the doctor finds
nothing."""

from __future__ import annotations

import signal
import subprocess
import sys
from typing import Any

import pytest
import redis

from kue_core import BulkCountChanged, BulkNotFound, InvalidJob, KueError, Queue, defaults, doctor
from kue_core.features import bulk
from kue_core.store import calls
from tests.conftest import server_ms, wait_for

RUN = "b" * 32


def _failed(queue: Queue, n: int) -> list[int]:
    """``n`` failed jobs: email and sms in turn, tagged tenant-0..2 in turn, titled with the
    tenant's word."""
    ids = []
    for i in range(n):
        job = queue.create_job("email" if i % 2 else "sms", {"title": f"invoice t{i % 3}"})
        ids.append(job.tags(f"tenant-{i % 3}").save().id)
    for jid in ids:
        queue.scripts.call(calls.set_state(queue.keys, jid, "failed"))
    return ids


def test_count_and_retry_what_a_filter_matches(client: Any, queue: Queue) -> None:
    ids = _failed(queue, 600)
    assert client.bulk_count({"state": "failed"}) == 600
    assert client.bulk_count({"state": "failed", "type": "email"}) == 300
    assert client.bulk_count({"state": "failed", "tag": "tenant-1"}) == 200
    assert client.bulk_count({"state": "failed", "type": "email", "words": "invoice t1"}) == 100
    assert client.bulk_count({"state": "failed", "words": "sms t2"}) == 100  # a type's word
    assert client.bulk_count({"state": "failed", "min_age_ms": 3_600_000}) == 0
    some = client.bulk_match({"state": "failed", "tag": "tenant-1"}, 3)
    assert some["matched"] == 200 and len(some["examples"]) == 3
    assert set(some["examples"]) <= {jid for i, jid in enumerate(ids) if i % 3 == 1}
    first = client.bulk_match({"state": "failed", "type": "email"})  # 5, in the set's order
    assert first == {"matched": 300, "examples": sorted(ids[1::2])[:5]}
    assert client.bulk_match({"state": "failed", "words": "t9"}) == {"matched": 0, "examples": []}
    with pytest.raises(InvalidJob, match="examples must be"):
        client.bulk_match({"state": "failed"}, defaults.BULK_BATCH)
    got = client.bulk("retry", {"state": "failed", "type": "email", "tag": "tenant-1"})
    assert (got["matched"], got["done"], got["state"]) == (100, 100, "done")
    assert got["filter"] == {
        "state": "failed", "type": "email", "tag": "tenant-1", "words": None, "min_age_ms": None,
    }  # fmt: skip
    retried = {j.id for j in queue.page("inactive", count=1000)}
    assert retried == {jid for i, jid in enumerate(ids) if i % 2 and i % 3 == 1}
    assert queue.count("failed") == 500


def _meanwhile(op: Any, act: Any) -> Any:
    """``op``, with ``act()`` called once its first step (the count, here) is answered."""
    reply, acted = None, False
    while True:
        try:
            step = op.send(reply)
        except StopIteration as done:
            return done.value
        reply = yield step
        if not acted:
            act()
            acted = True


def test_an_action_acts_on_the_count_confirmed(client: Any, queue: Queue, r: redis.Redis) -> None:
    ids = _failed(queue, 30)
    # A job failed between the count an operator confirmed and the action: nothing is done,
    # nothing recorded, and the error says the count now.
    for given, counted in (({"state": "failed"}, 30), ({"state": "failed", "tag": "tenant-1"}, 10)):
        with pytest.raises(BulkCountChanged) as e:
            client.bulk("retry", given, run_id=RUN, expect=counted - 1)
        assert (e.value.matched, e.value.expected) == (counted, counted - 1)
        assert str(e.value) == (
            f"the filter matches {counted} jobs now, not the {counted - 1} confirmed: "
            "nothing was done"
        )
        assert queue.count("failed") == 30 and not r.exists(queue.keys.bulk(RUN))
    got = client.bulk("retry", {"state": "failed", "tag": "tenant-1"}, run_id=RUN, expect=10)
    assert (got["expect"], got["matched"], got["done"], got["state"]) == (10, 10, 10, "done")
    assert queue.bulk_status(RUN)["expect"] == 10 and queue.count("failed") == 20
    for bad in (-1, "20", True, 2.5):
        with pytest.raises(InvalidJob, match="expect"):
            client.bulk("retry", {"state": "failed"}, expect=bad)
    assert queue.count("failed") == 20
    # A job that fails after the count, while the action starts, is not among those acted on:
    # never more than the count confirmed.
    late = queue.create_job("email").save()
    op = bulk.run(queue.keys, "retry", {"state": "failed"}, None, "", 20)
    done = queue.scripts.drive(
        _meanwhile(op, lambda: queue.scripts.call(calls.set_state(queue.keys, late.id, "failed")))
    )
    assert (done["matched"], done["done"], done["state"]) == (20, 20, "done")
    assert queue.count("failed") == 1 and queue.count("inactive") == 30
    assert len(ids) == 30


def _recorded(op: Any, steps: list[Any]) -> Any:
    """``op``, keeping each step it sends to Redis in ``steps``."""
    reply = None
    while True:
        try:
            step = op.send(reply)
        except StopIteration as done:
            return done.value
        steps.append(step)
        reply = yield step


def _scans(steps: list[Any]) -> list[str]:
    """The keys the steps walked (a ZSCAN each)."""
    commands = [c for s in steps if isinstance(s, calls.Read) for c in s.commands]
    return [c[1] for c in commands if c[0] == "ZSCAN"]


def test_a_rare_tag_is_walked_instead_of_its_state(queue: Queue) -> None:
    """A tag of a few jobs in a large state: the walk reads the tag's jobs, not the state's
    (a batch, not one per BULK_BATCH jobs of the state); a tag on more jobs than the state
    holds: the state's."""
    many = 4 * defaults.BULK_BATCH
    queue.save_many([queue.create_job("email") for _ in range(many)])
    rare = [queue.create_job("email").tags("rare").save().id for _ in range(3)]
    queue.scripts.call(calls.set_state(queue.keys, rare[0], "failed"))  # tagged, not in the state
    f = {"state": "inactive", "tag": "rare"}
    steps: list[Any] = []
    assert queue.scripts.drive(_recorded(bulk.count(queue.keys, f), steps)) == 2
    assert _scans(steps) == [queue.keys.tag("rare")]
    steps.clear()
    got = queue.scripts.drive(_recorded(bulk.run(queue.keys, "remove", f), steps))
    assert (got["matched"], got["done"]) == (2, 2) and _scans(steps) == [queue.keys.tag("rare")]
    assert queue.count("inactive") == many and queue.get_job(rare[0]).state == "failed"
    # A tag every job has, in a state of few: the state is walked.
    queue.save_many([queue.create_job("sms").tags("rare").delay(60_000) for _ in range(2)])
    steps.clear()
    f = {"state": "delayed", "tag": "rare"}
    assert queue.scripts.drive(_recorded(bulk.count(queue.keys, f), steps)) == 2
    assert _scans(steps) == [queue.keys.state("delayed")]


def test_remove_promote_and_cancel(queue: Queue) -> None:
    delayed = [queue.create_job("email").delay(600_000).save().id for _ in range(3)]
    old = server_ms(queue.client)
    waiting = [queue.create_job("email", {"title": "old news"}).save().id for _ in range(4)]
    got = queue.bulk("promote", {"state": "delayed", "type": "email"})
    assert got["done"] == 3 and queue.count("delayed") == 0
    assert queue.bulk_count({"state": "inactive", "min_age_ms": 0}) == 7
    cut = server_ms(queue.client) - old
    assert queue.bulk_count({"state": "inactive", "min_age_ms": cut + 60_000}) == 0
    got = queue.bulk("cancel", {"state": "inactive", "words": "news"}, reason="spam")
    assert got["done"] == 4
    assert {queue.get_job(j).error for j in waiting} == {"cancelled: spam"}
    got = queue.bulk("remove", {"state": "failed"})
    assert got["done"] == 4 and queue.count("failed") == 0
    assert [queue.get_job(j).state for j in delayed] == ["inactive"] * 3


def test_cancel_running_and_blocked_jobs_in_one_batch(queue: Queue, redis_url: str) -> None:
    """A cancelled batch does all a cancel does: running jobs are stopped in their worker and
    their late results refused, and the jobs blocked on a cancelled one follow their policy;
    a filter that counts ended jobs is refused by the script as by the library."""
    # A lease no load outlasts: a worker held up past a short one (two cores, under coverage)
    # rightly loses the three jobs, and a batch cancel that comes while they wait again
    # matches fewer than three running.
    worker = Queue(redis_url, prefix=queue.prefix, lease_ms=30_000)
    started: list[int] = []
    stopped: list[int] = []

    def handler(job: Any) -> str:
        started.append(job.id)
        wait_for(lambda: job.stopping, timeout=20)
        stopped.append(job.id)
        return "late result"

    running = [queue.create_job("slow").tags("batch-9").save().id for _ in range(3)]
    blocker = queue.create_job("a").tags("batch-9").save()
    waiting = queue.create_job("b").depends_on(blocker).on_dependency_failure("fail").save()
    try:
        worker.process("slow", 3, handler)
        # Every handler runs: a job is active from its claim, and one cancelled before its
        # handler begins is rightly never run (a slot's thread held up under load).
        wait_for(lambda: len(started) == 3)
        got = queue.bulk("cancel", {"state": "active", "tag": "batch-9"}, reason="recall")
        assert (got["matched"], got["done"]) == (3, 3)
        wait_for(lambda: sorted(stopped) == sorted(running))
        got = queue.bulk("cancel", {"state": "inactive", "tag": "batch-9"})
        assert (got["matched"], got["done"]) == (1, 1)
    finally:
        worker.shutdown(5)
    assert {queue.get_job(j).error for j in running} == {"cancelled: recall"}
    assert all("result" not in queue.get_job(j).to_dict() for j in running)
    assert queue.get_job(blocker.id).error == "cancelled"  # type: ignore[arg-type]
    assert queue.get_job(waiting.id).state == "failed"  # type: ignore[arg-type]
    ended = calls.bulk(queue.keys, queue.keys.state("complete"), "complete", "cancel", 1)
    with pytest.raises(KueError, match="not complete ones"):
        queue.scripts.call(ended)
    report = doctor.check(queue)
    assert report.healthy, [f.problem for f in report.findings]


@pytest.mark.parametrize(
    ("action", "given", "error"),
    [
        ("retry", {"state": "complete"}, "retry applies to jobs failed, not complete"),
        ("remove", {"state": "active"}, "remove applies to jobs inactive or"),
        ("explode", {"state": "failed"}, "a bulk action must be one of retry"),
        ("retry", {"type": "email"}, "a filter's state must be one of"),
        ("retry", {"state": "failed", "colour": "red"}, "a filter has no field 'colour'"),
        ("retry", {"state": "failed", "words": "!!"}, "must hold a letter or a digit"),
        ("retry", {"state": "failed", "min_age_ms": -1}, "min_age_ms"),
        ("retry", {"state": "failed", "type": ""}, "type must not be empty"),
        ("retry", ["failed"], "a filter must be an object"),
    ],
)
def test_bad_input_changes_nothing(
    queue: Queue, r: redis.Redis, action: str, given: Any, error: str
) -> None:
    _failed(queue, 4)
    before = queue.count("failed")
    with pytest.raises(InvalidJob, match=error):
        queue.bulk(action, given, run_id=RUN)
    assert queue.count("failed") == before and not r.exists(queue.keys.bulk(RUN))
    with pytest.raises(BulkNotFound):
        queue.bulk_status(RUN)
    with pytest.raises(BulkNotFound):
        queue.bulk_status("../etc")


def test_a_recorded_run_and_its_stop(queue: Queue, r: redis.Redis) -> None:
    _failed(queue, 2 * defaults.BULK_BATCH + 10)
    done = queue.bulk("retry", {"state": "failed", "type": "sms"}, run_id=RUN)
    status = queue.bulk_status(RUN)
    assert status["state"] == "done" and status["done"] == done["done"] == defaults.BULK_BATCH + 5
    assert 0 < r.pttl(queue.keys.bulk(RUN)) <= defaults.BULK_KEEP_MS
    # A stop asked while it runs ends it after its batch: what it did is done.
    other = "c" * 32
    r.hset(queue.keys.bulk(other), mapping={"state": "running", "updated_at": server_ms(r)})
    assert queue.stop_bulk(other)["stopping"] is True
    got = queue.bulk("remove", {"state": "failed"}, run_id=other)
    assert got["state"] == "stopped" and 0 < got["done"] < 2 * defaults.BULK_BATCH + 10
    assert queue.count("failed") == 2 * defaults.BULK_BATCH + 10 - (done["done"] + got["done"])
    assert queue.bulk_status(other)["state"] == "stopped"


def test_a_stop_lands_after_the_batch_when_a_step_of_the_walk_gives_more(
    queue: Queue, r: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ZSCAN's COUNT is a hint: a small set comes whole in one step (and Valkey gives whole
    buckets), more than a batch. A stop asked still ends the run after its first batch."""
    monkeypatch.setattr(defaults, "BULK_BATCH", 10)
    _failed(queue, 30)  # a small sorted set: one step of the walk gives all 30
    r.hset(queue.keys.bulk(RUN), mapping={"state": "running", "updated_at": server_ms(r)})
    assert queue.stop_bulk(RUN)["stopping"] is True
    got = queue.bulk("remove", {"state": "failed"}, run_id=RUN)
    assert (got["state"], got["matched"], got["done"]) == ("stopped", 10, 10)
    assert queue.count("failed") == 20
    assert queue.bulk_status(RUN)["state"] == "stopped"


_KILLED = """
import sys
from kue_core import Queue
q = Queue(sys.argv[1], prefix=sys.argv[2])
q.bulk("remove", {"state": "inactive", "tag": "doomed"}, run_id=sys.argv[3])
"""


def test_a_run_killed_part_way(
    queue: Queue, r: redis.Redis, redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SIGKILL while it removes: the jobs it removed are gone whole, the others whole; its
    record reads interrupted once silent; the doctor finds nothing."""
    n = 40 * defaults.BULK_BATCH
    for _ in range(0, n, 1000):
        queue.save_many([queue.create_job("t").tags("doomed") for _i in range(1000)])
    proc = subprocess.Popen([sys.executable, "-c", _KILLED, redis_url, queue.prefix, RUN])
    try:
        wait_for(
            lambda: int(r.hget(queue.keys.bulk(RUN), "done") or 0) >= 2 * defaults.BULK_BATCH,
            timeout=30,
        )
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    finally:
        proc.kill()
    left = queue.count("inactive")
    assert 0 < left < n, "killed before the end"
    assert queue.bulk_status(RUN)["state"] == "running"  # not silent for long yet
    monkeypatch.setattr(defaults, "BULK_STALE_MS", 0)
    wait_for(lambda: queue.bulk_status(RUN)["state"] == "interrupted")
    assert (
        queue.count("inactive", "t")
        == left
        == len(queue.tagged("doomed", count=1).__class__([], 0)) + left
    )  # every job left is whole and still indexed
    report = doctor.check(queue)
    assert report.healthy, [f.problem for f in report.findings]
