"""Encryption at rest (``Queue(encryption_keys=...)``, ``kue_core.base.sealing``), read from
Redis directly: a job's data and result are never stored in clear, both clients and the
workers read them back, rotation reads the old key and writes the new, the search index holds
only what a job declares searchable, and a worker without the key fails the job at once,
naming the key, rather than running its handler on ciphertext."""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from kue_core import CannotDecrypt, InvalidEncryptionKeys, Queue, sealing

from ..clients import blocking_queue
from ..conftest import heard, on_cluster, wait_for

K1 = f"k1:{base64.b64encode(os.urandom(32)).decode()}"
K2 = f"k2:{base64.b64encode(os.urandom(32)).decode()}"
SECRET = {"email": "ada@example.com", "title": "Quarterly salary of Ada", "card": "4242-x9"}


@pytest.fixture(params=["sync", "async"])
def sealed(request: pytest.FixtureRequest, redis_url: str, prefix: str) -> Iterator[Any]:
    """Each client in turn, with key k1."""
    if request.param == "sync":
        q = Queue(redis_url, prefix=prefix, encryption_keys=[K1])
        yield q
        q.close()
        return
    with blocking_queue(redis_url, prefix, encryption_keys=[K1]) as aq:
        yield aq


def stored(r: redis.Redis, prefix: str, job_id: int, field: str) -> str:
    value = r.hget(f"{prefix}:job:{job_id}", field)
    assert isinstance(value, str)
    return value


def in_clear(r: redis.Redis, prefix: str, *secrets: str) -> list[str]:
    """The keys under ``prefix`` whose value shows any of ``secrets``."""
    found = []
    for k in r.scan_iter(f"{prefix}:*"):
        dumped = r.dump(k) or b""
        if any(s.encode() in dumped for s in secrets):
            found.append(k)
    return found


def test_data_is_stored_sealed_and_read_back(sealed: Any, r: redis.Redis, prefix: str) -> None:
    job = sealed.create_job("email", SECRET).search_keys("card").save()
    more = sealed.save_many([sealed.create_job("email", {"email": "bob@example.com"})])
    text = stored(r, prefix, job.id, "data")
    assert sealing.key_id_of(text) == "k1"
    assert in_clear(r, prefix, "ada@example.com", "bob@example.com", "salary") == []
    assert sealed.get_job(job.id).data == SECRET
    assert sealed.get_job(more[0].id).data == {"email": "bob@example.com"}
    # The title is not indexed in clear; a field the job declares searchable is.
    assert sealed.search("salary") == []
    assert sealed.search("4242-x9") == [job.id]


def test_an_edit_is_sealed_too(sealed: Any, r: redis.Redis, prefix: str) -> None:
    job = sealed.create_job("email", {"email": "x@example.com"}).save()
    sealed.update_data(job.id, {"email": "carol@example.com", "title": "Carol's secret"})
    assert in_clear(r, prefix, "carol@example.com", "secret") == []
    assert sealed.get_job(job.id).data["email"] == "carol@example.com"
    assert sealed.search("carol") == []


def test_rotation_reads_the_old_key_and_writes_the_new(
    redis_url: str, prefix: str, r: redis.Redis
) -> None:
    with Queue(redis_url, prefix=prefix, encryption_keys=K1) as old:
        first = old.create_job("email", {"n": 1}).save()
    with Queue(redis_url, prefix=prefix, encryption_keys=f"{K2},{K1}") as new:
        second = new.create_job("email", {"n": 2}).save()
        assert new.get_job(first.id).data == {"n": 1}
        assert sealing.key_id_of(stored(r, prefix, second.id, "data")) == "k2"
    with Queue(redis_url, prefix=prefix, encryption_keys=K1) as old:
        unread = old.get_job(second.id)
        assert isinstance(unread.unopened, CannotDecrypt) and unread.unopened.key_id == "k2"
        assert unread.data == json.loads(stored(r, prefix, second.id, "data"))  # the envelope


def test_keys_from_the_environment_and_bad_keys(
    redis_url: str, prefix: str, monkeypatch: pytest.MonkeyPatch, r: redis.Redis
) -> None:
    monkeypatch.setenv("KUE_ENCRYPTION_KEYS", K2)
    with Queue(redis_url, prefix=prefix) as q:
        job = q.create_job("email", {"n": 1}).save()
    assert sealing.key_id_of(stored(r, prefix, job.id, "data")) == "k2"
    monkeypatch.setenv("KUE_ENCRYPTION_KEYS", "k3:tooshort")
    with pytest.raises(InvalidEncryptionKeys, match="k3"):
        Queue(redis_url, prefix=prefix)
    with Queue(redis_url, prefix=prefix, encryption_keys="") as clear:  # none, whatever the env
        plain = clear.create_job("email", {"n": 2}).save()
    assert stored(r, prefix, plain.id, "data") == '{"n":2}'


@pytest.mark.parametrize("kind", ["def", "async"])
def test_a_worker_reads_the_data_and_seals_the_result(
    kind: str, redis_url: str, prefix: str, r: redis.Redis
) -> None:
    seen: list[Any] = []
    with Queue(redis_url, prefix=prefix, encryption_keys=[K1]) as q:
        if kind == "def":

            def handler(job: Any) -> Any:
                seen.append(job.data)
                return {"receipt": "paid-by-ada"}

        else:

            async def handler(job: Any) -> Any:  # type: ignore[misc]
                seen.append(job.data)
                return {"receipt": "paid-by-ada"}

        job = q.create_job("email", SECRET).save()
        q.process("email", 2, handler)
        wait_for(lambda: q.get_job(job.id).state == "complete")
        assert seen == [SECRET]
        assert sealing.key_id_of(stored(r, prefix, job.id, "result")) == "k1"
        assert in_clear(r, prefix, "paid-by-ada", "ada@example.com") == []
        assert q.get_job(job.id).result == {"receipt": "paid-by-ada"}


def test_a_worker_without_the_key_fails_the_job_naming_it(
    redis_url: str, prefix: str, r: redis.Redis
) -> None:
    ran: list[Any] = []
    with Queue(redis_url, prefix=prefix, encryption_keys=K1) as producer:
        job = producer.create_job("email", SECRET).attempts(5).save()
    with Queue(redis_url, prefix=prefix, encryption_keys=K2) as worker:
        worker.process("email", 1, ran.append)
        failed = wait_for(lambda: (j := worker.get_job(job.id)).state == "failed" and j)
    assert ran == []  # the handler never saw the ciphertext
    assert failed.attempts_made == 1  # no retry: another attempt would fail alike
    assert "CannotDecrypt" in (failed.error or "") and "'k1'" in (failed.error or "")
    with Queue(redis_url, prefix=prefix, encryption_keys=K1) as owner:
        assert owner.get_job(job.id).data == SECRET  # untouched: retry it with the key


def test_flows_and_child_processes_keep_it_sealed(
    redis_url: str, prefix: str, r: redis.Redis
) -> None:
    from . import isolated_handlers as handlers

    with Queue(redis_url, prefix=prefix, encryption_keys=[K1]) as q:
        child = q.create_job("calc", {"n": 21})
        parent = q.flow(q.create_job("report", {"to": "ada@example.com"}), [child])
        assert in_clear(r, prefix, "ada@example.com") == []
        assert sealing.key_id_of(stored(r, prefix, child.id, "data")) == "k1"
        q.process("calc", 1, handlers.double, isolation="process")  # the child opens it
        wait_for(lambda: q.get_job(child.id).state == "complete", timeout=60)
        assert q.get_job(child.id).result["n"] == 42
        assert sealing.key_id_of(stored(r, prefix, child.id, "result")) == "k1"
        assert q.get_job(parent.id).data == {"to": "ada@example.com"}
        # The parent's copy of the result stays sealed in Redis; it is handed over opened.
        assert in_clear(r, prefix, '"n":42') == []
        result = q.get_job(child.id).result
        assert q.children_results(parent.id) == {child.id: result}
        assert q.get_job(parent.id).children_results() == {child.id: result}


@pytest.mark.parametrize("kind", ["def", "async"])
def test_logs_progress_and_errors_are_sealed_everywhere_they_go(
    kind: str, redis_url: str, prefix: str, r: redis.Redis
) -> None:
    """Hash fields, log lines, history, the search index, the stats, and the events heard on
    the queue's channel: nothing of the data, logs, progress or error shows in clear."""
    from kue_core import NoRetry

    def work(job: Any) -> None:
        job.log("writing to %s", job.data["email"])
        job.progress(1, 2, {"seen": job.data["card"]})
        raise NoRetry(f"card {job.data['card']} refused for {job.data['email']}")

    async def awork(job: Any) -> None:
        work(job)

    with Queue(redis_url, prefix=prefix, encryption_keys=[K1]) as q:
        with heard(r, q.keys.events) as events:
            job = q.create_job("email", SECRET).save()
            q.process("email", 1, awork if kind == "async" else work)
            failed = wait_for(lambda: (j := q.get_job(job.id)).state == "failed" and j)
            wait_for(lambda: any(e.get("event") == "failed" for e in events))
        assert in_clear(r, prefix, "ada@example.com", "4242-x9", "salary") == []
        assert not [e for e in events if "ada@example.com" in json.dumps(e)]
        assert "card 4242-x9 refused for ada@example.com" in (failed.error or "")
        assert failed.progress_data == {"seen": "4242-x9"}
        assert q.get_log(job.id) == ["writing to ada@example.com"]
        assert [line.text for line in q.get_log_lines(job.id)] == ["writing to ada@example.com"]
        errors = [e["error"] for e in q.history(job.id) if "error" in e]
        assert errors and errors[-1].startswith("NoRetry: card 4242-x9 refused")
    with Queue(redis_url, prefix=prefix, encryption_keys=K2) as other:  # another key: as stored
        unread = other.get_job(job.id)
        assert unread.unopened is not None and unread.unopened.key_id == "k1"
        assert sealing.key_id_of(other.get_log(job.id)[0]) == "k1"


def test_an_envelope_read_without_its_key_cannot_be_saved_back_as_data(
    sealed: Any, r: redis.Redis, prefix: str
) -> None:
    from kue_core import InvalidJob

    job = sealed.create_job("email", {"email": "x@example.com"}).save()
    before = stored(r, prefix, job.id, "data")
    with pytest.raises(InvalidJob, match="encrypted envelope"):
        sealed.update_data(job.id, json.loads(before))
    assert stored(r, prefix, job.id, "data") == before
    with pytest.raises(InvalidJob, match="encrypted envelope"):
        sealed.create_job("email", json.loads(before)).save()  # nor as a new job's data


@pytest.mark.parametrize("side", ["sync", "async"])
def test_a_typed_task_and_its_wait_on_an_encrypted_queue(
    side: str, redis_url: str, prefix: str, r: redis.Redis
) -> None:
    """The call's arguments and the result are sealed; ``wait`` gives the result in clear,
    whether it read the job or heard its completion."""
    with Queue(redis_url, prefix=prefix, encryption_keys=[K1]) as q:

        @q.task("greet")
        def greet(name: str) -> dict[str, str]:
            return {"hello": name}

        if side == "sync":
            job = greet.enqueue("ada@example.com")
            q.process_tasks()
            assert job.wait(30) == {"hello": "ada@example.com"}
        else:
            from ..clients import run

            async def go() -> Any:
                from kue_core.aio import AsyncQueue

                async with AsyncQueue(redis_url, prefix=prefix, encryption_keys=[K1]) as aq:
                    made = await aq.create_job("greet", {"name": "ada@example.com"}).save()
                    q.process_tasks()
                    return await made.wait(30)

            assert run(go()) == {"hello": "ada@example.com"}
        assert in_clear(r, prefix, "ada@example.com") == []


def test_a_wait_that_hears_the_completion_opens_its_result(
    redis_url: str, prefix: str, r: redis.Redis
) -> None:
    """The result as the completion's event carries it (an envelope) is opened: the wait
    starts while the job runs, so that it learns of the end from the event."""
    import threading

    if on_cluster(redis_url):
        pytest.skip("PUBSUB NUMSUB counts one node's subscribers")
    go, answer = threading.Event(), []
    with Queue(redis_url, prefix=prefix, encryption_keys=[K1]) as q:
        job = q.create_job("greet", {"name": "ada"}).save()
        q.process("greet", 1, lambda j: go.wait(30) and {"hello": j.data["name"]})
        wait_for(lambda: q.get_job(job.id).state == "active")
        before = dict(r.pubsub_numsub(q.keys.events))[q.keys.events]
        waiter = threading.Thread(target=lambda: answer.append(job.wait(30)))
        waiter.start()
        wait_for(lambda: dict(r.pubsub_numsub(q.keys.events))[q.keys.events] > before)
        go.set()
        waiter.join(30)
    assert answer == [{"hello": "ada"}]


def test_only_data_it_cannot_read_stops_a_worker(
    redis_url: str, prefix: str, r: redis.Redis
) -> None:
    """An earlier attempt's error under a key the worker lacks does not keep it from running
    a job whose data it reads."""
    lost = sealing.keyring(f"k9:{base64.b64encode(bytes(32)).decode()}")
    assert lost is not None
    ran: list[Any] = []
    with Queue(redis_url, prefix=prefix, encryption_keys=K1) as q:
        job = q.create_job("email", {"n": 1}).save()
        r.hset(f"{prefix}:job:{job.id}", "error", lost.seal("old failure", "error"))
        assert q.get_job(job.id).unopened.field == "error"  # type: ignore[union-attr]
        q.process("email", 1, lambda j: ran.append(j.data))
        wait_for(lambda: q.get_job(job.id).state == "complete")
    assert ran == [{"n": 1}]


def test_a_schedules_data_is_sealed_and_its_timetable_kept(
    redis_url: str, prefix: str, r: redis.Redis
) -> None:
    """A schedule's definition keeps its data sealed (the timetable in clear); defining the
    same schedule again keeps its timetable, though its stored text differs each time; the
    jobs it makes are the queue's, sealed, and read in clear."""
    with Queue(redis_url, prefix=prefix, encryption_keys=K1) as q:
        first = q.every("daily", 60_000, "report", {"to": "ada@example.com"})
        again = q.every("daily", 60_000, "report", {"to": "ada@example.com"})
        assert again["anchor"] == first["anchor"]
        assert again["data"] == {"to": "ada@example.com"}
        job = q.trigger("daily")
        assert q.get_job(job.id).data == {"to": "ada@example.com"}
        assert in_clear(r, prefix, "ada@example.com") == []
    with Queue(redis_url, prefix=prefix, encryption_keys=K2) as other:
        shown = other.schedule("daily")
        assert list(shown["data"]) == [sealing.SEALED]  # as stored
        with pytest.raises(CannotDecrypt):
            other.trigger("daily")
        from kue_core.jobs.schedules import fire_due

        late = other.schedule("daily")["next"] + 1  # due: a process without the key fires none
        assert fire_due(other, late) >= late + 1000  # and looks again in a second
        assert other.schedule("daily")["runs"] == 0


def test_a_process_without_keys_does_not_fire_a_sealed_schedule(
    redis_url: str, prefix: str
) -> None:
    from kue_core.jobs.schedules import fire_due

    with Queue(redis_url, prefix=prefix, encryption_keys=K1) as q:
        q.every("hourly", 3_600_000, "report", {"to": "ada@example.com"})
    with Queue(redis_url, prefix=prefix, encryption_keys="") as clear:
        late = clear.schedule("hourly")["next"] + 1
        assert fire_due(clear, late) >= late + 1000
        assert clear.schedule("hourly")["runs"] == 0 and clear.count("inactive") == 0


def test_a_fan_out_jobs_error_is_read_whole(redis_url: str, prefix: str, r: redis.Redis) -> None:
    """A fan-out job fails with its run's error after the run's worker (in clear): the run's
    sealed error inside it is opened where it is read, and stays sealed in Redis."""
    with Queue(redis_url, prefix=prefix, encryption_keys=[K1]) as q:
        job = q.create_job("fan", SECRET).fan_out(1).save()

        def refuse(j: Any) -> None:
            raise ValueError(f"no card {j.data['card']}")

        q.process("fan", 1, refuse)
        failed = wait_for(lambda: (j := q.get_job(job.id)).state == "failed" and j)
        stored_error = stored(r, prefix, job.id, "error")
        assert "4242-x9" not in stored_error and sealing.PREFIX in stored_error
        assert failed.error.startswith("run on ") and "ValueError: no card 4242" in failed.error
