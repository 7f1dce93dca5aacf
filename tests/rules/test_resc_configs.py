"""Resc's two documented configurations, verbatim (only the web service's host pointed at a
local server, and Redis given by the test): the documented tasks in the documented queues,
with the documented dedupe; and chains of work run by Resc-style workers through the rules.

Resc's lists have global names (``global/events``, ``trt/1/todo-queue``...), not under the kue
prefix: the tests delete them before and after (no other test uses these names).
"""

from __future__ import annotations

import signal
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis

from kue_core import Queue
from kue_rules import Config, Rules, Store, load
from tests.conftest import never, wait_for
from tests.rules.helpers import (
    RescWorker,
    WebService,
    counts_of,
    delete_lists,
    now_ms,
    resc_config,
    start_rules,
    strings,
    write_config,
)

pytestmark = pytest.mark.timeout(90)

RESC_LISTS = ("global/*", "trt/*", "acq/*")
#: 16-character product ids (the propagation rules take ``\w{16}``), all digits so that the
#: acquisition rule of the JSON configuration (``\d+``) takes them as well.
A, B, C, D = "1000000000000001", "1000000000000002", "1000000000000003", "1000000000000004"


@pytest.fixture
def resc_lists(r: redis.Redis) -> Iterator[None]:
    delete_lists(r, *RESC_LISTS)
    yield
    delete_lists(r, *RESC_LISTS)


@pytest.fixture
def run(queue: Queue, resc_lists: None) -> Iterator[Callable[[Config], Rules]]:
    """Start a configuration's watchers in this process (stopped at the end, before the
    lists are deleted)."""
    started: list[Rules] = []

    def start(config: Config) -> Rules:
        started.append(Rules(config, queue).start())
        return started[-1]

    yield start
    for rules in started:
        rules.stop()


def report(queue: Queue, watcher: str) -> dict[str, dict[str, int]]:
    return counts_of(Store(queue).report(now_ms()), watcher)


def test_the_hjson_configuration_makes_trt_tasks_deduped_by_their_set(
    tmp_path: Path,
    service: WebService,
    queue: Queue,
    r: redis.Redis,
    run: Callable[[Config], Rules],
) -> None:
    config = load(resc_config("resc_first.hjson", service, tmp_path), queue.prefix)
    assert config.redis_url == "redis://127.0.0.1/"  # as written; the test's Redis is used
    [w] = config.watchers
    assert (w.input, w.taken, w.failed) == ("global/events", "global/taken", "global/events/failed")
    run(config)
    rule = "TRT computation on data acquisition"

    r.lpush("global/events", "acq/1/abc")
    wait_for(lambda: strings(r, "trt/1/todo-queue") == ["trt/1/abc"])
    assert r.smembers("trt/1/todo-set") == {"trt/1/abc"}

    # The same event again while the task is in the set: no second task.
    r.lpush("global/events", "acq/1/abc")
    wait_for(lambda: report(queue, "global/events")[rule]["duplicates"] == 1)
    assert strings(r, "trt/1/todo-queue") == ["trt/1/abc"]

    # A worker takes it and removes it from the set: the same event queues it again.
    assert r.brpoplpush("trt/1/todo-queue", "trt/1/taken", 1) == "trt/1/abc"
    assert r.srem("trt/1/todo-set", "trt/1/abc") == 1
    r.lpush("global/events", "acq/1/abc", "acq/2/xyz", "nothing/to/see", "acq/3/no-dash")
    wait_for(lambda: report(queue, "global/events")[""]["events"] == 6)
    assert strings(r, "trt/1/todo-queue") == ["trt/1/abc"]
    assert strings(r, "trt/2/todo-queue") == ["trt/2/xyz"]
    assert not r.exists("trt/3/todo-queue")  # \w+ takes no '-'
    counts = report(queue, "global/events")
    assert counts[""] == {"events": 6, "replayed": 0, "unmatched": 2, "failed": 0}
    assert counts[rule] == {
        "matched": 4,
        "tasks": 3,
        "jobs": 0,
        "duplicates": 1,
        "fetch_errors": 0,
        "make_errors": 0,
    }
    assert r.llen("global/taken") == 0
    assert r.llen("global/events") == 0


def test_the_json_configuration_switches_queue_then_fetches_one_task_per_child(
    tmp_path: Path,
    service: WebService,
    queue: Queue,
    r: redis.Redis,
    run: Callable[[Config], Rules],
) -> None:
    config = load(resc_config("resc_second.json", service, tmp_path), queue.prefix)
    first, second = config.watchers
    assert (first.input, first.taken) == ("global/events", "global/taken")
    assert (second.input, second.taken) == ("global/to-propagate", "global/to-propagate/taken")
    service.children[A] = [
        {"processId": 7, "productId": B},
        {"processId": 8, "productId": C},
        {"processId": 7, "productId": D},
    ]
    service.hold.add(A)  # the first fetch waits: the event is seen in the default taken list
    run(config)

    r.lpush("global/events", f"acq/7/{A}")
    wait_for(lambda: strings(r, "trt/7/todo-queue") == [f"trt/7/{A}"])
    assert r.smembers("trt/7/todo-set") == {f"trt/7/{A}"}
    # acq/<16 digits> is not trt/...: only the first rule matched it; a trt event only the second.
    r.lpush("global/events", f"trt/7/{A}")
    assert service.held.wait(10), "the propagation watcher never called the web service"
    assert strings(r, "global/to-propagate/taken") == [f"trt/7/{A}"]
    assert r.llen("global/to-propagate") == 0
    service.release()
    wait_for(lambda: r.llen("trt/8/todo-queue") == 1 and r.llen("trt/7/todo-queue") == 3)
    assert strings(r, "trt/7/todo-queue") == [f"trt/7/{D}", f"trt/7/{B}", f"trt/7/{A}"]
    assert strings(r, "trt/8/todo-queue") == [f"trt/8/{C}"]
    assert r.smembers("trt/7/todo-set") == {f"trt/7/{A}", f"trt/7/{B}", f"trt/7/{D}"}
    assert r.smembers("trt/8/todo-set") == {f"trt/8/{C}"}
    wait_for(lambda: r.llen("global/to-propagate/taken") == 0)

    # The same propagation again: every child task is in its set already.
    r.lpush("global/events", f"trt/7/{A}")
    wait_for(lambda: report(queue, "global/to-propagate")[""]["events"] == 2)
    assert r.llen("trt/7/todo-queue") == 3 and r.llen("trt/8/todo-queue") == 1
    events, propagate = report(queue, "global/events"), report(queue, "global/to-propagate")
    assert events[""]["events"] == 3 and events[""]["unmatched"] == 0
    assert events["TRT computation on data acquisition"]["matched"] == 1
    assert events["TRT propagation to children : switch queue"]["matched"] == 2
    assert events["TRT propagation to children : switch queue"]["tasks"] == 2  # no set: no dedupe
    make_children = propagate["TRT propagation to children : make child tasks"]
    assert make_children["matched"] == 2
    assert (make_children["tasks"], make_children["duplicates"]) == (3, 3)
    assert service.requests[A] == 2
    # A short product id is no propagation: the switch rule's \w{16} does not take it.
    r.lpush("global/events", "trt/7/short")
    wait_for(lambda: report(queue, "global/events")[""]["unmatched"] == 1)
    assert never(lambda: r.llen("global/to-propagate") > 0, 0.3)


def test_every_rule_is_tried_on_every_event_in_order(
    tmp_path: Path, queue: Queue, r: redis.Redis, run: Callable[[Config], Rules]
) -> None:
    doc = {
        "watchers": [
            {
                "input_queue": "global/events",
                "rules": [
                    {"name": "all", "on": "^acq/", "make": {"queue": "acq/all"}},
                    {
                        "name": "by process",
                        "on": "^acq/(?P<p>\\d+)/",
                        "make": {"task": "seen ${input_task}", "queue": "acq/${p}"},
                    },
                    {"name": "never", "on": "^zzz", "make": {"queue": "acq/never"}},
                    {"name": "all again", "on": "acq", "make": {"queue": "acq/all"}},
                ],
            }
        ]
    }
    run(load(write_config(doc, tmp_path), queue.prefix))
    r.lpush("global/events", "acq/5/x")
    wait_for(lambda: r.llen("acq/all") == 2)
    assert strings(r, "acq/all") == ["acq/5/x", "acq/5/x"]
    assert strings(r, "acq/5") == ["seen acq/5/x"]
    assert not r.exists("acq/never")
    counts = report(queue, "global/events")
    assert [counts[n]["matched"] for n in ("all", "by process", "never", "all again")] == [
        1,
        1,
        0,
        1,
    ]
    recent = Store(queue).report(now_ms())[0]["rules"][1]["recent"]
    assert recent[0]["event"] == "acq/5/x"
    assert recent[0]["tasks"] == [["acq/5", "seen acq/5/x", True]]


@pytest.mark.slow
def test_resc_workers_run_a_chain_acq_trt_children_through_kue_rules(
    tmp_path: Path,
    service: WebService,
    redis_url: str,
    prefix: str,
    r: redis.Redis,
    resc_lists: None,
) -> None:
    """Resc's JSON rules with the workers' ``global/done`` as the first watcher's input, run by
    the real ``kue rules``: an acquisition makes a TRT task; each TRT done is propagated to
    the product's children, whose TRT tasks are done in turn, down to the leaves."""
    resc = load(resc_config("resc_second.json", service, tmp_path))
    assert resc.watchers[0].input == "global/events"
    text = (tmp_path / "resc_second.json").read_text("utf-8")
    chain = tmp_path / "chain.json"
    chain.write_text(
        text.replace('"global/events"', '"global/done"').replace(
            '"global/taken"', '"global/done/taken"'
        ),
        "utf-8",
    )
    service.children[A] = [{"processId": 1, "productId": B}, {"processId": 2, "productId": C}]
    service.children[B] = [{"processId": 2, "productId": D}]
    workers = [
        RescWorker(
            redis_url, f"trt/{p}/todo-queue", f"trt/{p}/taken", f"trt/{p}/todo-set", "global/done"
        )
        for p in (1, 2)
    ]
    for w in workers:
        w.start()
    kue = start_rules(chain, redis_url, prefix, "--log-level", "info")
    try:
        r.lpush("global/done", f"acq/1/{A}")
        want = {f"trt/1/{A}", f"trt/1/{B}", f"trt/2/{C}", f"trt/2/{D}"}
        wait_for(lambda: {t for w in workers for t in w.did} == want, timeout=20)
        # Every done event went through the rules, and nothing is left anywhere.
        queue = Queue(redis_url, prefix=prefix)
        try:
            wait_for(lambda: report(queue, "global/to-propagate")[""]["events"] == 4, timeout=10)
            done = report(queue, "global/done")
            assert done[""]["events"] == 5  # the acquisition and the four TRTs done
            assert done["TRT propagation to children : switch queue"]["tasks"] == 4
            propagate = report(queue, "global/to-propagate")
            assert propagate["TRT propagation to children : make child tasks"]["tasks"] == 3
        finally:
            queue.close()
        assert sorted(t for w in workers for t in w.did) == sorted(want)  # each once
        for key in ("global/done", "global/done/taken", "global/to-propagate/taken"):
            assert r.llen(key) == 0, key
        for p in (1, 2):
            assert r.llen(f"trt/{p}/todo-queue") == 0 and r.llen(f"trt/{p}/taken") == 0
            assert r.scard(f"trt/{p}/todo-set") == 0  # the workers took every task out
        kue.wait_for_line(rf"event 'trt/1/{A}': task 'trt/2/{C}' to trt/2/todo-queue")
    finally:
        kue.send(signal.SIGTERM)
        code = kue.wait()
        for w in workers:
            w.stop()
    assert code == 0, kue.output
