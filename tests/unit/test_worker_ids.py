"""Worker ids: the rule a given one follows, and the made-up one. No Redis."""

from __future__ import annotations

import os
import re
import socket

import pytest

from kue_core import InvalidJob, Queue, WorkerIdTaken
from kue_core.features.pins import check_worker_id
from kue_core.worker.identity import generated_worker_id

#: Nothing listens here: a queue that tried to reach Redis would fail.
NOWHERE = "redis://127.0.0.1:1/0"


@pytest.mark.parametrize(
    "good", ["gpu-1", "a", "7", "web.eu-west:3@rack_2", "A" * 100, "host:123:0a1b2c3d"]
)
def test_a_worker_id_that_follows_the_rule_is_kept(good: str) -> None:
    assert check_worker_id(good) == good
    assert Queue(NOWHERE, "p", worker_id=good).worker_id == good


@pytest.mark.parametrize(
    "bad",
    ["", "bad id", "-gpu", ".gpu", "_gpu", "gpu/1", "gpu\n", "gpü", "gpu*", "A" * 101, 7, b"gpu"],
)
def test_a_worker_id_that_breaks_the_rule_is_refused(bad: object) -> None:
    rule = "a worker id must be 1 to 100 characters: letters, digits and . _ : @ -, starting"
    with pytest.raises(InvalidJob, match=re.escape(rule)):
        check_worker_id(bad)
    with pytest.raises(InvalidJob, match=re.escape(rule)):
        Queue(NOWHERE, "p", worker_id=bad)  # type: ignore[arg-type]


def test_a_made_up_id_is_known_before_any_worker_starts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    queue = Queue(NOWHERE, "p")
    host, pid, tail = queue.worker_id.split(":")
    assert (host, int(pid)) == (socket.gethostname(), os.getpid())
    assert re.fullmatch(r"[0-9a-f]{8}", tail)
    assert Queue(NOWHERE, "p").worker_id != queue.worker_id
    # A child forked after the queue was made gets an id of its own; a given id stays.
    given = Queue(NOWHERE, "p", worker_id="gpu-1")
    made_up = queue.worker_id
    monkeypatch.setattr("os.getpid", lambda: 4242)
    assert queue.worker_id.startswith(f"{socket.gethostname()}:4242:")
    assert queue.worker_id != made_up and queue.worker_id == queue.worker_id
    assert given.worker_id == "gpu-1"
    # A host name may break the rule: a made-up id is not checked against it.
    monkeypatch.setattr("socket.gethostname", lambda: "my host/ü")
    assert generated_worker_id().startswith("my host/ü:4242:")
    assert Queue(NOWHERE, "p").worker_id.startswith("my host/ü:")


def test_the_refusal_says_who_holds_the_id_and_until_when() -> None:
    error = WorkerIdTaken("gpu-1", "box:42", 1234, 30_000)
    assert str(error) == (
        "worker id 'gpu-1' is in use by box:42 (last heartbeat 1.2 s ago); it is free once "
        "that process stops, or 30 s after its last heartbeat"
    )
    assert (error.worker_id, error.holder, error.ago_ms, error.lease_ms) == (
        "gpu-1",
        "box:42",
        1234,
        30_000,
    )
    assert str(WorkerIdTaken("w", "box:42", 0, 0)).endswith("or once its registration expires")
