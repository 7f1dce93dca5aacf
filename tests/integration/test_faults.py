"""Connections dropped under the queue: saves and event listeners carry on."""

from __future__ import annotations

import redis

from kue_core import Queue
from tests.conftest import wait_for


def _kill_other_clients(r: redis.Redis) -> None:
    me = r.client_id()
    for c in r.client_list():
        if int(c["id"]) != me:
            r.client_kill_filter(_id=c["id"])


def test_save_after_the_server_dropped_the_connection(queue: Queue, r: redis.Redis) -> None:
    first = queue.create_job("t").save()
    _kill_other_clients(r)
    second = queue.create_job("t").save()  # no error: the stale connection is replaced
    assert second.id == first.id + 1  # type: ignore[operator]
    assert queue.count("inactive") == 2


def test_event_listener_resubscribes(queue: Queue, r: redis.Redis) -> None:
    heard: list[int] = []
    errors: list[Exception] = []
    queue.on("job enqueue", lambda jid, jtype: heard.append(jid))
    queue.on("error", errors.append)
    queue.create_job("t").save()
    wait_for(lambda: heard)
    _kill_other_clients(r)
    wait_for(lambda: errors)  # the listener reports the loss...
    wait_for(lambda: queue.events.listening)  # ...and subscribes again
    job = queue.create_job("t").save()
    wait_for(lambda: job.id in heard)
