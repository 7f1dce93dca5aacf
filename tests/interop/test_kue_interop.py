"""kue_core beside the real Node Kue 0.11.6, on one Redis and one key prefix.

Each test runs real processes: Node Kue (``node/kue_driver.js``, started by the ``node_kue``
fixture) and kue_core in this process. What one side writes, the other reads through its own
public API: Kue's ``Job.get``, ``Job.log``, job and queue events and JSON API on the Node
side; ``Queue.get_job``, ``get_log``, ``on`` and workers on the Python side.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import threading
import urllib.request
from collections.abc import Callable
from typing import Any

import pytest

from kue_core import Job, JobNotFound, Queue, WaitForSignal, defaults, doctor
from kue_core.store import calls
from tests.conftest import finish, wait_for
from tests.interop.conftest import REPLY_TIMEOUT, NodeKue

#: The time in front of a line written by kue_core's job.log (see kue_core.jobs.log_lines).
STAMP = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z"

if shutil.which("node") is None or shutil.which("npm") is None:
    pytest.skip(
        "Node.js is not installed: the Kue interoperability tests need node and npm",
        allow_module_level=True,
    )

# Installing kue (once per session, when missing) and starting Node take their own bounded
# time in the fixtures; the test bodies get the suite's usual minute.
pytestmark = pytest.mark.timeout(60, func_only=True)

StartKue = Callable[[], NodeKue]


def _get(port: int, path: str) -> Any:
    """GET one of Kue's JSON routes; the decoded body."""
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}{path}", headers={"Accept": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=REPLY_TIMEOUT) as response:
        assert response.status == 200
        return json.loads(response.read())


# -- Node Kue produces, Python works ---------------------------------------------------------
def test_a_python_worker_runs_a_job_node_kue_created(queue: Queue, node_kue: StartKue) -> None:
    kue = node_kue()
    data = {"to": "a@example.com", "title": "bienvenue, café ✓"}
    job_id = kue.request("create", type="email", data=data, priority="high", attempts=2)["id"]

    # kue_core reads the hash Kue wrote.
    saved = queue.get_job(job_id)
    assert (saved.type, saved.data, saved.priority(), saved.attempts()) == ("email", data, -10, 2)
    assert saved.state == "inactive"
    kue.event("enqueue", job_id)  # Kue's own event is out before kue_core's begin

    release = threading.Event()

    def send(job: Job) -> dict[str, Any]:
        job.log("sending to %s", job.data["to"])
        job.progress(1, 2, {"stage": "half"})  # once Kue hears this, the log line is there
        release.wait(REPLY_TIMEOUT)  # until Kue has looked at the running job
        return {"sent": job.data["to"]}

    queue.process("email", 1, send)
    try:
        # Kue's own job.on('progress') fires for kue_core's progress event ...
        assert kue.event("progress", job_id)["args"] == [50, {"stage": "half"}]
        # ... and kue.Job.get / kue.Job.log show the running job as Kue would.
        running = kue.request("get", id=job_id)["job"]
        assert running["state"] == "active"
        assert running["progress"] == "50" and running["progress_data"] == {"stage": "half"}
        assert f":{os.getpid()}:" in running["workerId"]
        # Kue's log is a list of strings: each line carries its time and attempt in front.
        (line,) = kue.request("log", id=job_id)["lines"]
        assert re.fullmatch(rf"\[{STAMP} attempt 1\] sending to a@example\.com", line), line
    finally:
        release.set()

    assert kue.event("complete", job_id)["args"] == [{"sent": "a@example.com"}]
    done = kue.request("get", id=job_id)["job"]
    assert done["state"] == "complete"
    assert done["result"] == {"sent": "a@example.com"}
    assert done["progress"] == "100" and done["progress_data"] == {"stage": "half"}
    assert done["attempts"] == {"made": 1, "remaining": 1, "max": 2}
    assert int(done["duration"]) >= 0 and int(done["started_at"]) >= int(done["created_at"])
    # Every event Kue's job object gave, in order: its own enqueue, then kue_core's.
    assert kue.events(job_id) == [
        ("enqueue", ["email"]),
        ("start", ["email"]),
        ("progress", [50, {"stage": "half"}]),
        ("complete", [{"sent": "a@example.com"}]),
    ]


def test_node_kue_hears_a_python_worker_retry_and_fail_a_job(
    queue: Queue, node_kue: StartKue
) -> None:
    producer, observer = node_kue(), node_kue()
    observer.request("listen")  # queue.on('job ...') in a process that created nothing
    ok = producer.request("create", type="sms", data={"n": 1})["id"]
    bad = producer.request("create", type="sms", data={"n": 2}, attempts=2)["id"]
    producer.event("enqueue", bad)

    def handler(job: Job) -> dict[str, int]:
        if job.data["n"] == 2:
            raise RuntimeError("no signal")
        return {"n": job.data["n"]}

    queue.process("sms", 1, handler)

    message = "RuntimeError: no signal"
    assert producer.event("complete", ok)["args"] == [{"n": 1}]
    assert producer.event("failed", bad)["args"] == [message]
    assert producer.events(bad) == [
        ("enqueue", ["sms"]),
        ("start", ["sms"]),
        ("error", [message]),
        ("failed attempt", [message, 1]),
        ("enqueue", ["sms"]),
        ("start", ["sms"]),
        ("error", [message]),
        ("failed", [message]),
    ]
    assert observer.event("job complete", ok, scope="queue")["args"] == [{"n": 1}]
    assert observer.event("job failed attempt", bad, scope="queue")["args"] == [message, 1]
    assert observer.event("job failed", bad, scope="queue")["args"] == [message]

    failed = producer.request("get", id=bad)["job"]
    assert failed["state"] == "failed"
    assert failed["attempts"] == {"made": 2, "remaining": 0, "max": 2}
    assert failed["error"].startswith(message) and "Traceback" in failed["error"]
    assert int(failed["failed_at"]) >= int(failed["created_at"])


def test_a_python_worker_promotes_a_delayed_job_node_kue_created(
    queue: Queue, node_kue: StartKue
) -> None:
    kue = node_kue()
    # The worker is idle first, its promotion timer asleep: nothing tells it of Kue's save.
    queue.process("reminder", 1, lambda job: {"reminded": job.data["at"]})
    job_id = kue.request("create", type="reminder", data={"at": "soon"}, delay=300)["id"]
    assert queue.get_job(job_id).state == "delayed"

    assert kue.event("complete", job_id)["args"] == [{"reminded": "soon"}]
    # Kue saves a delayed job silently; kue_core's promotion is what Kue's job hears first.
    assert kue.events(job_id) == [
        ("promotion", []),
        ("enqueue", ["reminder"]),
        ("start", ["reminder"]),
        ("complete", [{"reminded": "soon"}]),
    ]
    done = kue.request("get", id=job_id)["job"]
    assert done["state"] == "complete" and done["delay"] == "300"
    # Not early, and not much later than Kue's own one-second promotion timer would be.
    lag = int(done["started_at"]) - int(done["promote_at"])
    assert 0 <= lag < defaults.PROMOTE_MAX_WAIT * 1000 + 1000


# -- Python produces, Node Kue works ---------------------------------------------------------
def test_a_node_kue_worker_runs_a_job_created_in_python(queue: Queue, node_kue: StartKue) -> None:
    heard: list[tuple[Any, ...]] = []
    queue.on("job complete", lambda job_id, result: heard.append(("complete", job_id, result)))
    data = {"path": "/img/1.png", "title": "chat noir ✓"}
    job = queue.create_job("resize", data).priority("high").attempts(3)
    job.on("progress", lambda pct, extra: heard.append(("progress", pct, extra)))
    job.on("complete", lambda result: heard.append(("job complete", result)))
    job.save()
    assert job.id is not None

    kue = node_kue()
    result = {"by": "node", "width": 640}
    kue.request(
        "process",
        type="resize",
        progress=[3, 4, {"step": 3}],
        log=["resized %s", "/img/1.png"],
        result=result,
    )
    # Kue's worker got the job as kue_core saved it.
    started = kue.event("processing", job.id, scope="worker")["job"]
    assert (started["type"], started["data"], started["priority"]) == ("resize", data, -10)
    assert started["state"] == "active"
    assert started["attempts"] == {"made": 0, "remaining": 3, "max": 3}

    wait_for(lambda: ("complete", job.id, result) in heard and ("job complete", result) in heard)
    assert ("progress", 75, {"step": 3}) in heard
    done = queue.get_job(job.id)
    assert (done.state, done.result, done.progress()) == ("complete", result, 100)
    assert done.progress_data == {"step": 3}
    assert done.attempts_made == 1
    assert done.worker_id is not None and done.worker_id.startswith(f"kue:{socket.gethostname()}")
    assert done.duration is not None
    # Kue adds to the work time after it announces the completion.
    wait_for(lambda: queue.work_time() == done.duration)
    assert queue.get_log(job.id) == ["resized /img/1.png"]
    assert queue.counts() == {
        "inactive": 0,
        "active": 0,
        "complete": 1,
        "failed": 0,
        "delayed": 0,
        "blocked": 0,
        "pinned": 0,
        "suspended": 0,
    }
    assert queue.ids("complete", "resize") == [job.id]


def test_python_hears_a_node_kue_worker_retry_and_fail_a_job(
    queue: Queue, node_kue: StartKue
) -> None:
    heard: list[tuple[Any, ...]] = []
    queue.on("job failed attempt", lambda job_id, msg, n: heard.append(("attempt", job_id, msg, n)))
    queue.on("job failed", lambda job_id, msg: heard.append(("failed", job_id, msg)))
    job = queue.create_job("upload", {"file": "a.txt"}).attempts(2).save()
    assert job.id is not None

    node_kue().request("process", type="upload", fail="disk full")
    wait_for(lambda: ("failed", job.id, "disk full") in heard)
    assert ("attempt", job.id, "disk full", 1) in heard
    failed = queue.get_job(job.id)
    assert (failed.state, failed.attempts_made, failed.attempts()) == ("failed", 2, 2)
    assert failed.error is not None and failed.error.startswith("Error: disk full")
    assert queue.get_log(job.id) == ["Error: disk full", "Error: disk full"]  # Kue logs each
    assert queue.ids("failed", "upload") == [job.id]
    assert queue.counts("upload")["inactive"] == 0


def test_node_kue_promotes_runs_and_removes_a_delayed_job_created_in_python(
    queue: Queue, node_kue: StartKue
) -> None:
    heard: list[tuple[Any, ...]] = []
    for event in ("promotion", "enqueue", "start", "complete", "remove"):
        queue.on(f"job {event}", lambda job_id, *args, e=event: heard.append((e, job_id, *args)))
    job = queue.create_job("ping", {"n": 7}).delay(200).remove_on_complete(True).save()
    assert job.id is not None

    # No Python worker runs: Kue's own promotion timer (started by process()) moves the job.
    node_kue().request("process", type="ping", result={"pong": 7})
    wait_for(lambda: ("remove", job.id, "ping") in heard)
    assert heard == [
        ("promotion", job.id),
        ("enqueue", job.id, "ping"),
        ("start", job.id, "ping"),
        ("complete", job.id, {"pong": 7}),
        ("remove", job.id, "ping"),
    ]
    with pytest.raises(JobNotFound):
        queue.get_job(job.id)
    assert queue.counts() == {
        "inactive": 0,
        "active": 0,
        "complete": 0,
        "failed": 0,
        "delayed": 0,
        "blocked": 0,
        "pinned": 0,
        "suspended": 0,
    }
    assert queue.range(0, -1) == []


def test_jobs_node_kue_finished_are_kept_by_our_retention(queue: Queue, node_kue: StartKue) -> None:
    """Node Kue knows nothing of tags, the search index or retention: jobs it completes are
    taken in by the retention sweep of any Python process, and those past the count are removed
    whole (records included); Node Kue reads the tagged jobs as its own."""
    queue.set_retention(complete={"count": 2})
    jobs = [
        queue.create_job("resize", {"title": f"photo {i}"}).tags("album:7").save() for i in range(5)
    ]
    kue = node_kue()
    kue.request("process", type="resize", result={"ok": True})
    wait_for(lambda: queue.count("complete") == 5, timeout=30)
    assert queue.client.zcard(queue.keys.finished("complete")) == 0  # no script of ours ran
    found, removed = queue.scripts.call(calls.retain(queue.keys, defaults.SWEEP_LIMIT))
    assert (found, removed) == (5, 3)
    kept = sorted(queue.ids("complete"))
    assert len(kept) == 2
    assert sorted(queue.tagged("album:7")) == kept and queue.tags() == {"album:7": 2}
    assert sorted(queue.search("photo")) == kept
    assert kue.request("get", id=kept[0])["job"]["state"] == "complete"
    assert {j.id for j in jobs} >= set(kept)


def test_a_job_node_kue_completes_releases_its_dependents(queue: Queue, node_kue: StartKue) -> None:
    """Node Kue runs its own code, not our scripts: the dependencies sweep of any Python worker
    process finds the job complete within about a second and releases the job waiting for it,
    with the result Node Kue stored."""
    child = queue.create_job("resize", {"n": 1})
    parent = queue.flow(queue.create_job("report"), [child])
    assert parent.state == "blocked"
    ran: list[Any] = []
    queue.process("report", 1, lambda job: ran.append(job.children_results()))
    kue = node_kue()
    assert kue.request("get", id=parent.id)["job"]["state"] == "blocked"  # read as it is
    kue.request("process", type="resize", result={"by": "node"})
    wait_for(lambda: queue.get_job(child.id).state == "complete", timeout=30)  # type: ignore[arg-type]
    wait_for(lambda: ran, timeout=3)
    assert ran == [{child.id: {"by": "node"}}]
    history = queue.get_job(parent.id).history()  # type: ignore[arg-type]
    assert [e for e in history if e.get("unblocked")] == [history[1]]
    queue.shutdown()


# -- Kue's JSON API over jobs kue_core wrote ------------------------------------------------
def test_kue_json_api_lists_jobs_python_saved(queue: Queue, node_kue: StartKue) -> None:
    a = queue.create_job("email", {"title": "a"}).save()
    b = queue.create_job("email", {"title": "b"}).priority("high").save()
    c = queue.create_job("email", {"title": "c"}).priority("low").save()
    f = queue.create_job("email", {"title": "f"}).priority("critical").save()
    d = queue.create_job("email", {"title": "later"}).delay(60_000).save()
    s = (
        queue.create_job("sms", {"to": "+100"})
        .priority("medium")
        .attempts(4)
        .backoff({"type": "exponential", "delay": 1000})
        .save()
    )
    s.log("queued by %s", "python")
    assert finish(queue, "email", ok=False) == f.id  # claimed first: critical
    done_id = finish(queue, "sms", ok=True)
    assert done_id == s.id

    port = node_kue().request("serve")["port"]

    assert _get(port, "/stats") == {
        "inactiveCount": 3,
        "completeCount": 1,
        "activeCount": 0,
        "failedCount": 1,
        "delayedCount": 1,
        "workTime": queue.work_time(),
    }
    assert sorted(_get(port, "/job/types")) == ["email", "sms"]
    assert _get(port, "/jobs/email/inactive/stats") == {"count": 3}

    listed = _get(port, "/jobs/email/inactive/0..10/asc")
    assert [int(j["id"]) for j in listed] == [a.id, b.id, c.id]  # Kue sorts a window by id
    assert [(j["type"], j["data"]["title"], j["priority"], j["state"]) for j in listed] == [
        ("email", "a", 0, "inactive"),
        ("email", "b", -10, "inactive"),
        ("email", "c", 10, "inactive"),
    ]
    # The window is taken in priority order: its first job is the one a worker takes next.
    assert [int(j["id"]) for j in _get(port, "/jobs/email/inactive/0..0/asc")] == [b.id]
    assert [int(j["id"]) for j in _get(port, "/jobs/email/inactive/0..10/desc")] == [
        c.id,
        b.id,
        a.id,
    ]

    (delayed,) = _get(port, "/jobs/delayed/0..10/asc")
    assert (int(delayed["id"]), delayed["state"], delayed["delay"]) == (d.id, "delayed", "60000")
    assert int(delayed["promote_at"]) - int(delayed["created_at"]) == 60_000

    (failed,) = _get(port, "/jobs/failed/0..10/asc")
    assert (int(failed["id"]), failed["state"], failed["error"]) == (f.id, "failed", "boom\ntrace")
    assert failed["attempts"] == {"made": 1, "remaining": 0, "max": 1}

    sms = _get(port, f"/job/{s.id}")
    assert (sms["type"], sms["data"], sms["priority"]) == ("sms", {"to": "+100"}, -5)
    assert (sms["state"], sms["result"], sms["progress"]) == ("complete", {"ok": True}, "100")
    assert sms["attempts"] == {"made": 1, "remaining": 3, "max": 4}
    (line,) = _get(port, f"/job/{s.id}/log")  # written outside an attempt: its time only
    assert re.fullmatch(rf"\[{STAMP}\] queued by python", line), line
    assert [int(j["id"]) for j in _get(port, "/jobs/complete/0..10/asc")] == [s.id]


def test_the_doctor_leaves_a_job_a_node_kue_worker_runs_after_a_python_one_failed_it(
    queue: Queue, node_kue: StartKue
) -> None:
    """A job a Python worker failed once, retried, still carries that claim's fencing token
    when a Node Kue worker takes it (Kue writes its own workerId, and no lease): the doctor
    judges it as a Kue worker's job, by its last update, and repairs nothing while Node
    runs it."""
    job = queue.create_job("flaky", {"n": 1}).attempts(3).save()
    assert job.id is not None
    started, go = threading.Event(), threading.Event()

    def fail(j: Job) -> None:
        started.set()
        go.wait(30)
        raise RuntimeError("try again")

    queue.process("flaky", 1, fail)
    assert started.wait(30)
    workers = queue._workers
    assert workers is not None
    stopping = threading.Thread(target=queue.shutdown, args=(30,))
    stopping.start()  # the failure's report claims nothing more, and the job waits again
    wait_for(workers.state.stopping.is_set)
    go.set()
    stopping.join(30)
    assert queue.get_job(job.id).state == "inactive"
    assert queue.client.hget(queue.keys.job(job.id), "lease")  # our token stays on the job

    kue = node_kue()
    kue.request("process", type="flaky", hold=True)
    kue.event("processing", job.id, scope="worker")
    held = queue.get_job(job.id)
    assert held.state == "active" and (held.worker_id or "").startswith("kue:")
    report = doctor.check(queue)
    assert [f for f in report.findings if f.job_id == job.id] == []
    doctor.repair(queue, report.findings)
    assert queue.get_job(job.id).state == "active"
    kue.request("release", id=job.id, result={"ok": True})
    wait_for(lambda: queue.get_job(job.id).state == "complete")
    assert queue.get_job(job.id).result == {"ok": True}


def test_node_kue_sees_an_encrypted_jobs_payload_as_an_opaque_object(
    redis_url: str, prefix: str, node_kue: StartKue
) -> None:
    """docs/security.md: Kue's JSON API lists an encrypted queue's job, its data, result and
    log an envelope it does not read, never an error or the payload."""
    import base64

    key = f"k1:{base64.b64encode(bytes(range(32))).decode()}"
    with Queue(redis_url, prefix=prefix, encryption_keys=key) as q:
        job = q.create_job("email", {"to": "ada@example.com"}).save()
        done = q.create_job("sms", {"to": "+100"}).save()
        done.log("for %s", "+100")
        assert finish(q, "sms", ok=True) == done.id
    port = node_kue().request("serve")["port"]
    shown = _get(port, f"/job/{job.id}")
    assert (shown["type"], shown["state"], list(shown["data"])) == (
        "email",
        "inactive",
        ["kue:sealed"],
    )
    assert "ada@example.com" not in json.dumps(shown)
    (listed,) = _get(port, "/jobs/email/inactive/0..10/asc")
    assert listed["data"] == shown["data"]
    (line,) = _get(port, f"/job/{done.id}/log")
    assert "kue:sealed" in line and "+100" not in line


def test_node_kue_leaves_a_suspended_job_alone_until_its_signal(
    queue: Queue, node_kue: StartKue
) -> None:
    """A job suspended waiting for a signal (docs/signals.md) is in no set of Kue's states: a
    Node Kue worker of its type runs the jobs behind it and not it, and reads it as it is;
    once the signal resumes it, it waits inactive, where Node Kue's worker takes it too."""

    def handler(job: Job) -> Any:
        raise WaitForSignal("approval")

    waiting = queue.create_job("resize", {"n": 1}).save()
    queue.process("resize", 1, handler)
    wait_for(lambda: queue.get_job(waiting.id).state == "suspended")  # type: ignore[arg-type]
    queue.shutdown()
    other = queue.create_job("resize", {"n": 2}).save()
    kue = node_kue()
    assert kue.request("get", id=waiting.id)["job"]["state"] == "suspended"
    kue.request("process", type="resize", result={"by": "node"})
    wait_for(lambda: queue.get_job(other.id).state == "complete", timeout=30)  # type: ignore[arg-type]
    assert queue.get_job(waiting.id).state == "suspended"  # type: ignore[arg-type]
    assert queue.signal(waiting.id, "approval", "yes") == "resumed"  # type: ignore[arg-type]
    wait_for(lambda: queue.get_job(waiting.id).state == "complete", timeout=30)  # type: ignore[arg-type]
    assert queue.get_job(waiting.id).result == {"by": "node"}  # type: ignore[arg-type]
