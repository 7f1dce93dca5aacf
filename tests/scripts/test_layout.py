"""The raw Redis layout: keys.py and lib/keys.lua agree, Kue's shapes, one Cluster slot for {q}."""

from __future__ import annotations

import pytest
import redis
from redis.crc import key_slot

from kue_core import Queue
from kue_core.base.keys import Keys
from kue_core.store.cluster import hash_tag
from tests.conftest import keys_under


def _exercise(queue: Queue) -> list[int]:
    """Touch every kind of key: jobs in every reachable state, logs, tokens, history."""
    a = queue.create_job("email", {"to": "x"}).save()
    b = queue.create_job("video").delay(10_000).save()
    c = queue.create_job("email").save()
    a.log("line")
    a.progress(1, 2)
    c.set_state("failed")
    c.set_state("complete")
    d = queue.create_job("email", {"title": "Hi"}).tags("vip").track().save()
    queue.search("hi")  # its scratch set is gone when it returns
    queue.set_retention(failed={"count": 5})
    return [a.id, b.id, c.id, d.id]  # type: ignore[list-item]


def test_every_key_is_one_keys_py_names(queue: Queue, r: redis.Redis, prefix: str) -> None:
    ids = _exercise(queue)
    k = Keys(prefix)
    expected = {k.ids, k.jobs, k.types}
    expected |= {k.job(jid) for jid in ids}
    expected.add(k.history(ids[2]))  # the one moved: a job saved waiting has none until then
    expected.add(k.log(ids[0]))
    expected |= {k.state("inactive"), k.state("delayed"), k.state("complete")}
    expected |= {
        k.type_state("email", "inactive"),
        k.type_state("video", "delayed"),
        k.type_state("email", "complete"),
        k.tokens("email"),
    }
    expected |= {k.finished("complete"), k.tag("vip"), k.tags, k.tracked, k.retention}
    expected |= {k.words, k.word("hi"), k.word("vip")}
    assert keys_under(r, prefix) == expected


def _commands_of_a_save(queue: Queue, r: redis.Redis, prefix: str) -> list[str]:
    """The commands a save's script runs on ``prefix``'s keys, in order."""
    with r.monitor() as monitor:
        queue.create_job("email").save()
        seen: list[str] = []  # this queue's commands run inside the script, in order
        while not seen or not seen[-1].startswith("HSET"):
            command = monitor.next_command()["command"]
            if prefix in command and not command.startswith(("EVALSHA", "FCALL")):
                seen.append(command)
    return seen


def test_every_script_reads_the_fence_first_and_never_writes_it(
    queue: Queue, r: redis.Redis, prefix: str
) -> None:
    """The fence lib/fence.lua reads is the key keys.py names, read before anything else (so that
    on a migrating Cluster slot a script stops before any write), and never written; on a
    prefix with a hash tag only (a Cluster's, on the suite's cluster runs): one without is on
    a single server, where no slot migrates."""
    seen = _commands_of_a_save(queue, r, prefix)
    if hash_tag(prefix) is None:
        assert f"EXISTS {queue.keys.fence}" not in seen
    else:
        assert seen[0] == f"EXISTS {queue.keys.fence}"
    assert r.exists(queue.keys.fence) == 0


@pytest.mark.single_node
@pytest.mark.parametrize("tag", ["{q}", "a{b}c", "x{y"])
def test_a_prefix_with_a_hash_tag_reads_the_fence_on_a_single_server_too(
    redis_url: str, r: redis.Redis, prefix: str, tag: str
) -> None:
    """Any prefix Redis Cluster would read a hash tag in (the first ``{``, then the first
    ``}`` after it, something between) reads the fence; ``x{y`` has none."""
    tagged = prefix + tag
    q = Queue(redis_url, prefix=tagged)
    try:
        seen = _commands_of_a_save(q, r, tagged)
    finally:
        q.close()
    assert (seen[0] == f"EXISTS {q.keys.fence}") == (hash_tag(tagged) is not None)
    assert hash_tag(tagged) is None or r.exists(q.keys.fence) == 0


def test_kue_types_of_every_key(queue: Queue, r: redis.Redis, prefix: str) -> None:
    _exercise(queue)
    k = Keys(prefix)
    assert r.type(k.ids) == "string"
    assert (
        r.type(k.jobs)
        == r.type(k.state("inactive"))
        == r.type(k.type_state("email", "inactive"))
        == "zset"
    )
    assert r.type(k.types) == "set"
    assert r.type(k.tokens("email")) == "list"
    assert r.type(k.job(1)) == "hash"
    assert r.type(k.log(1)) == "list"
    assert r.type(k.tag("vip")) == r.type(k.word("vip")) == r.type(k.tracked) == "zset"
    assert r.type(k.finished("complete")) == r.type(k.words) == "zset"
    assert r.type(k.tags) == "zset" and r.type(k.retention) == "hash"


@pytest.mark.single_node  # on the cluster: tests/integration/test_cluster.py
def test_hash_tag_prefix_keeps_every_key_in_one_slot(
    redis_url: str, r: redis.Redis, prefix: str
) -> None:
    tagged = "{" + prefix + "}"
    queue = Queue(redis_url, prefix=tagged)
    try:
        _exercise(queue)
        keys = set(r.scan_iter(match="{" + prefix + "}:*"))
        assert len(keys) > 10
        assert {key_slot(key.encode()) for key in keys} == {key_slot(tagged.encode())}
        assert key_slot(queue.keys.events.encode()) == key_slot(tagged.encode())
    finally:
        queue.close()


def test_a_job_written_as_kue_writes_it_loads(queue: Queue, r: redis.Redis, prefix: str) -> None:
    """A job hash as Kue 0.11 leaves it after completion (all values strings)."""
    r.hset(
        f"{prefix}:job:41",
        mapping={
            "type": "email",
            "data": '{"title":"welcome","to":"a@example.com"}',
            "priority": "10",
            "state": "complete",
            "created_at": "1795281564082",
            "promote_at": "1795281564082",
            "updated_at": "1795281564108",
            "started_at": "1795281564087",
            "duration": "21",
            "workerId": "kue:vm:10085:email:1",
            "max_attempts": "1",
            "attempts": "1",
            "progress": "100",
            "progress_data": '{"step":"rendered"}',
            "result": '{"delivered":true}',
            "backoff": "function(){ return 1 }",
        },
    )
    r.zadd(f"{prefix}:jobs:complete", {"02|41": 10})
    job = queue.get_job(41)
    assert job.to_dict() == {
        "id": 41,
        "type": "email",
        "data": {"title": "welcome", "to": "a@example.com"},
        "result": {"delivered": True},
        "priority": 10,
        "progress": 100,
        "progress_data": {"step": "rendered"},
        "state": "complete",
        "created_at": 1795281564082,
        "promote_at": 1795281564082,
        "updated_at": 1795281564108,
        "started_at": 1795281564087,
        "duration": 21,
        "workerId": "kue:vm:10085:email:1",
        "attempts": {"made": 1, "remaining": 0, "max": 1},
    }
    assert job.backoff() is None  # stored code is never run
    assert [j.id for j in queue.range_by_state("complete", 0, -1)] == [41]
