"""Events: blinker signals fed by <prefix>:events, in one process and across processes."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading

import pytest

from kue_core import EVENTS, InvalidJob, Queue
from tests.conftest import wait_for


def _run(redis_url: str, prefix: str, code: str) -> None:
    """Run ``code`` in another Python process with ``queue`` bound to the same Redis/prefix."""
    script = f"from kue_core import Queue\nqueue = Queue({redis_url!r}, prefix={prefix!r})\n"
    script += textwrap.dedent(code)
    subprocess.run([sys.executable, "-c", script], check=True, timeout=30)


def test_job_and_queue_level_signals(queue: Queue) -> None:
    heard: list[tuple] = []
    queue.on("job enqueue", lambda jid, jtype: heard.append(("queue enqueue", jid, jtype)))
    queue.on(
        "job progress", lambda jid, pct, data: heard.append(("queue progress", jid, pct, data))
    )
    job = queue.create_job("t")
    job.on("enqueue", lambda jtype: heard.append(("job enqueue", jtype)))
    job.save()
    job.on("progress", lambda pct, data: heard.append(("job progress", pct, data)))
    job.progress(1, 2, {"k": "v"})
    wait_for(lambda: len(heard) >= 3)
    assert ("queue enqueue", job.id, "t") in heard
    assert ("queue progress", job.id, 50, {"k": "v"}) in heard
    assert ("job progress", 50, {"k": "v"}) in heard


def test_job_receivers_hear_only_their_job(queue: Queue) -> None:
    a, b = queue.create_job("t").save(), queue.create_job("t").save()
    heard: list[int] = []
    a.on("progress", lambda pct, data: heard.append(pct))
    b.progress(1, 4)
    a.progress(3, 4)
    wait_for(lambda: heard)
    assert heard == [75]


def test_final_event_drops_job_receivers(queue: Queue) -> None:
    job = queue.create_job("t").save()
    removed = threading.Event()
    job.on("remove", lambda jtype: removed.set())
    job.remove()
    assert removed.wait(5)
    wait_for(lambda: job.id not in queue.events._per_job)


def test_unknown_event_names_are_refused(queue: Queue) -> None:
    with pytest.raises(InvalidJob, match="event"):
        queue.on("job exploded", print)
    with pytest.raises(InvalidJob, match="event"):
        queue.create_job("t").on("exploded", print)
    assert "failed attempt" in EVENTS


def test_a_raising_receiver_does_not_stop_the_listener(queue: Queue) -> None:
    heard: list[int] = []

    def bad(jid: int, jtype: str) -> None:
        raise RuntimeError("boom")

    queue.on("job enqueue", bad)
    queue.on("job enqueue", lambda jid, jtype: heard.append(jid))
    first, second = queue.create_job("t").save(), queue.create_job("t").save()
    wait_for(lambda: len(heard) == 2)
    assert heard == [first.id, second.id]


def test_off_stops_a_receiver(queue: Queue) -> None:
    heard: list[int] = []
    fn = heard.append
    queue.on("job enqueue", lambda jid, jtype: fn(jid))
    marker = lambda jid, jtype: heard.append(-1)  # noqa: E731
    queue.on("job enqueue", marker)
    queue.off("job enqueue", marker)
    job = queue.create_job("t").save()
    wait_for(lambda: heard)
    assert heard == [job.id]


def test_events_cross_processes(queue: Queue, redis_url: str, prefix: str) -> None:
    """A change made in another process reaches this process's job and queue receivers."""
    job = queue.create_job("video").save()
    heard: list[tuple] = []
    done = threading.Event()
    job.on("progress", lambda pct, data: heard.append(("progress", pct, data)))
    queue.on("job enqueue", lambda jid, jtype: heard.append(("enqueue", jid, jtype)))
    queue.on("job remove", lambda jid, jtype: (heard.append(("remove", jid, jtype)), done.set()))
    _run(
        redis_url,
        prefix,
        f"""
        job = queue.get_job({job.id})
        job.progress(2, 4, {{"frame": 12}})
        other = queue.create_job("email").save()
        job.remove()
    """,
    )
    assert done.wait(10)
    assert heard[0] == ("progress", 50, {"frame": 12})
    assert heard[1][0] == "enqueue" and heard[1][2] == "email"
    assert heard[2] == ("remove", job.id, "video")


def test_a_message_from_node_kue_is_understood(queue: Queue, r) -> None:  # type: ignore[no-untyped-def]
    """Kue publishes ids as numbers or strings; both reach the receivers."""
    heard: list[tuple] = []
    queue.on("job complete", lambda jid, result: heard.append((jid, result)))
    r.publish(queue.keys.events, '{"id":"12","event":"complete","args":["complete",{"ok":true}]}')
    r.publish(queue.keys.events, "not json")
    r.publish(queue.keys.events, '{"id":13,"event":"complete","args":["complete",null]}')
    wait_for(lambda: len(heard) == 2)
    assert heard == [(12, {"ok": True}), (13, None)]


def test_node_kue_workers_extra_null_arguments_are_dropped(queue: Queue, r) -> None:  # type: ignore[no-untyped-def]
    """Kue's workers publish two arguments whatever the event, the unused one as null
    (``["complete", result, null]``); receivers get the event's own arguments, and a missing
    one as None."""
    heard: list[tuple] = []
    queue.on("job complete", lambda jid, result: heard.append(("complete", jid, result)))
    queue.on("job start", lambda jid, jtype: heard.append(("start", jid, jtype)))
    queue.on("job progress", lambda jid, pct, data: heard.append(("progress", jid, pct, data)))
    queue.on("job promotion", lambda jid: heard.append(("promotion", jid)))
    messages = [
        '{"id":5,"event":"start","args":["start","email",null]}',
        '{"id":5,"event":"progress","args":["progress",50]}',
        '{"id":5,"event":"promotion","args":["promotion",null]}',
        '{"id":5,"event":"complete","args":["complete",{"ok":true},null]}',
    ]
    for message in messages:
        r.publish(queue.keys.events, message)
    wait_for(lambda: len(heard) == 4)
    assert heard == [
        ("start", 5, "email"),
        ("progress", 5, 50, None),
        ("promotion", 5),
        ("complete", 5, {"ok": True}),
    ]
