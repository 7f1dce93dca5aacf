"""claim_batch.lua: up to n jobs in one call are exactly what n successive claims give.

Each case builds the same queue twice, under two prefixes; one is claimed from by claim.lua n
times (stopping at the first claim with no job), the other by one claim_batch call. The jobs
given, the reason given for stopping, and every key written must match, but for the times
(the two run at different moments)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest
import redis

from kue_core import Queue, defaults
from kue_core.base.errors import KueError
from kue_core.base.keys import zid
from kue_core.store import calls
from kue_core.store.calls import PAUSED, PINS, Batch, Claim, Held, Waits
from tests.conftest import heard, keys_under, on_cluster, wait_for
from tests.scripts.claiming import clean

W = "worker-a"
LEASE = 60_000
#: A time in ms (13 digits), in a value or a score; a minute number in a key's name.
_MS = re.compile(r"\d{12,}")
_MINUTE = re.compile(r"\d{7,}")


@pytest.fixture
def twins(redis_url: str, prefix: str) -> Iterator[tuple[Queue, Queue]]:
    """Two queues under prefixes of their own (cleaned with the test's)."""
    a, b = Queue(redis_url, prefix=prefix + "a"), Queue(redis_url, prefix=prefix + "b")
    yield a, b
    a.close()
    b.close()


def _masked(value: Any) -> Any:
    if isinstance(value, float | int):
        return "T" if abs(value) >= 10**11 else value
    if isinstance(value, str):
        return _MS.sub("T", value)
    return value


def _state(r: redis.Redis, p: str) -> dict[str, Any]:
    """Every key under ``p`` with its contents, times masked, ``p`` left out of the names."""
    out: dict[str, Any] = {}
    for key in keys_under(r, p):
        kind = r.type(key)
        if kind == "hash":
            value: Any = {f: _masked(v) for f, v in r.hgetall(key).items()}
        elif kind == "zset":
            # By score then member, times being equal: the two claim at different moments.
            pairs = [(m, _masked(s)) for m, s in r.zrange(key, 0, -1, withscores=True)]
            value = sorted(pairs, key=lambda ms: (str(ms[1]), ms[0]))
        elif kind == "list":
            value = [_masked(v) for v in r.lrange(key, 0, -1)]
        elif kind == "set":
            value = sorted(r.smembers(key))
        else:
            value = _masked(r.get(key))
        out[_MINUTE.sub("M", key[len(p) :])] = (kind, value)
    return out


def _job(claimed: tuple[int, dict[str, str]]) -> tuple[int, dict[str, Any]]:
    job_id, fields = claimed
    return job_id, {f: _masked(v) for f, v in fields.items() if f != "waited"}


def _same_why(a: Claim, b: Claim) -> bool:
    """Two claims' reasons for no job alike, a limit's waits within a second (the claims run at
    different moments: on a loaded machine, a Cluster's twin more than 100 ms apart)."""
    if isinstance(a, Held) and isinstance(b, Held):
        return abs(a.wait_ms - b.wait_ms) <= 1000
    if isinstance(a, Waits) and isinstance(b, Waits):
        pairs = zip(a.each, b.each, strict=False)
        return len(a.each) == len(b.each) and all(_same_why(x, y) for x, y in pairs)
    return a == b


def _singly(queue: Queue, types: str | Sequence[str], n: int) -> tuple[list[Any], Claim]:
    jobs = []
    for _ in range(n):
        got = queue.scripts.call(calls.claim(queue.keys, types, W, LEASE))
        if not isinstance(got, tuple):
            return jobs, got
        jobs.append(_job(got))
    return jobs, None


def _batch(queue: Queue, types: str | Sequence[str], n: int) -> Batch:
    return queue.scripts.call(calls.claim_batch(queue.keys, types, W, LEASE, n))


def _same(
    r: redis.Redis,
    twins: tuple[Queue, Queue],
    build: Callable[[Queue], None],
    types: str | Sequence[str],
    n: int,
) -> Batch:
    """Build both queues, claim from one singly and from the other in a batch: the same jobs,
    the same reason, the same keys. Returns the batch."""
    one, other = twins
    build(one)
    build(other)
    jobs, why = _singly(one, types, n)
    batch = _batch(other, types, n)
    assert [_job(j) for j in batch.jobs] == jobs
    assert _same_why(batch.why, why), (batch.why, why)
    assert _state(r, other.prefix) == _state(r, one.prefix)
    for job_id, fields in batch.jobs:
        assert int(fields["waited"]) >= 0 and fields["workerId"] == W
        # Held by the worker's process lease (heartbeat.lua): no lease per job.
        assert r.zscore(other.keys.leases, zid(job_id)) is None
    return batch


def _plain(count: int, job_type: str = "t") -> Callable[[Queue], None]:
    def build(q: Queue) -> None:
        for i in range(count):
            q.create_job(job_type, {"i": i}).priority(["low", "normal", "high"][i % 3]).save()

    return build


@pytest.mark.parametrize(("count", "n"), [(0, 1), (1, 1), (3, 5), (5, 5), (7, 4), (6, 16)])
def test_plain_jobs(r: redis.Redis, twins: tuple[Queue, Queue], count: int, n: int) -> None:
    batch = _same(r, twins, _plain(count), "t", n)
    assert len(batch.jobs) == min(count, n)
    assert batch.why is None
    clean(twins[1])


def test_all_claimed_leaves_the_tokens_of_those_left(
    r: redis.Redis, twins: tuple[Queue, Queue]
) -> None:
    _same(r, twins, _plain(5), "t", 3)
    assert r.llen(twins[1].keys.tokens("t")) == 2


def test_ttl_jobs_score_by_their_deadline(r: redis.Redis, twins: tuple[Queue, Queue]) -> None:
    def build(q: Queue) -> None:
        for i in range(3):
            q.create_job("t", {"i": i}).ttl(5_000 * (i + 1)).save()

    batch = _same(r, twins, build, "t", 3)
    other = twins[1]
    for job_id, fields in batch.jobs:
        score = r.zscore(other.keys.state("active"), zid(job_id))
        assert score == int(fields["started_at"]) + int(fields["ttl"])


def test_paused_type(r: redis.Redis, twins: tuple[Queue, Queue]) -> None:
    def build(q: Queue) -> None:
        _plain(3)(q)
        q.pause("t")

    batch = _same(r, twins, build, "t", 4)
    assert batch == Batch([], PAUSED)


def test_limited_type(r: redis.Redis, twins: tuple[Queue, Queue]) -> None:
    def build(q: Queue) -> None:
        q.limit("t", concurrency=2)
        _plain(5)(q)

    batch = _same(r, twins, build, "t", 4)
    assert len(batch.jobs) == 2 and isinstance(batch.why, Held)


def test_rate_limited_type(r: redis.Redis, twins: tuple[Queue, Queue]) -> None:
    def build(q: Queue) -> None:
        q.limit("t", rate=(3, 60_000))
        _plain(5)(q)

    batch = _same(r, twins, build, "t", 5)
    assert len(batch.jobs) == 3 and isinstance(batch.why, Held)


def test_pinned_jobs(r: redis.Redis, twins: tuple[Queue, Queue]) -> None:
    def build(q: Queue) -> None:
        q.create_job("t", {"i": 0}).save()
        q.create_job("t", {"i": 1}).only([W]).priority("high").save()
        q.create_job("t", {"i": 2}).only(["other"]).save()
        q.create_job("t", {"i": 3}).prefer([W, "other"]).save()

    batch = _same(r, twins, build, "t", 5)
    assert len(batch.jobs) == 3 and batch.why == PINS
    clean(twins[1])


def test_groups(r: redis.Redis, twins: tuple[Queue, Queue]) -> None:
    def build(q: Queue) -> None:
        q.limit("t", group_concurrency=1)
        for i, g in enumerate(["x", "x", "y", "", "y", "z"]):
            job = q.create_job("t", {"i": i})
            (job.group(g) if g else job).save()

    batch = _same(r, twins, build, "t", 6)
    assert len(batch.jobs) == 4 and isinstance(batch.why, Held)
    clean(twins[1])


def test_fan_out(r: redis.Redis, twins: tuple[Queue, Queue]) -> None:
    def build(q: Queue) -> None:
        q.create_job("t", {"i": 0}).fan_out(2).save()
        _plain(2)(q)

    batch = _same(r, twins, build, "t", 4)
    assert len(batch.jobs) == 3 and batch.why is None
    assert batch.jobs[0][1]["run"] == W
    clean(twins[1])


@pytest.mark.parametrize("n", [2, 4, 5, 9])
def test_several_types_in_order(r: redis.Redis, twins: tuple[Queue, Queue], n: int) -> None:
    def build(q: Queue) -> None:
        _plain(2, "a")(q)
        _plain(3, "b")(q)
        _plain(1, "c")(q)
        q.limit("c", concurrency=1)
        _plain(2, "c")(q)

    batch = _same(r, twins, build, ["a", "b", "c"], n)
    types = [fields["type"] for _, fields in batch.jobs]
    assert types == ["a", "a", "b", "b", "b", "c"][:n]
    if n == 9:
        assert isinstance(batch.why, Waits) and batch.why.each[:2] == (None, None)
        assert isinstance(batch.why.each[2], Held)


def test_several_types_one_paused(r: redis.Redis, twins: tuple[Queue, Queue]) -> None:
    def build(q: Queue) -> None:
        _plain(2, "a")(q)
        q.pause("a")
        _plain(1, "b")(q)

    batch = _same(r, twins, build, ["a", "b"], 3)
    assert len(batch.jobs) == 1 and batch.why == Waits((PAUSED, None))


def test_stale_members(r: redis.Redis, twins: tuple[Queue, Queue]) -> None:
    """Members left behind (a job gone, one of another state or type, a job retried with its
    trail left) are dropped or claimed as a single claim does."""

    def build(q: Queue) -> None:
        ids = [q.create_job("t", {"i": i}).save().id for i in range(6)]
        k = q.keys
        r.delete(k.job(ids[0]))  # gone, its members left
        r.hset(k.job(ids[1]), "state", "complete")  # written by hand: not waiting
        r.hset(k.job(ids[2]), "type", "u")  # in the wrong type's set
        r.hset(k.job(ids[3]), "trail", "1700000000000,1")  # a claim its history missed
        r.zadd(k.type_state("t", "inactive"), {zid(999): 0})  # no such job

    batch = _same(r, twins, build, "t", 6)
    assert len(batch.jobs) == 3 and batch.why is None


def test_recovered_job(r: redis.Redis, twins: tuple[Queue, Queue]) -> None:
    """A job whose lease expired is claimed again, its trail written out first."""

    def build(q: Queue) -> None:
        _plain(3)(q)
        first = q.scripts.call(calls.claim(q.keys, "t", "lost", 1))
        assert isinstance(first, tuple)
        r.zadd(q.keys.leases, {zid(first[0]): 0})  # its lease ran out long ago
        assert q.scripts.call(calls.recover(q.keys, 10, 100)).requeued == 1

    batch = _same(r, twins, build, "t", 4)
    assert len(batch.jobs) == 3
    clean(twins[1])


@pytest.mark.parametrize("n", [0, -1])
def test_n_must_be_positive(queue: Queue, n: int) -> None:
    queue.create_job("t").save()
    with pytest.raises(KueError):
        _batch(queue, "t", n)
    assert queue.count("inactive", "t") == 1


def _claim_view(r: redis.Redis, q: Queue, job_id: int) -> dict[str, Any]:
    """What a claim wrote for job ``job_id``: its hash and its members' scores (times masked),
    and the type's wake-up tokens."""
    k, member = q.keys, zid(job_id)
    sets = [k.state("inactive"), k.state("active"), k.type_state("t", "active")]
    return {
        "hash": {f: _masked(v) for f, v in r.hgetall(k.job(job_id)).items()},
        "sets": [_masked(r.zscore(key, member)) for key in sets],
        "tokens": r.llen(k.tokens("t")),
        "history": [_masked(h) for h in r.lrange(k.history(job_id), 0, -1)],
    }


@pytest.mark.parametrize("trail", [False, True])
def test_a_plain_claim_writes_what_a_claim_under_rules_does(
    r: redis.Redis, twins: tuple[Queue, Queue], trail: bool
) -> None:
    """A type with no rules claims by its shorter way; one with rules that do not hold its
    jobs back (a high concurrency limit) by claim_member: both write the same."""
    plain, ruled = twins
    ruled.limit("t", concurrency=1000)
    for q in twins:
        for i in range(3):
            job = q.create_job("t", {"i": i}).priority(i - 1)
            (job.ttl(9_000) if i == 1 else job).save()
        if trail:
            r.hset(q.keys.job(1), "trail", "1700000000000,1")
    for _ in range(3):
        one = plain.scripts.call(calls.claim(plain.keys, "t", W, LEASE))
        other = ruled.scripts.call(calls.claim(ruled.keys, "t", W, LEASE))
        assert isinstance(one, tuple) and isinstance(other, tuple)
        assert _job(one) == _job(other)
        assert _claim_view(r, plain, one[0]) == _claim_view(r, ruled, other[0])


def _published(r: redis.Redis) -> int:
    return int(r.info("commandstats").get("cmdstat_publish", {}).get("calls", 0))


@pytest.mark.parametrize("n", [defaults.EVENTS_UNASKED, 12])
def test_start_events_go_to_listeners_only(
    queue: Queue, r: redis.Redis, redis_url: str, n: int
) -> None:
    """A batch of more than EVENTS_UNASKED claims asks first whether anyone listens, and with
    nobody sends no event; a smaller one sends its events unasked; a listener hears every
    job's start, in order."""
    ids = [queue.create_job("t", {"i": i}).save().id for i in range(2 * n)]
    before = _published(r)
    assert [i for i, _ in _batch(queue, "t", n).jobs] == ids[:n]
    unheard = n if n <= defaults.EVENTS_UNASKED or on_cluster(redis_url) else 0
    assert _published(r) - before == unheard
    with heard(r, queue.keys.events) as got:
        assert [i for i, _ in _batch(queue, "t", n).jobs] == ids[n:]
        wait_for(lambda: len(got) >= n)
    assert [(e["id"], e["event"], e["type"]) for e in got] == [(i, "start", "t") for i in ids[n:]]
