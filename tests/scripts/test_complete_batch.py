"""complete_batch.lua: k completions (and the claims for the slots they free) in one call end
as k calls of complete.lua (the caller counting) and then the claims one by one do, on a
second prefix holding the same jobs: the same hashes (but for times and durations), sets,
lists, counters and events; refused tokens, fan-out runs, dependents, removeOnComplete,
unique keys, groups, rules and retention mixed in."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis

from kue_core import Queue, defaults
from kue_core.store import calls
from kue_core.store.calls import PAUSED, Finished
from tests.conftest import keys_under
from tests.scripts.claiming import clean, token

W, W2, LEASE = "w-1", "w-2", 30_000

#: Server times (ms since the epoch, 13 digits) and durations differ between the two runs.
_TIME = re.compile(r"\b1\d{12}\b")
_DURATION = re.compile(r'"duration":\d+')


def _norm(text: str) -> str:
    return _DURATION.sub('"duration":D', _TIME.sub("T", text))


def _value(r: redis.Redis, key: str, name: str) -> Any:
    kind = r.type(key)
    if kind == "hash":
        h = r.hgetall(key)
        if name == ":stats:totals":  # durations: their buckets may differ, not their sum
            buckets = [f for f in h if f.startswith("le:")]
            h["le"] = str(sum(int(h.pop(f)) for f in buckets))
        if "duration" in h:
            h["duration"] = "D"
        if "trail" in h:  # started, attempt, completed, duration, attempt
            parts = h["trail"].split(",")
            h["trail"] = ",".join("D" if i == 3 else p for i, p in enumerate(parts))
        return {f: _norm(v) for f, v in h.items()}
    if kind == "zset":
        scored = r.zrange(key, 0, -1, withscores=True)
        return sorted((m, "T" if s > 1e12 else s) for m, s in scored)
    if kind == "list":
        return [_norm(v) for v in r.lrange(key, 0, -1)]
    if kind == "set":
        return sorted(r.smembers(key))
    if name == ":stats:work-time":
        return "D"
    return _norm(str(r.get(key)))


def _jobs(claimed: list[Any]) -> list[Any]:
    return [(i, {f: _norm(v) for f, v in h.items() if f != "waited"}) for i, h in claimed]


def _state(r: redis.Redis, prefix: str) -> dict[str, Any]:
    """Every key under ``prefix`` (by its name after the prefix, minute counters without
    their minute) with its value, times and durations left out."""
    out = {}
    for key in keys_under(r, prefix, history=True):
        name = _TIME.sub("T", key[len(prefix) :])
        name = re.sub(r"^(:stats:\w+:)\d+$", r"\1M", name)
        out[name] = _value(r, key, name)
    return out


class Events:
    """The events of both prefixes' channels, read up to a mark published after the work."""

    def __init__(self, r: redis.Redis, *channels: str) -> None:
        self.r, self.channels = r, channels
        self.sub = r.pubsub(ignore_subscribe_messages=True)
        self.sub.subscribe(*channels)
        deadline = time.monotonic() + 10
        while self.r.pubsub_numsub(*channels) != [(c, 1) for c in channels]:
            assert time.monotonic() < deadline

    def taken(self) -> dict[str, list[str]]:
        got: dict[str, list[str]] = {c: [] for c in self.channels}
        for c in self.channels:
            self.r.publish(c, "mark")
        marks, deadline = 0, time.monotonic() + 10
        while marks < len(self.channels):
            assert time.monotonic() < deadline, got
            m = self.sub.get_message(timeout=1)
            if m is None:
                continue
            if m["data"] == "mark":
                marks += 1
            else:
                got[m["channel"]].append(_norm(m["data"]))
        self.sub.close()
        return {c: sorted(v) for c, v in got.items()}


@pytest.fixture
def twin(redis_url: str, prefix: str) -> Iterator[Queue]:
    """A second queue on a prefix of its own (in the same Cluster slot)."""
    q = Queue(redis_url, prefix=prefix + "b")
    yield q
    q.close()


def _claim_all(queue: Queue, worker: str, job_type: str, n: int) -> list[tuple[int, str]]:
    held = []
    for _ in range(n):
        got = queue.scripts.call(calls.claim(queue.keys, job_type, worker, LEASE))
        assert isinstance(got, tuple), got
        held.append((got[0], token(got)))
    return held


Setup = Callable[[Queue], list[tuple[int, str]]]


def _compare(
    queue: Queue,
    twin: Queue,
    r: redis.Redis,
    setup: Setup,
    results: Callable[[list[tuple[int, str]]], list[tuple[int, str, str]]],
    claim: tuple[str, int, int, list[str]] | None = None,
) -> tuple[Finished, list[calls.Reported], list[Any]]:
    """Run ``setup`` on both queues (the same jobs, ids and tokens: the jobs held by the
    worker), then on ``queue`` one complete_batch of ``results(held)`` with ``claim``, on
    ``twin`` a complete.lua call for each and then the claims one at a time; assert both
    prefixes end the same, with the same events. The batch's reply, the single calls'
    reports, and the jobs claimed one by one (then why they stopped)."""
    held = setup(queue)
    assert setup(twin) == held
    events = Events(r, queue.keys.events, twin.keys.events)
    done = results(held)
    batch = queue.scripts.call(calls.complete_batch(queue.keys, done, claim))
    singles = [
        twin.scripts.call(calls.complete(twin.keys, job_id, tok, result, None, tallied=True))
        for job_id, tok, result in done
    ]
    claimed: list[Any] = []
    if claim is not None:
        worker, lease_ms, n, types = claim
        while len(claimed) < n:
            got = twin.scripts.call(calls.claim(twin.keys, types, worker, lease_ms))
            claimed.append(got)
            if not isinstance(got, tuple):
                break
    seen = events.taken()
    assert seen[queue.keys.events] == seen[twin.keys.events]
    assert _state(r, queue.keys.prefix) == _state(r, twin.keys.prefix)
    assert [rep.outcome for rep in batch.reports] == [rep.outcome for rep in singles]
    assert [rep.tally is None for rep in batch.reports] == [rep.tally is None for rep in singles]
    assert all(rep.next_job is None for rep in batch.reports)
    if claim is not None:
        jobs = [c for c in claimed if isinstance(c, tuple)]
        why = None if len(jobs) == claim[2] else claimed[-1]
        assert _jobs(batch.jobs) == _jobs(jobs)
        assert batch.why == why
    return batch, singles, claimed


def _plain(n: int, take: int) -> Setup:
    def setup(q: Queue) -> list[tuple[int, str]]:
        for i in range(n):
            q.create_job("t", {"i": i}).save()
        return _claim_all(q, W, "t", take)

    return setup


def test_plain_completions_with_refused_tokens_end_as_single_ones_and_claim_the_next(
    queue: Queue, twin: Queue, r: redis.Redis
) -> None:
    def results(held: list[tuple[int, str]]) -> list[tuple[int, str, str]]:
        (a, ta), (b, _), (c, tc), (d, td) = held
        return [
            (a, ta, '{"a":1}'),
            (b, "no such token", "null"),  # refused: nothing written
            (c, tc, "[1,2]"),
            (a, ta, '"twice"'),  # completed already: refused
            (999, "x", "1"),  # no such job
            (d, td, "3"),
        ]

    batch, _, _ = _compare(queue, twin, r, _plain(7, 4), results, (W, LEASE, 2, ["t"]))
    outcomes = [rep.outcome for rep in batch.reports]
    assert outcomes == ["complete", "refused", "complete", "refused", "refused", "complete"]
    assert [rep.tally is not None for rep in batch.reports] == [1, 0, 1, 0, 0, 1]
    assert len(batch.jobs) == 2 and batch.why is None
    assert queue.count("complete", "t") == 3 and queue.count("active", "t") == 3
    assert queue.get_job(batch.jobs[0][0]).state == "active"
    assert queue.get_job(3).result == [1, 2]
    clean(queue)
    clean(twin)


def test_plain_jobs_of_several_types_each_leave_and_enter_their_types_sets(
    queue: Queue, twin: Queue, r: redis.Redis
) -> None:
    def setup(q: Queue) -> list[tuple[int, str]]:
        for i in range(6):
            q.create_job("ab"[i % 2], {"i": i}).priority(i - 3).save()
        return _claim_all(q, W, "a", 3) + _claim_all(q, W, "b", 3)

    def results(held: list[tuple[int, str]]) -> list[tuple[int, str, str]]:
        return [(i, t, json.dumps(i)) for i, t in sorted(held)]  # the types interleaved

    batch, _, _ = _compare(queue, twin, r, setup, results)
    assert [rep.outcome for rep in batch.reports] == ["complete"] * 6
    assert queue.count("complete", "a") == queue.count("complete", "b") == 3
    assert queue.count("active") == 0
    assert r.zscore(queue.keys.type_state("b", "complete"), "01|6") == 2  # its priority
    clean(queue)


def test_one_completion_and_one_claim_end_as_complete_lua_with_its_claim(
    queue: Queue, twin: Queue, r: redis.Redis
) -> None:
    def results(held: list[tuple[int, str]]) -> list[tuple[int, str, str]]:
        return [(i, t, '"one"') for i, t in held]

    batch, _, _ = _compare(queue, twin, r, _plain(3, 1), results, (W, LEASE, 1, ["t"]))
    assert [rep.outcome for rep in batch.reports] == ["complete"]
    assert [i for i, _ in batch.jobs] == [2] and batch.why is None
    held = [(i, h["lease"]) for i, h in batch.jobs]
    batch, _, _ = _compare(queue, twin, r, lambda q: held, results, (W, LEASE, 1, ["t"]))
    assert [i for i, _ in batch.jobs] == [3] and batch.why is None
    done = queue.scripts.call(
        calls.complete_batch(queue.keys, [(3, "1", "1")], (W, LEASE, 1, ["t"]))
    )
    assert done.reports[0].outcome == "complete" and done.jobs == [] and done.why is None
    clean(queue)


def test_claims_stop_at_the_first_answer_without_a_job(
    queue: Queue, twin: Queue, r: redis.Redis
) -> None:
    def results(held: list[tuple[int, str]]) -> list[tuple[int, str, str]]:
        return [(i, t, "1") for i, t in held]

    # Fewer waiting than asked: all of them, and no reason.
    batch, _, _ = _compare(queue, twin, r, _plain(3, 2), results, (W, LEASE, 4, ["t"]))
    assert len(batch.jobs) == 1 and batch.why is None
    # The rest on ``queue`` alone: a paused type "p", and "a" and "b" with a job each.
    for job_type in ("p", "a", "b"):
        queue.create_job(job_type).save()
    queue.pause("p")
    # A paused type: why says so.
    for n in (1, 2):
        batch = queue.scripts.call(calls.complete_batch(queue.keys, [], (W, LEASE, n, ["p"])))
        assert batch.reports == [] and batch.jobs == [] and batch.why == PAUSED
    # Several types, in order: the first with jobs first, then the next.
    batch = queue.scripts.call(calls.complete_batch(queue.keys, [], (W, LEASE, 3, ["p", "a", "b"])))
    assert [queue.get_job(i).type for i, _ in batch.jobs] == ["a", "b"]
    assert batch.why == calls.Waits((PAUSED, None, None))


def test_jobs_with_features_complete_as_single_ones_beside_plain_ones(
    queue: Queue, twin: Queue, r: redis.Redis
) -> None:
    def setup(q: Queue) -> list[tuple[int, str]]:
        q.set_retention(complete={"count": 3})
        q.create_job("t", {"plain": 1}).save()
        q.create_job("t").remove_on_complete(True).save()
        awaited = q.create_job("t", {"awaited": 1}).save()
        q.create_job("u").depends_on(awaited).save()  # blocked until it completes
        q.create_job("t").unique("once").save()
        q.create_job("t").group("g").save()
        q.create_job("t").remove_on_complete({"count": 1}).save()
        q.create_job("t", {"plain": 2}).save()
        q.create_job("t", {"plain": 3}).save()
        held = _claim_all(q, W, "t", 8)
        q.create_job("r").save()
        q.limit("r", concurrency=2)
        return held + _claim_all(q, W, "r", 1)

    def results(held: list[tuple[int, str]]) -> list[tuple[int, str, str]]:
        return [(i, t, json.dumps({"id": i})) for i, t in held]

    batch, _, _ = _compare(queue, twin, r, setup, results, (W, LEASE, 3, ["u", "t"]))
    assert {rep.outcome for rep in batch.reports} == {"complete"}
    assert queue.get_job(4).state == "active"  # unblocked, then claimed
    assert r.exists(queue.keys.job(2)) == 0  # removeOnComplete
    assert queue.count("complete") == 3  # the queue's retention kept the last 3
    clean(queue)
    clean(twin)


def test_fan_out_runs_complete_in_a_batch_as_alone(
    queue: Queue, twin: Queue, r: redis.Redis
) -> None:
    def setup(q: Queue) -> list[tuple[int, str]]:
        q.create_job("t", {"plain": 1}).save()
        q.create_job("t").fan_out(2).save()
        q.create_job("t").fan_out(2).save()
        q.create_job("t", {"plain": 2}).save()
        held = _claim_all(q, W, "t", 4)
        (fan,) = _claim_all(q, W2, "t", 1)  # the second run of the first fan-out job
        ended = q.scripts.call(calls.complete(q.keys, fan[0], fan[1], '"w2"', None))
        assert ended.outcome == "complete"
        return held

    def results(held: list[tuple[int, str]]) -> list[tuple[int, str, str]]:
        done = [(i, t, json.dumps(i)) for i, t in held]
        return [*done, (held[1][0], held[1][1], '"again"')]  # the run is complete already

    batch, _, _ = _compare(queue, twin, r, setup, results)
    assert [rep.outcome for rep in batch.reports] == ["complete"] * 4 + ["refused"]
    assert [rep.tally is None for rep in batch.reports] == [False, True, True, False, True]
    job = queue.get_job(2)
    assert job.state == "complete" and job.result == {W: 2, W2: "w2"}
    assert queue.get_job(3).state == "active"  # one run of two done
    clean(queue)
    clean(twin)
    # A run completed in a batch whose claim finds nothing this worker may take: a wake-up
    # token stays for the job's open place, for the other workers (as complete.lua's claim).
    fan = queue.create_job("t").fan_out(3).save().id
    (mine,) = _claim_all(queue, W, "t", 1)
    _claim_all(queue, W2, "t", 1)
    assert mine[0] == fan
    done = queue.scripts.call(
        calls.complete_batch(queue.keys, [(fan, mine[1], "1")], (W, LEASE, 2, ["t"]))
    )
    assert done.reports[0].outcome == "complete" and done.jobs == []
    assert r.llen(queue.keys.tokens("t")) == 1


def test_a_batch_writes_each_set_once_with_every_member(queue: Queue, r: redis.Redis) -> None:
    held = _plain(16, 16)(queue)
    done = [(i, t, "1") for i, t in held]
    before = r.info("commandstats")
    queue.scripts.call(calls.complete_batch(queue.keys, done, None))
    after = r.info("commandstats")

    def calls_of(command: str) -> int:
        name = f"cmdstat_{command}"
        return int(after[name]["calls"]) - int(before.get(name, {}).get("calls", 0))

    assert calls_of("zrem") == 2 and calls_of("zadd") == 3  # no leases per job: see heartbeat.lua
    # Nobody listens on the events channel: a call with more than EVENTS_UNASKED events to
    # send asks first, and sends none (on a Cluster, where a listener may be on another node,
    # every one is sent).
    assert defaults.EVENTS_UNASKED < 16
    heard = 16 if queue.prefix.startswith("{") else 0
    assert calls_of("hset") == 16 and calls_of("publish") == heard
    assert queue.count("complete", "t") == 16 and r.zcard(queue.keys.leases) == 0
