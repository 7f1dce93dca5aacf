"""Connections dropped under the queue: saves and event listeners carry on."""

from __future__ import annotations

import pytest
import redis

from kue_core import Queue
from kue_core.connection import from_url
from tests.conftest import own_clients, wait_for


def _kill_other_clients(r: redis.Redis) -> None:
    for c in own_clients(r):
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


@pytest.mark.single_node
def test_a_call_redis_does_not_answer_in_time_times_out(
    redis_url: str, prefix: str, r: redis.Redis
) -> None:
    """The thread's own connection keeps its socket timeout in the kernel (a poll() before
    each read would let the interpreter's lock go): a read the timeout ends raises
    redis.TimeoutError all the same, and the next call, once Redis answers, goes through."""
    client = from_url(redis_url, socket_timeout=0.3)
    q = Queue(prefix=prefix, client=client)
    try:
        q.create_job("t").save()  # the thread's connection, now with the kernel's timeout
        r.execute_command("CLIENT", "PAUSE", 1500, "ALL")  # Redis answers no one for 1.5 s
        with pytest.raises(redis.TimeoutError):  # not an answer 1.5 s later
            q.create_job("t").save()
        wait_for(lambda: r.ping())  # the pause is over
        q.create_job("t").save()
        assert q.count("inactive") >= 2  # the save that timed out may have run once Redis woke
    finally:
        q.close()
