"""Large payloads outside Redis (``Queue(max_data_bytes=, payload_store=)``,
``kue_core.base.payloads``), read from Redis and the store directly: a value above the limit
is in the store and the job holds a reference; both clients and the workers (both kinds of
handler, a child process) read it whole; a result above the limit goes there too; removal,
retention and an edit put the names no job holds in the trash, which a worker empties; a
save above the limit without a store, or above the hard limit, is refused and writes nothing."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from kue_core import (
    InvalidJob,
    InvalidTransition,
    JobNotFound,
    PayloadTooLarge,
    PayloadUnavailable,
    Queue,
    doctor,
    payloads,
    sealing,
)

from ..clients import blocking_queue
from ..conftest import wait_for
from . import isolated_handlers as handlers

LIMIT = 1000
BIG = {"title": "a big one", "rows": ["x" * 100] * 30}  # about 3 KB of JSON


def stored(r: redis.Redis, prefix: str, job_id: int, field: str) -> str:
    value = r.hget(f"{prefix}:job:{job_id}", field)
    assert isinstance(value, str)
    return value


def files(root: Path) -> list[str]:
    """The values in a file store, by name."""
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())


@pytest.fixture(params=["sync", "async"])
def offloading(
    request: pytest.FixtureRequest, redis_url: str, prefix: str, tmp_path: Path
) -> Iterator[Any]:
    """Each client in turn, keeping no value above LIMIT bytes in Redis, with a file store."""
    options = {"max_data_bytes": LIMIT, "payload_store": tmp_path.as_uri()}
    if request.param == "sync":
        with Queue(redis_url, prefix=prefix, **options) as q:  # type: ignore[arg-type]
            yield q
        return
    with blocking_queue(redis_url, prefix, **options) as aq:
        yield aq


def test_a_large_value_goes_to_the_store(
    offloading: Any, r: redis.Redis, prefix: str, tmp_path: Path
) -> None:
    small = offloading.create_job("email", {"to": "ada"}).save()
    big = offloading.create_job("email", BIG).save()
    [many] = offloading.save_many([offloading.create_job("email", BIG)])
    assert stored(r, prefix, small.id, "data") == '{"to":"ada"}'
    assert not r.hexists(f"{prefix}:job:{small.id}", "payloads")  # a plain job: nothing more
    for job in (big, many):
        ref = json.loads(stored(r, prefix, job.id, "data"))
        assert ref["bytes"] == len(json.dumps(BIG, separators=(",", ":")))
        name = ref[payloads.STORED]
        assert name.startswith(f"{prefix}/data/")
        assert json.loads((tmp_path / name).read_text()) == BIG
        assert json.loads(stored(r, prefix, job.id, "payloads")) == {"data": name}
        assert offloading.get_job(job.id).data == BIG
    assert len(files(tmp_path)) == 2


@pytest.mark.parametrize("kind", ["def", "async"])
def test_a_worker_gets_the_whole_data_and_stores_a_large_result(
    kind: str, redis_url: str, prefix: str, r: redis.Redis, tmp_path: Path
) -> None:
    seen: list[Any] = []
    answer = {"report": "y" * 3000}
    with Queue(
        redis_url, prefix=prefix, max_data_bytes=LIMIT, payload_store=tmp_path.as_uri()
    ) as q:
        if kind == "def":

            def handler(job: Any) -> Any:
                seen.append(job.data)
                return answer

        else:

            async def handler(job: Any) -> Any:  # type: ignore[misc]
                seen.append(job.data)
                return answer

        job = q.create_job("report", BIG).save()
        q.process("report", 2, handler)
        wait_for(lambda: q.get_job(job.id).state == "complete")
        assert seen == [BIG]
        result = json.loads(stored(r, prefix, job.id, "result"))
        assert result["bytes"] == len(json.dumps(answer, separators=(",", ":")))
        held = json.loads(stored(r, prefix, job.id, "payloads"))
        assert held["result"] == result[payloads.STORED] and "data" in held
        assert q.get_job(job.id).result == answer
        assert q.create_job("report", {"n": 1}).save().wait(10) == answer  # from the event


def test_a_child_process_reads_and_writes_the_store(
    redis_url: str, prefix: str, tmp_path: Path
) -> None:
    with Queue(
        redis_url, prefix=prefix, max_data_bytes=LIMIT, payload_store=tmp_path.as_uri()
    ) as q:
        job = q.create_job("calc", {"n": 21, "pad": "p" * 2000}).save()
        q.process("calc", 1, handlers.double, isolation="process")
        assert job.wait(30)["n"] == 42  # the child read the whole data


def test_removal_retention_and_edits_empty_the_store(
    redis_url: str, prefix: str, r: redis.Redis, tmp_path: Path
) -> None:
    with Queue(
        redis_url, prefix=prefix, max_data_bytes=LIMIT, payload_store=tmp_path.as_uri()
    ) as q:
        removed = q.create_job("keep", BIG).save()
        edited = q.create_job("keep", BIG).save()
        finished = q.create_job("gone", BIG).remove_on_complete(True).save()
        old_name = json.loads(stored(r, prefix, edited.id, "data"))[payloads.STORED]
        assert len(files(tmp_path)) == 3
        q.remove(removed.id)
        updated = q.create_job("keep", {"small": 1}).save()
        updated.data = BIG
        updated.update()  # Kue's Job#update: to the store, then out of it
        assert q.get_job(updated.id).data == BIG and len(files(tmp_path)) == 4
        updated.data = {"small": 2}
        updated.update()
        q.update_data(edited.id, {"small": True})
        assert q.get_job(edited.id).data == {"small": True}
        assert not r.hexists(f"{prefix}:job:{edited.id}", "payloads")
        assert r.llen(f"{prefix}:payloads:trash") == 3
        q.process("gone", 1, lambda job: {"big": "z" * 2000})
        wait_for(lambda: not r.exists(f"{prefix}:job:{finished.id}"))
        # The worker empties the trash: the finished job's data and result go too.
        wait_for(lambda: files(tmp_path) == [], timeout=15)
        assert r.llen(f"{prefix}:payloads:trash") == 0
        assert not (tmp_path / old_name).exists()


def test_a_save_too_large_is_refused_and_writes_nothing(
    redis_url: str, prefix: str, r: redis.Redis, tmp_path: Path
) -> None:
    with Queue(redis_url, prefix=prefix, max_data_bytes=LIMIT) as q:  # no store
        with pytest.raises(PayloadTooLarge) as e:
            q.create_job("email", BIG).save()
        assert (e.value.size, e.value.limit) == (len(json.dumps(BIG, separators=(",", ":"))), LIMIT)
        assert "max_data_bytes" in str(e.value) and f"{LIMIT:,}" in str(e.value)
    store = tmp_path.as_uri()
    with Queue(redis_url, prefix=prefix, payload_store=store, max_payload_bytes=2000) as q:
        with pytest.raises(PayloadTooLarge, match="max_payload_bytes of 2,000 bytes"):
            q.create_job("email", BIG).save()
        with pytest.raises(PayloadTooLarge):
            q.save_many([q.create_job("email", {"a": 1}), q.create_job("email", BIG)])
    assert list(r.scan_iter(f"{prefix}:job:*")) == [] and files(tmp_path) == []


def test_a_result_too_large_fails_the_job_without_retry(
    redis_url: str, prefix: str, tmp_path: Path
) -> None:
    with Queue(redis_url, prefix=prefix, max_data_bytes=LIMIT) as q:  # no store
        job = q.create_job("report", {"n": 1}).attempts(3).save()
        q.process("report", 1, lambda job: {"report": "y" * 3000})
        failed = wait_for(lambda: (j := q.get_job(job.id)).state == "failed" and j)
        assert failed.attempts_made == 1 and "PayloadTooLarge" in (failed.error or "")


def test_a_process_without_the_store_cannot_read_the_value(
    redis_url: str, prefix: str, tmp_path: Path
) -> None:
    with Queue(
        redis_url, prefix=prefix, payload_store=tmp_path.as_uri(), max_data_bytes=LIMIT
    ) as q:
        job = q.create_job("email", BIG).attempts(3).save()
    with Queue(redis_url, prefix=prefix) as blind:
        read = blind.get_job(job.id)
        assert isinstance(read.unopened, PayloadUnavailable) and read.unopened.missing
        assert read.to_dict()["unopened"] == {
            "payload": read.data[payloads.STORED],
            "missing": True,
        }
        with pytest.raises(InvalidJob, match="reference to the payload store"):
            blind.update_data(job.id, read.data)  # what it read: the reference
        with pytest.raises(InvalidJob, match="reference to the payload store"):
            blind.create_job("email", read.data).save()  # nor saved again as a new job's
        ran: list[Any] = []
        blind.process("email", 1, ran.append)
        failed = wait_for(lambda: (j := blind.get_job(job.id)).state == "failed" and j)
        assert ran == [] and failed.attempts_made == 1  # its handler never saw the reference
        assert "PayloadUnavailable" in (failed.error or "")


def test_a_reference_that_is_not_this_queue_s_or_a_store_that_fails_is_unavailable(
    redis_url: str, prefix: str, tmp_path: Path, r: redis.Redis
) -> None:
    """A reference outside the queue's names (another queue's, a path out of the store) is
    never read; a store that fails to answer (here: a name the file store refuses, or a
    folder where the value should be) gives PayloadUnavailable naming the failure, and a
    worker retries the job (the store may answer next time) without running its handler."""
    options = {"payload_store": tmp_path.as_uri(), "max_data_bytes": LIMIT}
    with Queue(redis_url, prefix=prefix, **options) as q:  # type: ignore[arg-type]
        (tmp_path / "other").mkdir()
        (tmp_path / "other" / "secret").write_text('{"theirs": true}')
        job = q.create_job("email", BIG).attempts(2).save()
        key = f"{prefix}:job:{job.id}"
        for name in ("other/secret", f"{prefix}/../other/secret"):
            r.hset(key, "data", _reference(name))
            read = q.get_job(job.id)
            assert isinstance(read.unopened, PayloadUnavailable) and not read.unopened.missing
            assert read.data == {payloads.STORED: name, "bytes": 16}  # not theirs
        broken = f"{prefix}/data/" + "0" * 32
        (tmp_path / broken).mkdir(parents=True)  # a read fails: a folder, not a file
        r.hset(key, "data", _reference(broken))
        read = q.get_job(job.id)
        assert isinstance(read.unopened, PayloadUnavailable) and read.unopened.transient
        assert "the store failed" in str(read.unopened)
        ran: list[Any] = []
        q.process("email", 1, ran.append)
        failed = wait_for(lambda: (j := q.get_job(job.id)).state == "failed" and j, timeout=30)
        assert ran == [] and failed.attempts_made == 2  # retried once, as the store may recover


def test_a_result_written_for_a_refused_completion_goes_to_the_trash(
    redis_url: str, prefix: str, tmp_path: Path, r: redis.Redis
) -> None:
    """The worker writes a large result to the store before the completion, which is refused
    when the job is gone (removed while it ran) or its attempt is over: the value goes to the
    trash rather than stay in the store, held by no job."""
    options = {"payload_store": tmp_path.as_uri(), "max_data_bytes": LIMIT}
    with Queue(redis_url, prefix=prefix, **options) as q:  # type: ignore[arg-type]
        removed = q.create_job("report", {}).save()
        q.create_job("report", {}).save()  # cancelled while it runs

        written: list[int] = []

        def handler(job: Any) -> Any:
            if job.id == removed.id:
                q.remove(job.id)
            else:
                q.cancel(job.id)
            written.append(job.id)
            return {"rows": ["y" * 100] * 30}  # about 3 KB: to the store

        q.process("report", 1, handler)
        wait_for(lambda: len(written) == 2, timeout=15)
        # Both results were written to the store (its folder made), and the worker's sweep
        # (every PAYLOAD_SWEEP_EVERY s) deletes what is in the trash: none is left held by
        # no job.
        wait_for(lambda: (tmp_path / prefix / "result").is_dir() and files(tmp_path) == [], 20)
        assert r.llen(f"{prefix}:payloads:trash") == 0


@pytest.mark.parametrize("mode", ["until_done", "throttle"])
def test_a_deduplicated_save_leaves_nothing_in_the_store(
    mode: str, redis_url: str, prefix: str, tmp_path: Path, r: redis.Redis
) -> None:
    """A duplicate's large data is written to the store before its save finds the key held:
    deduplicated, that value goes to the trash (the holder keeps its own)."""
    options = {"payload_store": tmp_path.as_uri(), "max_data_bytes": LIMIT}
    with Queue(redis_url, prefix=prefix, **options) as q:  # type: ignore[arg-type]
        first = q.create_job("report", BIG).unique("k1", mode, ttl=60_000).save()
        again = q.create_job("report", BIG).unique("k1", mode, ttl=60_000).save()
        assert again.id == first.id
        assert r.llen(f"{prefix}:payloads:trash") == 1
        assert q.sweep_payloads() == 1
        held = json.loads(stored(r, prefix, first.id, "data"))[payloads.STORED]  # type: ignore[arg-type]
        assert files(tmp_path) == [held]
        assert q.get_job(first.id).data == BIG  # type: ignore[arg-type]


def test_a_refused_edit_or_flow_leaves_nothing_in_the_store(
    redis_url: str, prefix: str, tmp_path: Path, r: redis.Redis
) -> None:
    """Large data is written to the store before the script that would hold it; when that
    script refuses (a job that ended, an unknown id, a dependency that is no job), the value
    goes to the trash."""
    options = {"payload_store": tmp_path.as_uri(), "max_data_bytes": LIMIT}
    with Queue(redis_url, prefix=prefix, **options) as q:  # type: ignore[arg-type]
        done = q.create_job("report", {}).save()
        q.get_job(done.id).set_state("complete")  # type: ignore[arg-type]
        with pytest.raises(InvalidTransition):
            q.update_data(done.id, BIG)  # type: ignore[arg-type]
        with pytest.raises(JobNotFound):
            q.update_data(999_999, BIG)
        with pytest.raises(InvalidJob, match="12345"):
            q.create_job("report", BIG).depends_on(12345).save()
        assert r.llen(f"{prefix}:payloads:trash") == 3
        assert q.sweep_payloads() == 3 and files(tmp_path) == []


def _reference(name: str) -> str:
    return json.dumps({payloads.STORED: name, "bytes": 16}, separators=(",", ":"))


def test_settings_from_the_environment(
    redis_url: str, prefix: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KUE_PAYLOAD_STORE", tmp_path.as_uri())
    monkeypatch.setenv("KUE_MAX_DATA_BYTES", "500")
    with Queue(redis_url, prefix=prefix) as q:
        assert q.offload is not None and q.offload.max_data_bytes == 500
        q.create_job("email", BIG).save()
    assert len(files(tmp_path)) == 1
    for name, value, says in (
        ("KUE_MAX_DATA_BYTES", "lots", "number of bytes"),
        ("KUE_PAYLOAD_STORE", "ftp://x/y", "file:///path or s3://"),
        ("KUE_PAYLOAD_STORE", (tmp_path / "none").as_uri(), "not a directory"),
    ):
        with monkeypatch.context() as m:
            m.setenv(name, value)
            with pytest.raises(Exception, match=says):
                Queue(redis_url, prefix=prefix)


def test_rotation_moves_a_stored_value_under_the_new_key(
    redis_url: str, prefix: str, r: redis.Redis, tmp_path: Path
) -> None:
    """An encrypted queue's large value is sealed in the store; ``rotate_keys`` writes a copy
    under the newest key with a new name, the job refers to it, the old name goes to the trash
    and a worker's sweep deletes it; then the old key is not needed."""
    k1 = "k1:" + base64.b64encode(bytes(range(32))).decode()
    k2 = "k2:" + base64.b64encode(bytes(range(32, 64))).decode()
    store = {"max_data_bytes": LIMIT, "payload_store": tmp_path.as_uri()}
    with Queue(redis_url, prefix=prefix, encryption_keys=k1, **store) as q:  # type: ignore[arg-type]
        job = q.create_job("report", BIG).save()
    old = json.loads(stored(r, prefix, job.id, "data"))[payloads.STORED]
    assert sealing.key_id_of((tmp_path / old).read_text()) == "k1"
    with Queue(redis_url, prefix=prefix, encryption_keys=[k2, k1], **store) as q:  # type: ignore[arg-type]
        done = q.rotate_keys()
        assert (done.resealed, done.unopened) == (1, 0)
        new = json.loads(stored(r, prefix, job.id, "data"))[payloads.STORED]
        assert new != old and sealing.key_id_of((tmp_path / new).read_text()) == "k2"
        assert json.loads(stored(r, prefix, job.id, "payloads")) == {"data": new}
        assert r.lrange(f"{prefix}:payloads:trash", 0, -1) == [old]
        assert q.sweep_payloads() == 1 and files(tmp_path) == [new]
        assert q.rotate_keys(from_start=True).resealed == 0  # under k2 already
    with Queue(redis_url, prefix=prefix, encryption_keys=k2, **store) as q:  # type: ignore[arg-type]
        assert q.get_job(job.id).data == BIG
        assert doctor.check(q, grace_ms=0).healthy
