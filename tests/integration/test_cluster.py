"""Redis Cluster specifics: which node a queue lives on, several queues over the cluster's
slots, a slot moved under a running worker, and prefixes a cluster cannot serve. (The whole
core, worker and API suites also run on a cluster: see ``CLUSTER_SUITES`` in conftest.)"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from redis.crc import key_slot

from kue_core import ConnectionFailed, Queue, connection, doctor
from kue_core.store import recovery
from kue_core.store.cluster import SlotPool, hash_tag
from tests.clients import blocking_queue
from tests.clients import target as unwrapped
from tests.conftest import Producer, keys_under, wait_for

#: For the tests below that need a Redis: the session's cluster.
in_cluster = pytest.mark.parametrize("redis_url", ["cluster"], indirect=True, scope="session")


def _nodes(redis_url: str) -> list[tuple[str, int]]:
    hosts = redis_url.partition("://")[2].split(",")
    return [(h.rpartition(":")[0], int(h.rpartition(":")[2])) for h in hosts]


@pytest.fixture
def cluster(redis_url: str) -> Iterator[redis.RedisCluster]:
    """redis-py's own cluster client, which routes every key itself: the referee."""
    host, port = _nodes(redis_url)[0]
    client = redis.RedisCluster(host=host, port=port, decode_responses=True)
    yield client
    client.close()


def target_of(aqueue: Any) -> Any:
    """The slot owner an asyncio client (seen through ``Blocking``) has heard of."""
    return unwrapped(aqueue).client.connection_pool.slot_owner


def _owner(cluster: redis.RedisCluster, prefix: str) -> tuple[str, int]:
    node = cluster.get_node_from_key(prefix)
    return node.host, int(node.port)


def _prefix_on(cluster: redis.RedisCluster, port: int, avoid: set[str]) -> str:
    """A hash-tagged prefix whose slot the node on ``port`` serves."""
    n = 0
    while True:
        prefix = f"{{ns{n}}}"
        if prefix not in avoid and _owner(cluster, prefix)[1] == port:
            return prefix
        n += 1


@in_cluster
def test_a_queue_lives_on_the_node_serving_its_hash_tag(
    redis_url: str, prefix: str, cluster: redis.RedisCluster
) -> None:
    queue = Queue(redis_url, prefix=prefix)
    try:
        job = queue.create_job("email", {"to": "a@example.com"}).save()
        queue.create_job("email", {}).delay(60_000).save()
        queue.pause("email")
        keys = keys_under(cluster, prefix)
        assert f"{prefix}:job:{job.id}" in keys and f"{prefix}:jobs:email:delayed" in keys
        assert {key_slot(k.encode()) for k in keys} == {key_slot(prefix.encode())}
        pool = queue.client.connection_pool
        assert isinstance(pool, SlotPool)
        assert pool.slot_owner.address() == _owner(cluster, prefix)
        assert cluster.hget(f"{prefix}:job:{job.id}", "state") == "inactive"
    finally:
        queue.close()


@in_cluster
def test_queues_with_different_hash_tags_spread_over_the_primaries(
    redis_url: str, cluster: redis.RedisCluster
) -> None:
    """One queue per primary, each with a worker, all at once."""
    ports = sorted(port for _, port in _nodes(redis_url))
    prefixes: list[str] = []
    for port in ports:
        prefixes.append(_prefix_on(cluster, port, set(prefixes)))
    queues = [Queue(redis_url, prefix=p) for p in prefixes]
    try:
        for q in queues:
            for k in keys_under(cluster, q.prefix):
                cluster.delete(k)
            q.process("task", 2, lambda job: {"on": job.data["n"]})
        ids = [[q.create_job("task", {"n": i}).save().id for i in range(20)] for q in queues]
        for q, jobs in zip(queues, ids, strict=True):
            wait_for(lambda q=q: q.count("complete", "task") == 20, timeout=20)
            assert [q.get_job(i).result for i in jobs] == [{"on": n} for n in range(20)]
        assert {_owner(cluster, p)[1] for p in prefixes} == set(ports)
    finally:
        for q in queues:
            q.close()


def _move_slot(cluster: redis.RedisCluster, slot: int, target: Any, batch: int = 100) -> None:
    """Move one slot and its keys to ``target``, ``batch`` keys at a time, the way
    ``redis-cli --cluster reshard`` does."""
    _start_moving(cluster, slot, target)
    _finish_moving(cluster, slot, target, batch)


def _start_moving(cluster: redis.RedisCluster, slot: int, target: Any) -> None:
    source = cluster.nodes_manager.get_node_from_slot(slot)
    ids = {n.name: cluster.cluster_myid(n) for n in cluster.get_primaries()}
    cluster.execute_command(
        "CLUSTER SETSLOT", slot, "IMPORTING", ids[source.name], target_nodes=target
    )
    cluster.execute_command(
        "CLUSTER SETSLOT", slot, "MIGRATING", ids[target.name], target_nodes=source
    )


def _finish_moving(cluster: redis.RedisCluster, slot: int, target: Any, batch: int) -> None:
    source = cluster.nodes_manager.get_node_from_slot(slot)
    ids = {n.name: cluster.cluster_myid(n) for n in cluster.get_primaries()}
    while keys := cluster.execute_command(
        "CLUSTER GETKEYSINSLOT", slot, batch, target_nodes=source
    ):
        cluster.execute_command(
            "MIGRATE", target.host, target.port, "", 0, 5000, "KEYS", *keys, target_nodes=source
        )
    for node in cluster.get_primaries():
        cluster.execute_command(
            "CLUSTER SETSLOT", slot, "NODE", ids[target.name], target_nodes=node
        )


@in_cluster
def test_a_worker_follows_its_slot_to_another_primary(
    redis_url: str, prefix: str, cluster: redis.RedisCluster
) -> None:
    """After a reshard, the first command to the old primary gets MOVED; the client asks the
    new owner instead, and the worker and producers (blocking and asyncio) carry on."""
    stack = contextlib.ExitStack()
    producer = Queue(redis_url, prefix=prefix)
    worker = Queue(redis_url, prefix=prefix)
    try:
        worker.process("task", 1, lambda job: job.data["n"] * 2)
        first = producer.create_job("task", {"n": 1}).save()
        wait_for(lambda: producer.get_job(first.id).state == "complete")
        aproducer = stack.enter_context(blocking_queue(redis_url, prefix))
        # Its pipelined connection is up, to the owner.
        early = aproducer.create_job("task", {"n": 11}).save().id
        slot = key_slot(prefix.encode())
        before = _owner(cluster, prefix)
        target = next(n for n in cluster.get_primaries() if (n.host, int(n.port)) != before)
        _move_slot(cluster, slot, target)
        cluster.nodes_manager.initialize()
        assert _owner(cluster, prefix) == (target.host, int(target.port))

        later = [producer.create_job("task", {"n": n}).save().id for n in range(2, 11)]
        # The asyncio client, whose pipelined connection went to the old owner before.
        with_async = [aproducer.create_job("task", {"n": n}).save().id for n in range(12, 22)]
        wait_for(lambda: producer.count("complete", "task") == 21, timeout=20)
        assert [producer.get_job(i).result for i in [*later, early, *with_async]] == [
            n * 2 for n in range(2, 22)
        ]
        assert producer.client.connection_pool.slot_owner.address() == (
            target.host,
            int(target.port),
        )
        assert target_of(aproducer).known() == (target.host, int(target.port))
        assert cluster.hget(f"{prefix}:job:{first.id}", "result") == "2"
    finally:
        stack.close()
        worker.close()
        producer.close()


@in_cluster
def test_a_transition_waits_out_a_migration_and_never_writes_half(
    redis_url: str, prefix: str, cluster: redis.RedisCluster
) -> None:
    """While a slot migrates, a key the queue has not written yet (here the complete sets) may
    already belong to the new owner, and Redis refuses a script that reaches it, after its
    first writes. Every script first touches a key that never exists, so it is refused before
    writing anything; it is sent again until the slot has moved, and then runs whole."""
    queue = Queue(redis_url, prefix=prefix)
    try:
        job = queue.create_job("task", {}).save()
        slot = key_slot(prefix.encode())
        source = cluster.nodes_manager.get_node_from_slot(slot)
        target = next(n for n in cluster.get_primaries() if n.name != source.name)
        on_source = cluster.get_redis_connection(source)
        refused_before = _errors(on_source)
        _start_moving(cluster, slot, target)
        moving = threading.Thread(target=lambda: job.set_state("complete"), daemon=True)
        moving.start()
        # Refused (more than once: it keeps trying), and nothing written.
        wait_for(lambda: _errors(on_source) >= refused_before + 2, timeout=10)
        assert moving.is_alive()
        assert on_source.hget(f"{prefix}:job:{job.id}", "state") == "inactive"
        assert on_source.zcard(f"{prefix}:jobs:inactive") == 1

        _finish_moving(cluster, slot, target, batch=100)
        moving.join(timeout=10)
        assert not moving.is_alive()
        assert queue.get_job(job.id).state == "complete"
        assert doctor.check(queue).findings == []
    finally:
        queue.close()


@in_cluster
@pytest.mark.parametrize("kind", ["sync", "async"])
def test_a_bulk_save_waits_out_a_migration_and_saves_each_job_once(
    redis_url: str, prefix: str, cluster: redis.RedisCluster, kind: str
) -> None:
    """``save_many`` of more than one chunk, sent in one write, while the slot migrates: each
    chunk's script is refused at its fence, and only the refused chunks are sent again, once
    the slot has moved (never the whole batch again: the chunks that ran would run twice)."""
    stack = contextlib.ExitStack()
    queue = Queue(redis_url, prefix=prefix)
    stack.callback(queue.close)
    saver = queue if kind == "sync" else stack.enter_context(blocking_queue(redis_url, prefix))
    slot = key_slot(prefix.encode())
    source = cluster.nodes_manager.get_node_from_slot(slot)
    target = next(n for n in cluster.get_primaries() if n.name != source.name)
    try:
        queue.create_job("task", {"n": 0}).save()  # the queue's keys exist on the source
        on_source = cluster.get_redis_connection(source)
        refused_before = _errors(on_source)
        _start_moving(cluster, slot, target)
        saved: list[Any] = []
        big = [saver.create_job("task", {"n": n}) for n in range(1, 2501)]  # three chunks
        saving = threading.Thread(target=lambda: saved.extend(saver.save_many(big)), daemon=True)
        saving.start()
        wait_for(lambda: _errors(on_source) >= refused_before + 3, timeout=10)
        assert saving.is_alive() and on_source.zcard(f"{prefix}:jobs:inactive") == 1
        _finish_moving(cluster, slot, target, batch=100)
        saving.join(timeout=20)
        assert not saving.is_alive()
        ids = [j.id for j in saved]
        assert ids == list(range(2, 2502))
        assert queue.count("inactive", "task") == 2501  # each once: nothing saved twice
        assert doctor.check(queue).findings == []
    finally:
        _finish_moving(cluster, slot, target, batch=100)
        stack.close()


@in_cluster
def test_a_migration_longer_than_the_patience_is_a_connection_error(
    redis_url: str, prefix: str, cluster: redis.RedisCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A slot that stays mid-migration does not hang a caller: after ``REDIRECT_PATIENCE`` the
    transition raises a ``ConnectionError`` naming the migration, having written nothing."""
    monkeypatch.setattr(recovery, "REDIRECT_PATIENCE", 0.5)
    queue = Queue(redis_url, prefix=prefix)
    slot = key_slot(prefix.encode())
    target = next(n for n in cluster.get_primaries() if _owner(cluster, prefix)[1] != n.port)
    try:
        job = queue.create_job("task", {}).save()
        _start_moving(cluster, slot, target)
        with pytest.raises(redis.ConnectionError, match="migrating"):
            job.set_state("complete")
        _finish_moving(cluster, slot, target, batch=100)
        assert queue.get_job(job.id).state == "inactive"
        assert doctor.check(queue).findings == []
    finally:
        _finish_moving(cluster, slot, target, batch=100)  # leave the cluster whole
        queue.close()


def _errors(node: redis.Redis) -> int:
    """Error replies the node has given since it started."""
    return sum(int(v["count"]) for v in node.info("errorstats").values())


@in_cluster
def test_a_busy_queue_loses_nothing_while_its_slot_migrates(
    redis_url: str, prefix: str, cluster: redis.RedisCluster
) -> None:
    """A live reshard: the slot's keys move one at a time while two producers (the blocking
    and the asyncio client) save and four worker slots run. A transition must never run
    against half-moved keys (a script that met a moved key half-way would leave a
    half-written job): the writes wait until the slot has moved, then carry on at the new
    owner. No save fails, every acknowledged job is done once, and ``kue doctor`` finds the
    layout whole."""
    producer_queue = Queue(redis_url, prefix=prefix)
    worker = Queue(redis_url, prefix=prefix)
    done: list[int] = []
    producer = Producer(producer_queue)
    stack = contextlib.ExitStack()
    aproducer = Producer(stack.enter_context(blocking_queue(redis_url, prefix)))
    try:
        worker.process("task", 4, lambda job: done.append(job.id) or job.data["n"] * 2)
        producer.start()
        aproducer.start()
        wait_for(lambda: len(done) >= 50, timeout=20)
        slot = key_slot(prefix.encode())
        source = _owner(cluster, prefix)
        target = next(n for n in cluster.get_primaries() if (n.host, int(n.port)) != source)
        _move_slot(cluster, slot, target, batch=1)
        cluster.nodes_manager.initialize()
        assert _owner(cluster, prefix) == (target.host, int(target.port))
        moved_at = len(producer.acked), len(aproducer.acked)
        wait_for(lambda: len(producer.acked) >= moved_at[0] + 50, timeout=20)
        wait_for(lambda: len(aproducer.acked) >= moved_at[1] + 50, timeout=20)
    finally:
        producer.stop()
        aproducer.stop()
        stack.close()
    try:
        acked = producer.acked + aproducer.acked
        assert producer.errors == aproducer.errors == []
        wait_for(lambda: producer_queue.count("complete", "task") == len(acked), timeout=30)
        jobs = producer_queue.get_jobs(acked)
        assert [j.result for j in jobs] == [j.data["n"] * 2 for j in jobs]
        assert sorted(done) == sorted(acked)  # each one ran once
        report = doctor.check(producer_queue)
        assert report.findings == []
    finally:
        worker.close()
        producer_queue.close()


@in_cluster
def test_a_prefix_without_a_hash_tag_is_refused_and_writes_nothing(
    redis_url: str, cluster: redis.RedisCluster
) -> None:
    for bad in ("plain", "{}x", "open{only", "x}y{"):
        assert hash_tag(bad) is None
        with pytest.raises(ConnectionFailed, match=r"hash tag, like '\{q\}'"):
            Queue(redis_url, prefix=bad)
    assert not keys_under(cluster, "plain") and not keys_under(cluster, "open{only")


@pytest.mark.parametrize(
    ("prefix", "tag"), [("{q}", "q"), ("app:{jobs}", "jobs"), ("{a}{b}", "a"), ("x{y}z}", "y")]
)
def test_hash_tags_are_read_as_redis_reads_them(prefix: str, tag: str) -> None:
    assert hash_tag(prefix) == tag
    assert key_slot(f"{prefix}:job:1".encode()) == key_slot(tag.encode())


@in_cluster
def test_cluster_urls_name_any_nodes_and_credentials(redis_url: str) -> None:
    host, port = _nodes(redis_url)[0]
    client = connection.from_url(f"redis+cluster://{host}:{port}/0", route="{only-one-node}")
    try:
        assert client.ping()
    finally:
        client.close()
    for bad, why in [
        ("redis+cluster://", "no host"),
        (f"redis+cluster://{host}:{port}/3", "only database 0"),
        (f"redis+cluster://{host}:x", "bad port"),
        (f"redis+cluster://{host}:{port}?color=red", "unknown option 'color'"),
    ]:
        with pytest.raises(ConnectionFailed, match=why):
            connection.from_url(bad, route="{q}")
    with pytest.raises(ConnectionFailed) as info:
        connection.from_url(f"redis+cluster://u:pw-secret@{host}:{port}/9", route="{q}")
    assert "pw-secret" not in str(info.value)
