"""``kue rules`` under faults, as real processes: SIGKILL mid-event (replayed at restart),
two processes on one configuration (one runs the watcher; a stalled one is taken over and
writes nothing when it wakes), a web service that keeps failing (the dead-letter list and
``--retry-failed``), and SIGTERM while a fetch is slow.

Every test's Resc lists have names of their own (``<prefix>/...``), deleted at the end.
"""

from __future__ import annotations

import contextlib
import signal
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from kue_core import Queue
from kue_rules import Store
from tests.cli.running import Kue
from tests.conftest import never, wait_for
from tests.rules.helpers import (
    WebService,
    counts_of,
    delete_lists,
    now_ms,
    start_rules,
    strings,
    write_config,
)

pytestmark = pytest.mark.timeout(90)

RULE = "children"


@pytest.fixture
def ns(r: redis.Redis) -> Iterator[str]:
    """A namespace for the test's Resc lists."""
    name = "rf" + uuid.uuid4().hex[:10]
    yield name
    delete_lists(r, f"{name}/*")


@pytest.fixture
def procs() -> Iterator[list[Kue]]:
    started: list[Kue] = []
    yield started
    for kue in started:
        with contextlib.suppress(ProcessLookupError):
            kue.send(signal.SIGCONT)
        kue.kill()


def config(
    ns: str, service: WebService, into: Path, dedupe: bool = True, **fetch: Any
) -> tuple[Path, str]:
    """A watcher on ``<ns>/events``: ``item/<id>`` fetches the item's children and makes
    ``made/<child>`` on ``<ns>/todo``; ``plain/<x>`` makes ``plain <x>`` (no fetch)."""
    make: dict[str, str] = {"task": "made/${child.productId}", "queue": f"{ns}/todo"}
    if dedupe:
        make["set"] = f"{ns}/set"
    url = f"http://{service.host}/products/${{id}}/direct-children"
    doc = {
        "watchers": [
            {
                "input_queue": f"{ns}/events",
                "rules": [
                    {
                        "name": RULE,
                        "on": "^item/(?P<id>\\w+)$",
                        "fetch": [{"url": url, "returns": "child", **fetch}],
                        "make": make,
                    },
                    {
                        "name": "plain",
                        "on": "^plain/(?P<x>\\w+)$",
                        "make": {"task": "plain ${x}", "queue": f"{ns}/todo"},
                    },
                ],
            }
        ]
    }
    return write_config(doc, into), f"{ns}/events"


def counts(redis_url: str, prefix: str, watcher: str) -> dict[str, dict[str, int]]:
    queue = Queue(redis_url, prefix=prefix)
    try:
        return counts_of(Store(queue).report(now_ms()), watcher)
    finally:
        queue.close()


def lock_holder(r: redis.Redis, prefix: str, watcher: str) -> int | None:
    """The pid of the process holding the watcher's lock (its token is host:pid:random)."""
    token = r.get(f"{prefix}:rules:lock:{watcher}")
    return int(str(token).split(":")[-2]) if token else None


def test_sigkill_mid_event_leaves_it_taken_and_the_restart_replays_it_once(
    tmp_path: Path,
    service: WebService,
    redis_url: str,
    prefix: str,
    r: redis.Redis,
    ns: str,
    procs: list[Kue],
) -> None:
    path, events = config(ns, service, tmp_path)
    service.children["a"] = [{"productId": "a1"}, {"productId": "a2"}]
    service.hold.add("a")
    first = start_rules(path, redis_url, prefix)
    procs.append(first)
    r.lpush(events, "item/a")
    assert service.held.wait(15), "kue rules never fetched"
    first.kill()  # SIGKILL while its fetch waits for the answer
    service.release()
    assert strings(r, f"{events}/taken") == ["item/a"]
    assert r.llen(f"{ns}/todo") == 0 and r.llen(events) == 0

    # Restarted: once the dead process's lock lapses, the event is replayed, its tasks made once.
    second = start_rules(path, redis_url, prefix)
    procs.append(second)
    wait_for(lambda: r.llen(f"{events}/taken") == 0, timeout=25)
    assert sorted(strings(r, f"{ns}/todo")) == ["made/a1", "made/a2"]
    got = counts(redis_url, prefix, events)
    assert got[""] == {"events": 1, "replayed": 1, "unmatched": 0, "failed": 0}
    assert got[RULE]["tasks"] == 2
    assert service.requests["a"] == 2  # the killed fetch and the replay's
    # The same event again: its tasks are in the set, nothing more is pushed.
    r.lpush(events, "item/a")
    wait_for(lambda: counts(redis_url, prefix, events)[RULE]["duplicates"] == 2)
    assert sorted(strings(r, f"{ns}/todo")) == ["made/a1", "made/a2"]


def test_two_processes_one_runs_the_watcher_a_stalled_one_is_taken_over_and_writes_nothing(
    tmp_path: Path,
    service: WebService,
    redis_url: str,
    prefix: str,
    r: redis.Redis,
    ns: str,
    procs: list[Kue],
) -> None:
    # No dedupe set: a task the stalled process wrote on waking would show as a second copy.
    path, events = config(ns, service, tmp_path, dedupe=False, timeout=60)
    for item in "abcdef":
        service.children[item] = [{"productId": f"{item}1"}]
    one = start_rules(path, redis_url, prefix)
    procs.append(one)
    wait_for(lambda: lock_holder(r, prefix, events) == one.proc.pid)
    two = start_rules(path, redis_url, prefix)
    procs.append(two)
    r.lpush(events, "item/a", "plain/p1")
    wait_for(lambda: sorted(strings(r, f"{ns}/todo")) == ["made/a1", "plain p1"])
    assert lock_holder(r, prefix, events) == one.proc.pid  # the second stands by

    # The first stalls mid-event (its fetch of b waits), past its lock's lease.
    service.hold.add("b")
    r.lpush(events, "item/b")
    assert service.held.wait(10)
    one.send(signal.SIGSTOP)
    wait_for(lambda: lock_holder(r, prefix, events) == two.proc.pid, timeout=25)
    # The second replays b (its fetch answered at once) and handles new events.
    r.lpush(events, "item/c", "plain/p2", "item/d")
    want = ["made/a1", "made/b1", "made/c1", "made/d1", "plain p1", "plain p2"]
    wait_for(lambda: sorted(strings(r, f"{ns}/todo")) == want, timeout=15)
    assert r.llen(f"{events}/taken") == 0

    # The first wakes with its answer for b: its make is refused, it writes nothing.
    service.release()
    one.send(signal.SIGCONT)
    one.wait_for_line(r"another process took it over; event 'item/b' is left to it")
    r.lpush(events, "item/e", "item/f")
    want += ["made/e1", "made/f1"]
    wait_for(lambda: sorted(strings(r, f"{ns}/todo")) == sorted(want), timeout=15)
    assert lock_holder(r, prefix, events) == two.proc.pid
    got = counts(redis_url, prefix, events)
    assert got[""]["events"] == 8, got  # a, p1, b (replayed), c, p2, d, e, f: each once
    assert got[""]["replayed"] == 1
    assert got[RULE]["tasks"] == 6
    assert sorted(strings(r, f"{ns}/todo")) == sorted(want)  # still no second copy
    assert r.llen(events) == 0 and r.llen(f"{events}/taken") == 0
    assert one.proc.poll() is None  # the first stands by, as a second would


def test_a_failing_web_service_sends_the_event_to_the_failed_list_and_retry_failed_replays_it(
    tmp_path: Path,
    service: WebService,
    redis_url: str,
    prefix: str,
    r: redis.Redis,
    ns: str,
    procs: list[Kue],
) -> None:
    path, events = config(ns, service, tmp_path, retries=2, backoff=20, timeout=5)
    service.status = 500
    service.children["a"] = [{"productId": "a1"}]
    kue = start_rules(path, redis_url, prefix)
    procs.append(kue)
    r.lpush(events, "item/a", "plain/p1")
    wait_for(lambda: strings(r, f"{ns}/todo") == ["plain p1"])  # the watcher went on
    assert strings(r, f"{events}/failed") == ["item/a"]
    assert service.requests["a"] == 3  # the first try and 2 retries
    assert r.llen(f"{events}/taken") == 0
    queue = Queue(redis_url, prefix=prefix)
    try:
        [watcher] = Store(queue).report(now_ms())
    finally:
        queue.close()
    [failure] = watcher["failures"]
    assert failure["event"] == "item/a" and failure["rule"] == RULE
    assert failure["kind"] == "fetch"
    assert "500" in failure["reason"] and "3 tries" in failure["reason"], failure
    got = counts(redis_url, prefix, events)
    assert got[""]["failed"] == 1 and got[""]["events"] == 2
    assert got[RULE]["fetch_errors"] == 1 and got[RULE]["tasks"] == 0
    assert watcher["lengths"] == {"input": 0, "taken": 0, "failed": 1}

    # The service is healthy again: --retry-failed puts the event back; the watcher handles it.
    service.status = None
    retry = Kue("rules", str(path), "--redis", redis_url, "--prefix", prefix, "--retry-failed")
    assert retry.wait() == 0, retry.output
    assert f"{events}: 1 failed events back on {events}" in retry.output
    wait_for(lambda: sorted(strings(r, f"{ns}/todo")) == ["made/a1", "plain p1"])
    assert r.llen(f"{events}/failed") == 0
    assert not r.hexists(f"{prefix}:rules:failures", f"{events}\nitem/a")
    got = counts(redis_url, prefix, events)
    assert got[""]["events"] == 3 and got[RULE]["tasks"] == 1


@pytest.mark.parametrize("answered", [True, False], ids=["answered", "never-answered"])
def test_sigterm_while_a_fetch_is_slow_exits_cleanly_with_the_event_handled_or_taken(
    tmp_path: Path,
    service: WebService,
    redis_url: str,
    prefix: str,
    r: redis.Redis,
    ns: str,
    procs: list[Kue],
    answered: bool,
) -> None:
    # A fetch that times out after 1 s and would be tried again after 1 s (when never answered).
    path, events = config(ns, service, tmp_path, timeout=1 if not answered else 30, backoff=1000)
    service.children["a"] = [{"productId": "a1"}, {"productId": "a2"}]
    service.hold.add("a")
    kue = start_rules(path, redis_url, prefix)
    procs.append(kue)
    r.lpush(events, "item/a")
    assert service.held.wait(15)
    kue.send(signal.SIGTERM)
    kue.wait_for_line(r"SIGTERM: stopping after the events being handled")
    if answered:
        service.release()
    assert kue.wait(30) == 0, kue.output
    todo, taken = sorted(strings(r, f"{ns}/todo")), strings(r, f"{events}/taken")
    if answered:  # it finished the event it had
        assert (todo, taken) == (["made/a1", "made/a2"], []), kue.output
    else:  # it left it taken, for the next start
        assert (todo, taken) == ([], ["item/a"]), kue.output
    assert r.llen(events) == 0 and r.llen(f"{events}/failed") == 0
    assert not r.exists(f"{prefix}:rules:lock:{events}")  # given up: a restart takes it at once
    if not answered:
        again = start_rules(path, redis_url, prefix)
        procs.append(again)
        wait_for(lambda: sorted(strings(r, f"{ns}/todo")) == ["made/a1", "made/a2"], timeout=10)
        assert r.llen(f"{events}/taken") == 0


def test_a_stalled_process_leaves_the_new_holders_copy_of_an_event_alone(
    tmp_path: Path,
    service: WebService,
    redis_url: str,
    prefix: str,
    r: redis.Redis,
    ns: str,
    procs: list[Kue],
) -> None:
    """The same event twice (Resc's events repeat: that is what sets are for): the stalled
    process had the first copy, the new holder replays it and is handling the second copy
    when the stalled one wakes. The event was pushed twice: two tasks (no set), not three."""
    path, events = config(ns, service, tmp_path, dedupe=False, timeout=60)
    service.children["x"] = [{"productId": "x1"}]
    first_arrived, first_gate = service.hold_request("x", 1)  # the stalled process's fetch
    third_arrived, third_gate = service.hold_request("x", 3)  # the new holder's second copy
    one = start_rules(path, redis_url, prefix)
    procs.append(one)
    wait_for(lambda: lock_holder(r, prefix, events) == one.proc.pid)
    two = start_rules(path, redis_url, prefix)
    procs.append(two)
    r.lpush(events, "item/x")
    assert first_arrived.wait(10)
    one.send(signal.SIGSTOP)
    wait_for(lambda: lock_holder(r, prefix, events) == two.proc.pid, timeout=25)
    wait_for(lambda: strings(r, f"{ns}/todo") == ["made/x1"])  # the replay (request 2)
    r.lpush(events, "item/x")  # the same event again: the new holder takes it (request 3)
    assert third_arrived.wait(10)
    assert strings(r, f"{events}/taken") == ["item/x"]  # the new holder's copy, being handled

    first_gate.set()
    one.send(signal.SIGCONT)
    one.wait_for_line(r"another process took it over; event 'item/x'")
    third_gate.set()
    wait_for(lambda: r.llen(f"{ns}/todo") >= 2 and r.llen(f"{events}/taken") == 0)
    never(lambda: r.llen(f"{ns}/todo") > 2 or r.llen(events) > 0, 1.0)
    got = counts(redis_url, prefix, events)
    assert (strings(r, f"{ns}/todo"), got[""]["events"]) == (["made/x1", "made/x1"], 2), (
        "two pushes of item/x made "
        f"{strings(r, f'{ns}/todo')} in {got[''].get('events')} handlings: the new holder replayed "
        "the stalled process's copy at take-over, so the stalled one, refused at make, must "
        "touch nothing (not the copy the new holder is handling); output of the stalled one:\n"
        + one.output
    )
