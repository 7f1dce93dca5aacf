"""kue rules beyond Resc: rules that make kue jobs, and watchers on kue job events (fed
through ``Queue.feed``), chained three steps deep with Python workers; a job event that
happens while no rules process runs is handled when one starts."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kue_core import Job, Queue, doctor
from kue_rules import Rules, Store, build, load
from tests.conftest import wait_for
from tests.rules.helpers import WebService

EXAMPLE = Path(__file__).resolve().parents[2] / "kue_example" / "rules.hjson"
pytestmark = pytest.mark.single_node  # Resc's lists are outside the queue's Cluster slot


def _config(events: str, prefix: str) -> dict[str, Any]:
    return {
        "prefix": prefix,
        "watchers": [
            {
                "input_queue": events,
                "rules": [
                    {
                        "name": "acquisition job",
                        "on": r"^acq/(?P<process_id>\d+)/(?P<product_id>\w+)$",
                        "make": {
                            "job": {
                                "type": "acq",
                                "data": {
                                    "process": "${process_id}",
                                    "product": "${product_id}",
                                    "title": "acquire ${product_id}",
                                },
                                "priority": "high",
                                "attempts": 2,
                                "backoff": {"type": "fixed", "delay": 10},
                            }
                        },
                    }
                ],
            },
            {
                "input_events": {"type": "acq", "event": "complete"},
                "rules": [
                    {
                        "name": "TRT of an acquisition",
                        "make": {
                            "job": {
                                "type": "trt",
                                "data": {
                                    "product": "${data.product}",
                                    "frames": "${result.frames}",
                                },
                                "unique": "trt-${data.product}",
                            }
                        },
                    }
                ],
            },
            {
                "input_events": {"type": "trt", "event": "complete"},
                "rules": [
                    {
                        "name": "propagate to children",
                        "on": "^trt/",
                        "make": {
                            "job": {
                                "type": "propagate",
                                "data": {"from": "${input_task}", "children": "${result.children}"},
                                "delay": 1,
                            }
                        },
                    }
                ],
            },
        ],
    }


@pytest.fixture
def events() -> Iterator[str]:
    name = f"events-{uuid.uuid4().hex[:8]}"
    yield name


def _handlers(queue: Queue, seen: list[tuple[str, Any]]) -> None:
    lock = threading.Lock()

    def acq(job: Job) -> dict[str, Any]:
        with lock:
            seen.append(("acq", job.data))
        return {"frames": len(job.data["product"])}

    def trt(job: Job) -> dict[str, Any]:
        with lock:
            seen.append(("trt", job.data))
        return {"children": [job.data["product"] + "-a", job.data["product"] + "-b"]}

    def propagate(job: Job) -> dict[str, Any]:
        with lock:
            seen.append(("propagate", job.data))
        return {"done": len(job.data["children"])}

    queue.process("acq", 2, acq)
    queue.process("trt", 2, trt)
    queue.process("propagate", 2, propagate)


def test_a_chain_of_jobs_three_steps_deep(queue: Queue, r: Any, events: str) -> None:
    config = build(_config(events, queue.prefix))
    rules = Rules(config, queue).start()
    seen: list[tuple[str, Any]] = []
    _handlers(queue, seen)
    try:
        for e in ("acq/7/alpha", "acq/7/beta", "acq/8/alpha", "not-an-acq"):
            r.lpush(events, e)
        feeds = [queue.keys.feed("complete", t) for t in ("acq", "trt")]
        feeds += [queue.keys.feed_taken("complete", t) for t in ("acq", "trt")]

        def settled() -> bool:
            done = queue.count("complete", "acq") == 3 and queue.count("complete", "trt") >= 2
            lists = sum(r.llen(k) for k in [events, f"{events}/taken", *feeds])
            return (
                done
                and not lists
                and queue.count("complete", "propagate") == queue.count("complete", "trt")
            )

        assert wait_for(settled, timeout=20), seen
    finally:
        rules.stop()
    acqs = sorted(d["product"] for kind, d in seen if kind == "acq")
    assert acqs == ["alpha", "alpha", "beta"]
    # Two acquisitions of alpha complete, but trt's unique key makes one TRT while it runs,
    # or a second one after it ended: every trt job got the product and the frames.
    trts = [d for kind, d in seen if kind == "trt"]
    assert {d["product"] for d in trts} == {"alpha", "beta"}
    assert all(d["frames"] == len(d["product"]) for d in trts)
    props = [d for kind, d in seen if kind == "propagate"]
    assert len(props) == len(trts)
    for d in props:
        assert d["from"].startswith("trt/")
        assert d["children"] in (["alpha-a", "alpha-b"], ["beta-a", "beta-b"])
    acq_job = queue.get_jobs(queue.ids("complete", "acq"))[0]
    assert acq_job.priority() == queue.create_job("x").priority("high").priority()
    report = {w["label"]: w for w in Store(queue).report(0)}
    first = report[events]
    assert first["counts"]["events"] == 4 and first["counts"]["unmatched"] == 1
    assert first["rules"][0]["counts"]["jobs"] == 3
    second = report["complete of acq"]
    made = second["rules"][0]["counts"]
    assert made["matched"] == 3 and made["jobs"] + made["duplicates"] == 3
    assert report["complete of trt"]["rules"][0]["counts"]["jobs"] == len(trts)
    assert not doctor.check(queue).findings


def test_job_events_while_no_rules_process_runs_are_kept(queue: Queue, r: Any, events: str) -> None:
    config = build(_config(events, queue.prefix))
    Rules(config, queue).start().stop()  # starts the feeds, then nobody reads them
    seen: list[tuple[str, Any]] = []
    _handlers(queue, seen)
    queue.create_job("acq", {"process": "1", "product": "gamma"}).save()
    assert wait_for(lambda: r.llen(queue.keys.feed("complete", "acq")) == 1)
    assert queue.count("complete", "trt") == 0
    rules = Rules(config, queue).start()
    try:
        assert wait_for(lambda: queue.count("complete", "propagate") == 1, timeout=20), seen
    finally:
        rules.stop()
    assert [d["product"] for kind, d in seen if kind == "trt"] == ["gamma"]


def test_a_job_gone_before_its_event_is_handled_goes_to_the_failed_list(
    queue: Queue, r: Any, events: str
) -> None:
    config = build(_config(events, queue.prefix))
    Rules(config, queue).start().stop()
    job = queue.create_job("acq", {"product": "x"}).save()
    queue.process("acq", lambda j: {"frames": 1})
    assert wait_for(lambda: r.llen(queue.keys.feed("complete", "acq")) == 1)
    queue.remove(job.id)
    rules = Rules(config, queue).start()
    failed = queue.keys.feed_failed("complete", "acq")
    try:
        assert wait_for(lambda: r.llen(failed) == 1)
    finally:
        rules.stop()
    assert r.lrange(failed, 0, -1) == [f"acq/{job.id}"]
    (w,) = [w for w in Store(queue).report(0) if w["label"] == "complete of acq"]
    assert w["failures"][0]["reason"] == f"job {job.id} no longer exists"
    assert queue.count("inactive", "trt") == 0


def test_the_example_configuration_runs(queue: Queue, r: Any) -> None:
    config = load(EXAMPLE, prefix=queue.prefix)
    rules = Rules(config, queue).start()
    try:
        r.lpush("signups", "signup/ada", "signup/ada")
        assert wait_for(lambda: not r.llen("signups") and not r.llen("signups/taken"))
        queue.create_job("video", {"file": "a.mov"}).save()
        queue.process("video", lambda job: {"output": "a.mp4"})
        assert wait_for(lambda: queue.count("inactive", "email") == 2)
        assert r.lrange("audit/todo", 0, -1) == ["audit/ada"]  # the second one: in the set
    finally:
        rules.stop()
        r.delete("signups", "signups/taken", "audit/todo", "audit/todo-set")
    mails = queue.get_jobs(queue.ids("inactive", "email"))
    # The second signup of ada found the first welcome mail holding its unique key.
    assert sorted(m.data["title"] for m in mails) == ["a.mp4 is ready", "welcome ada"]


def test_a_job_that_cannot_be_saved_sends_its_event_to_failed_and_the_watcher_goes_on(
    queue: Queue, r: Any, events: str
) -> None:
    service = WebService()  # its answer for "bad" holds a NaN: no job can store it
    service.children["bad"] = [{"v": float("nan")}]
    service.children["good"] = [{"v": 1}]
    rule = {
        "name": "child job",
        "on": r"^p/(?P<id>\w+)$",
        "fetch": [
            {"url": f"http://{service.host}/products/${{id}}/direct-children", "returns": "c"}
        ],
        "make": {"job": {"type": "child", "data": {"c": "${c}"}}},
    }
    config = build({"prefix": queue.prefix, "watchers": [{"input_queue": events, "rules": [rule]}]})
    rules = Rules(config, queue).start()
    try:
        r.lpush(events, "p/bad", "p/good")
        assert wait_for(
            lambda: queue.count("inactive", "child") == 1 and r.llen(f"{events}/failed")
        )
    finally:
        rules.stop()
        service.close()
        r.delete(events, f"{events}/taken", f"{events}/failed")
    assert queue.get_jobs(queue.ids("inactive", "child"))[0].data == {"c": {"v": 1}}
    (w,) = Store(queue).report(0)
    assert w["failures"][0]["event"] == "p/bad"
    assert w["failures"][0]["rule"] == "child job"
    assert "JSON" in w["failures"][0]["reason"], w["failures"]
    assert w["counts"]["failed"] == 1 and w["counts"]["events"] == 2
