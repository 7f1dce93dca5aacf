"""The command line as real processes: ``kue worker`` runs jobs and stops gracefully on
SIGTERM; ``kue example`` serves the dashboard while its jobs flow; ``kue dashboard`` serves
with the development server and with gunicorn."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import urllib.error
import urllib.request

import pytest

from kue_core import Queue
from tests.cli.running import Kue
from tests.conftest import free_port, wait_for

pytestmark = pytest.mark.timeout(120)


def get(url: str, timeout: float = 5) -> tuple[int, str, str]:
    """Status, content type and body of a GET (an HTTP error status too)."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            return resp.status, resp.headers["Content-Type"], resp.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.headers["Content-Type"], e.read().decode()


def request(method: str, url: str) -> int:
    req = urllib.request.Request(url, method=method)
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as e:
        return e.code


def worker(run: list[Kue], redis_url: str, prefix: str, handler: str, *args: str) -> Kue:
    kue = Kue(
        "worker", f"tests.cli.handlers:{handler}", "--redis", redis_url, "--prefix", prefix, *args
    )
    run.append(kue)
    kue.wait_for_line(r"worker pid \d+")
    return kue


# -- kue worker -------------------------------------------------------------------------------
def test_worker_runs_jobs_then_stops_on_sigterm(
    run: list[Kue], redis_url: str, prefix: str, queue: Queue
) -> None:
    kue = worker(run, redis_url, prefix, "echo", "--type", "double", "-n", "3")
    jobs = queue.save_many(queue.create_job("double", {"n": n}) for n in range(20))
    assert wait_for(lambda: queue.count("complete") == 20, timeout=20)
    for job in jobs:
        done = queue.get_job(job.id)
        assert done.result == {"twice": job.data["n"] * 2, "pid": kue.proc.pid}
    [info] = queue.workers()
    assert (info["pid"], info["types"]) == (kue.proc.pid, {"double": 3})

    kue.send(signal.SIGTERM)
    assert kue.wait() == 0, kue.output
    assert "SIGTERM: stopping" in kue.output and kue.err[-1].endswith("stopped")
    assert queue.workers() == []


def test_a_running_job_finishes_before_the_worker_exits(
    run: list[Kue], redis_url: str, prefix: str, queue: Queue
) -> None:
    kue = worker(run, redis_url, prefix, "sleepy", "--type", "nap")
    job = queue.create_job("nap", {"seconds": 1.5}).save()
    assert wait_for(lambda: queue.get_job(job.id).state == "active", timeout=10)
    kue.send(signal.SIGINT)  # Ctrl-C
    assert kue.wait() == 0, kue.output
    done = queue.get_job(job.id)
    assert (done.state, done.result) == ("complete", {"slept": 1.5})


def test_a_job_outliving_the_shutdown_timeout_goes_back_to_the_queue(
    run: list[Kue], redis_url: str, prefix: str, queue: Queue
) -> None:
    kue = worker(run, redis_url, prefix, "sleepy", "--type", "nap", "--shutdown-timeout", "0.2")
    job = queue.create_job("nap", {"seconds": 60}).attempts(2).save()
    # Its handler runs: a job is active from its claim, and one whose handler had not begun
    # within the 0.2 s (its slot held up under load) is run, not given back, and then left
    # active to its lease as the process exits.
    kue.wait_for_line(rf"^started job {job.id}$", timeout=10)
    kue.send(signal.SIGTERM)
    assert kue.wait(timeout=15) == 0, kue.output
    back = queue.get_job(job.id)
    assert (back.state, back.attempts_made) == ("inactive", 0)


def test_a_second_signal_exits_at_once_with_status_1(
    run: list[Kue], redis_url: str, prefix: str, queue: Queue
) -> None:
    kue = worker(run, redis_url, prefix, "sleepy", "--type", "nap")
    job = queue.create_job("nap", {"seconds": 60}).save()
    assert wait_for(lambda: queue.get_job(job.id).state == "active", timeout=10)
    kue.send(signal.SIGTERM)
    kue.wait_for_line("SIGTERM: stopping")
    kue.send(signal.SIGTERM)
    assert kue.wait(timeout=10) == 1
    assert "exiting now" in kue.output
    # Left to its lease: another worker gets it back when the lease expires.
    assert queue.get_job(job.id).state == "active"


def test_a_killed_workers_job_comes_back_after_its_lease(
    run: list[Kue], redis_url: str, prefix: str, queue: Queue
) -> None:
    """``--lease`` sets how soon a job whose worker died goes back to the queue (here 1 s,
    not the default 30 s), and ``--stall-limit`` how often that may happen before it fails."""
    args = ("--type", "nap", "--lease", "1", "--stall-limit", "0")
    first = worker(run, redis_url, prefix, "sleepy", *args)
    job = queue.create_job("nap", {"seconds": 60}).attempts(3).save()
    # Registered by its first heartbeat, which may come just after the claim.
    assert wait_for(lambda: queue.get_job(job.id).state == "active" and queue.workers(), 10)
    [info] = queue.workers()
    assert (info["pid"], info["lease_ms"]) == (first.proc.pid, 1000)
    first.send(signal.SIGKILL)
    first.wait()
    worker(run, redis_url, prefix, "sleepy", *args)  # its keeper recovers the lost job
    # Its lease ran out with no stall left: failed as stalled, well before 30 s.
    assert wait_for(lambda: queue.get_job(job.id).state == "failed", timeout=10)
    assert "stalled" in queue.get_job(job.id).error.lower()


def test_process_isolation_from_the_command_line(
    run: list[Kue], redis_url: str, prefix: str, queue: Queue
) -> None:
    kue = worker(run, redis_url, prefix, "echo", "--type", "double", "--isolation", "process")
    job = queue.create_job("double", {"n": 21}).save()
    assert wait_for(lambda: queue.get_job(job.id).state == "complete", timeout=30)
    result = queue.get_job(job.id).result
    assert result["twice"] == 42 and result["pid"] != kue.proc.pid  # a child process ran it
    kue.send(signal.SIGTERM)
    assert kue.wait() == 0, kue.output


def test_debug_logs_every_job(run: list[Kue], redis_url: str, prefix: str, queue: Queue) -> None:
    kue = Kue(
        "--log-level",
        "debug",
        "worker",
        "tests.cli.handlers:echo",
        "-t",
        "double",
        "--redis",
        redis_url,
        "--prefix",
        prefix,
    )
    run.append(kue)
    job = queue.create_job("double", {"n": 1}).save()
    kue.wait_for_line(rf"job {job.id} \(double\) complete")
    bad = queue.create_job("double", {}).save()  # no "n": the handler raises KeyError
    kue.wait_for_line(rf"job {bad.id} \(double\) failed for good \(attempt 1 of 1\): KeyError")
    kue.send(signal.SIGTERM)
    assert kue.wait() == 0


# -- kue example ------------------------------------------------------------------------------
def test_example_serves_the_dashboard_while_jobs_flow(
    run: list[Kue], redis_url: str, prefix: str, queue: Queue
) -> None:
    kue = Kue("example", "--redis", redis_url, "--prefix", prefix, "--port", "0")
    run.append(kue)
    base = kue.wait_for_line(r"dashboard is on (http://\S+)/").group(1)

    def done(job_type: str, state: str, n: int) -> bool:
        return queue.count(state, job_type) >= n

    # Emails and webhooks within seconds, the 600-frame video and the 3 s reminder soon after.
    assert wait_for(
        lambda: done("email", "complete", 5) and done("webhook", "complete", 2), timeout=20
    )
    assert wait_for(
        lambda: done("video", "complete", 1) and done("reminder", "complete", 1), timeout=30
    )
    assert done("email", "failed", 1)  # the address without an @ fails at once (NoRetry)
    assert queue.count("delayed", "reminder") >= 1  # later reminders wait
    retried = [j for j in queue.get_jobs(queue.ids("complete", "webhook")) if j.attempts_made > 1]
    failed = queue.get_jobs(queue.ids("failed", "webhook"))
    # The example's servers fail a fixed number of tries per URL: ada's three (it fails for
    # good), grace's and linus's two (they get through on the last try).
    assert retried and failed, (retried, failed)
    video = queue.get_jobs(queue.ids("complete", "video"))[0]
    assert video.progress() == 100 and queue.get_log(video.id)[0].startswith("transcoding")
    assert kue.wait_for_line(r"^complete\s+#\d+\s+\{")
    # A webhook attempt that will be retried says so, and no outcome is printed twice.
    assert kue.wait_for_line(r"^retrying\s+#\d+\s+\(attempt 2 of 3\)\s+ConnectionError")

    # Every page has something: schedules, limits, tags, a flow, a pinned job, rules.
    assert {s["key"] for s in json.loads(get(base + "/api/schedules")[2])["schedules"]} == {
        "nightly-report",
        "ops-digest",
    }
    limits = json.loads(get(base + "/api/limits")[2])["limits"]
    assert limits["email"]["rate"] == {"max": 20, "perMs": 1000}
    assert limits["webhook"]["groupConcurrency"] == 1
    assert {"reports", "user-ada"} <= set(queue.tags())
    assert wait_for(lambda: done("report", "complete", 2), timeout=30)  # a flow's two reports
    flow_mail = queue.get_jobs(queue.tagged("reports"))[0]
    assert flow_mail.depends_count == 1 and flow_mail.type == "email"
    videos = queue.get_jobs(queue.ids("complete", "video") + queue.ids("active", "video"))
    assert any(v.only() for v in videos + queue.get_jobs(queue.ids("pinned", "video")))
    watchers = json.loads(get(base + "/api/rules")[2])["watchers"]
    assert len(watchers) == 2 and all(w["running"] for w in watchers), watchers

    status, kind, page = get(base + "/")
    assert status == 200 and kind.startswith("text/html") and "email" in page
    status, _, stats = get(base + "/api/stats")
    assert status == 200 and json.loads(stats)["completeCount"] >= 7
    assert get(base + "/static/kue.js")[:2] == (200, "text/javascript; charset=utf-8")

    kue.send(signal.SIGINT)
    assert kue.wait(timeout=30) == 0, kue.output
    assert kue.out[-1] == "stopped" and "Traceback" not in kue.output
    assert queue.count("active") == 0 and queue.workers() == []
    failed_ids = re.findall(r"^failed\s+#(\d+)", kue.output, re.M)
    assert failed_ids and len(failed_ids) == len(set(failed_ids)), failed_ids
    assert not re.search(r"kue_core\.worker: job \d+", kue.output)  # the demo's lines alone


# -- kue dashboard ----------------------------------------------------------------------------
def test_dashboard_dev_server_ends_open_streams_when_stopped(
    run: list[Kue], redis_url: str, prefix: str, queue: Queue
) -> None:
    job = queue.create_job("email", {"title": "hello"}).save()
    kue = Kue("dashboard", "--redis", redis_url, "--prefix", prefix, "--port", "0", "--readonly")
    run.append(kue)
    base = kue.wait_for_line(r"kue dashboard: (http://\S+)/").group(1)
    assert get(f"{base}/job/{job.id}")[0] == 200
    assert request("DELETE", f"{base}/api/job/{job.id}") == 405  # --readonly
    stream = urllib.request.urlopen(base + "/api/events", timeout=10)
    assert stream.readline().startswith(b"retry:")
    kue.send(signal.SIGINT)
    assert kue.wait(timeout=15) == 0, kue.output
    assert "Traceback" not in kue.output
    stream.close()


def test_dashboard_under_gunicorn(
    run: list[Kue], redis_url: str, prefix: str, queue: Queue
) -> None:
    queue.create_job("email", {}).save()
    port = free_port()
    kue = Kue(
        "dashboard",
        "--gunicorn",
        "-w",
        "2",
        "--redis",
        redis_url,
        "--prefix",
        prefix,
        "--port",
        str(port),
    )
    run.append(kue)
    base = f"http://127.0.0.1:{port}"
    assert wait_for(lambda: _answers(base + "/api/health"), timeout=30), kue.output
    status, _, stats = get(base + "/api/stats")
    assert status == 200 and json.loads(stats)["inactiveCount"] == 1
    assert get(base + "/static/kue.css")[0] == 200
    kue.wait_for_line(r"Booting worker")
    kue.send(signal.SIGTERM)
    assert kue.wait(timeout=30) == 0, kue.output


def _answers(url: str) -> bool:
    try:
        return get(url, timeout=1)[0] == 200
    except OSError:
        return False


def test_kue_runs_as_a_module() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "kue_cli", "--help"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert out.returncode == 0 and "worker" in out.stdout
