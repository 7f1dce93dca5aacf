"""Key rotation (``Queue.rotate_keys``, ``kue keys rotate``): every value a job keeps encrypted
(data, result, error, progress data, log lines, history entries) is put under the newest key,
read from Redis directly; a value written meanwhile is never overwritten; an interrupted
rotation goes on where it stopped, even after SIGKILL, and ``kue doctor`` finds nothing."""

from __future__ import annotations

import base64
import json
import os
import re
import signal
import subprocess
import sys
from typing import Any

import pytest
import redis

from kue_core import (
    InvalidEncryptionKeys,
    InvalidJob,
    NoRetry,
    Queue,
    WaitForSignal,
    doctor,
    sealing,
)
from kue_core.store import calls

from ..clients import blocking_queue
from ..conftest import wait_for

K1 = f"k1:{base64.b64encode(os.urandom(32)).decode()}"
K2 = f"k2:{base64.b64encode(os.urandom(32)).decode()}"
#: An envelope's key id, as stored in a field, a log line or (JSON-escaped) a history entry.
_KEY_ID = re.compile(r'kue:sealed\\?":\\?"([\w.-]+):')


def key_ids(r: redis.Redis, prefix: str) -> dict[str, int]:
    """How many envelopes each key id has, over every key under ``prefix``."""
    found: dict[str, int] = {}
    for key in r.scan_iter(f"{prefix}:job:*"):
        kind = r.type(key)
        values = r.hvals(key) if kind == "hash" else r.lrange(key, 0, -1) if kind == "list" else []
        for value in values:
            for kid in _KEY_ID.findall(str(value)):
                found[kid] = found.get(kid, 0) + 1
    return found


def produce(redis_url: str, prefix: str, keys: str, n: int = 3) -> list[int]:
    """``n`` jobs that complete (a log line, a progress report with data, a result) and one
    that fails for good (its error in the hash and the history), under ``keys``."""

    def handler(job: Any) -> Any:
        job.log("for %s", job.data["who"])
        job.progress(1, 2, {"who": job.data["who"]})
        if job.data["who"] == "mallory":
            raise NoRetry(f"refused {job.data['who']}")
        return {"sent_to": job.data["who"]}

    with Queue(redis_url, prefix=prefix, encryption_keys=keys) as q:
        ids = [q.create_job("mail", {"who": f"user{i}"}).save().id for i in range(n)]
        ids.append(q.create_job("mail", {"who": "mallory"}).save().id)
        q.process("mail", 2, handler)
        wait_for(lambda: q.count("complete") + q.count("failed") == n + 1)
    return ids  # type: ignore[return-value]


@pytest.fixture(params=["sync", "async"])
def rotating(request: pytest.FixtureRequest, redis_url: str, prefix: str) -> Any:
    """Each client in turn, with the new key first and the old one after."""
    if request.param == "sync":
        with Queue(redis_url, prefix=prefix, encryption_keys=[K2, K1]) as q:
            yield q
        return
    with blocking_queue(redis_url, prefix, encryption_keys=[K2, K1]) as aq:
        yield aq


def test_every_value_goes_under_the_newest_key(
    rotating: Any, redis_url: str, prefix: str, r: redis.Redis
) -> None:
    ids = produce(redis_url, prefix, K1)
    before = key_ids(r, prefix)
    assert set(before) == {"k1"}
    done = rotating.rotate_keys()
    assert done.done and done.key == "k2" and done.jobs == len(ids)
    assert done.resealed == before["k1"] and done.unopened == 0
    assert key_ids(r, prefix) == {"k2": before["k1"]}
    with Queue(redis_url, prefix=prefix, encryption_keys=K2) as only_new:  # k1 is not needed
        jobs = [only_new.get_job(i) for i in ids]
        assert [j.unopened for j in jobs] == [None] * len(ids)
        assert jobs[0].result == {"sent_to": "user0"} and jobs[0].progress_data == {"who": "user0"}
        assert only_new.get_log(ids[0]) == ["for user0"]
        assert "refused mallory" in (jobs[-1].error or "")
        errors = [e["error"] for e in only_new.history(ids[-1]) if "error" in e]
        assert errors and "refused mallory" in errors[-1]
    again = rotating.rotate_keys(from_start=True)  # nothing left to do
    assert again.resealed == 0 and again.jobs == len(ids)
    assert doctor.check(Queue(redis_url, prefix=prefix, encryption_keys="")).healthy


def test_signals_steps_and_streamed_parts_go_under_the_newest_key_too(
    redis_url: str, prefix: str, r: redis.Redis
) -> None:
    """A job with a step, the signal that resumed it and a part it streamed, all under k1:
    rotated to k2, a worker given k2 alone resumes it (the step not run again, the signal
    read) and a reader with k2 alone reads every part, under the entry ids it had."""
    ran: list[str] = []

    def handler(job: Any) -> Any:
        charge = job.step("charge", lambda: ran.append("charge") or {"id": "ch_1"})
        job.stream({"part": len(ran)})
        if "approval" not in job.signals:
            raise WaitForSignal("approval")
        return {"charge": charge, "by": job.signals["approval"]}

    with Queue(redis_url, prefix=prefix, encryption_keys=K1) as q:
        job_id = q.create_job("order", {"n": 1}).save().id
        q.process("order", 1, handler)
        wait_for(lambda: q.get_job(job_id).state == "suspended")  # type: ignore[arg-type]
    with Queue(redis_url, prefix=prefix, encryption_keys=K1) as q:
        assert q.signal(job_id, "approval", {"who": "ann"}) == "resumed"  # type: ignore[arg-type]
    stream = f"{prefix}:job:{job_id}:stream"
    ids_before = [e for e, _ in r.xrange(stream)]
    streamed = int(r.hget(f"{prefix}:job:{job_id}", "streamed"))  # type: ignore[arg-type]
    with Queue(redis_url, prefix=prefix, encryption_keys=f"{K2},{K1}") as q:
        rotated = q.rotate_keys()
        assert (rotated.resealed, rotated.unopened) == (4, 0)  # data, step, signal, a part
    held = r.hgetall(f"{prefix}:job:{job_id}")
    assert all("k1:" not in v for k, v in held.items() if k.startswith(("step:", "signal:")))
    assert [e for e, _ in r.xrange(stream)] == ids_before
    assert all(f["d"].startswith('{"kue:sealed":"k2:') for _, f in r.xrange(stream))
    assert int(held["streamed"]) == streamed  # k1 and k2: ids of one length
    with Queue(redis_url, prefix=prefix, encryption_keys=K2) as q:
        assert [p.value for p in q.read_stream(job_id).parts] == [{"part": 1}]  # type: ignore[arg-type]
        q.process("order", 1, handler)
        wait_for(lambda: q.get_job(job_id).state == "complete")  # type: ignore[arg-type]
        done = q.get_job(job_id)  # type: ignore[arg-type]
        assert done.result == {"charge": {"id": "ch_1"}, "by": {"who": "ann"}}
        assert ran == ["charge"]
        assert doctor.check(q).healthy


def test_a_signal_or_step_a_worker_cannot_open_fails_the_job_unrun(
    redis_url: str, prefix: str
) -> None:
    """Never run on ciphertext: a job whose signal's payload (or step's result) is under a
    key the worker lacks fails at once, naming the field and the key, as one whose data is."""
    ran: list[Any] = []
    with Queue(redis_url, prefix=prefix, encryption_keys=K2) as q:
        job_id = q.create_job("order", {"n": 1}).save().id
    with Queue(redis_url, prefix=prefix, encryption_keys=K1) as q1:  # a sender still on k1
        assert q1.signal(job_id, "approval", {"who": "ann"}) == "kept"  # type: ignore[arg-type]
    with Queue(redis_url, prefix=prefix, encryption_keys=K2) as q:
        q.process("order", 1, lambda job: ran.append(job.signals))
        wait_for(lambda: q.get_job(job_id).state == "failed")  # type: ignore[arg-type]
        error = q.get_job(job_id).error or ""  # type: ignore[arg-type]
        assert "signal:approval is encrypted with key 'k1'" in error, error
        assert ran == []


def test_it_goes_on_where_it_stopped(redis_url: str, prefix: str, r: redis.Redis) -> None:
    ids = produce(redis_url, prefix, K1, n=4)
    with Queue(redis_url, prefix=prefix, encryption_keys=[K2, K1]) as q:
        first = q.rotate_keys(steps=2, batch=1)
        assert (first.at, first.jobs, first.done) == (ids[1], 2, False)
        assert r.hget(f"{prefix}:keys:rotation", "k2") == str(ids[1])
        rest = q.rotate_keys()
        assert rest.done and rest.jobs == len(ids) - 2  # from where the first stopped
    assert set(key_ids(r, prefix)) == {"k2"}


def test_a_value_written_meanwhile_is_left_and_a_key_not_given_counted(
    redis_url: str, prefix: str, r: redis.Redis
) -> None:
    with Queue(redis_url, prefix=prefix, encryption_keys=K1) as old:
        job = old.create_job("mail", {"who": "ada"}).save()
        read = r.hget(f"{prefix}:job:{job.id}", "data")
        old.update_data(job.id, {"who": "bob"})  # after the rotation read, before it wrote
        now = r.hget(f"{prefix}:job:{job.id}", "data")
        stale = calls.reseal(old.keys, job.id, [("data", read, '"overwritten"')])  # type: ignore[list-item]
        assert old.scripts.call(stale) == 0
        assert r.hget(f"{prefix}:job:{job.id}", "data") == now
        r.delete(f"{prefix}:job:{job.id}:history")
        r.rpush(f"{prefix}:job:{job.id}:log", "a line", "another")  # a log line, an entry
        r.rpush(f"{prefix}:job:{job.id}:history", '{"state":"inactive"}')
        lines = [(0, "not what it holds", "x"), (1, "another", "replaced")]
        entries = [(0, "{}", "y")]
        assert old.scripts.call(calls.reseal(old.keys, job.id, [], lines, entries)) == 1
        assert r.lrange(f"{prefix}:job:{job.id}:log", 0, -1) == ["a line", "replaced"]
        assert r.lrange(f"{prefix}:job:{job.id}:history", 0, -1) == ['{"state":"inactive"}']
        r.delete(f"{prefix}:job:{job.id}:log", f"{prefix}:job:{job.id}:history")
    other = f"k3:{base64.b64encode(os.urandom(32)).decode()}"
    with Queue(redis_url, prefix=prefix, encryption_keys=[K2, other]) as q:  # k1 not given
        done = q.rotate_keys()
        assert done.unopened == 1 and done.resealed == 0
    assert sealing.key_id_of(str(r.hget(f"{prefix}:job:{job.id}", "data"))) == "k1"


def test_a_queue_without_keys_or_bad_arguments_are_refused(redis_url: str, prefix: str) -> None:
    with (
        Queue(redis_url, prefix=prefix, encryption_keys="") as clear,
        pytest.raises(InvalidEncryptionKeys, match="no encryption keys"),
    ):
        clear.rotate_keys()
    with Queue(redis_url, prefix=prefix, encryption_keys=K1) as q:
        for bad in ({"batch": 0}, {"steps": 0}, {"from_start": "yes"}):
            with pytest.raises(InvalidJob):
                q.rotate_keys(**bad)


def test_a_rotation_killed_part_way_goes_on_and_leaves_nothing_wrong(
    redis_url: str, prefix: str, r: redis.Redis
) -> None:
    """``kue keys rotate --batch 1`` SIGKILLed after a few steps: the jobs it did are under
    the new key, the rest under the old, every job reads with both keys given, ``kue doctor``
    finds nothing; run again, it goes on and ends with every value under the new key."""
    with Queue(redis_url, prefix=prefix, encryption_keys=K1) as old:
        jobs = [old.create_job("mail", {"who": f"user{i}"}) for i in range(300)]
        old.save_many(jobs)
    env = {**os.environ, "KUE_ENCRYPTION_KEYS": f"{K2},{K1}", "KUE_REDIS_URL": redis_url}
    argv = [sys.executable, "-m", "kue_cli", "keys", "rotate", "--batch", "1", "--prefix", prefix]
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        wait_for(lambda: int(r.hget(f"{prefix}:keys:rotation", "k2") or 0) >= 20, timeout=60)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    part = key_ids(r, prefix)
    assert part.get("k2", 0) >= 20 and part.get("k1", 0) > 0  # killed part-way
    with Queue(redis_url, prefix=prefix, encryption_keys=[K2, K1]) as both:
        assert doctor.check(both).healthy
        assert [j.data for j in both.get_jobs([j.id for j in jobs])] == [  # type: ignore[misc]
            {"who": f"user{i}"} for i in range(300)
        ]
    rerun = subprocess.run([*argv, "--json"], env=env, capture_output=True, text=True, timeout=120)
    assert rerun.returncode == 0, rerun.stderr
    summary = json.loads(rerun.stdout)
    assert summary["key"] == "k2" and summary["jobs"] < 300  # it went on, not from the start
    assert key_ids(r, prefix) == {"k2": 300}
