"""A job's page tells how its attempts ended and when each log line was written: a job failed
by ``NoRetry`` shows that it was not retried (not "2 remaining of 3"); each log line shows its
time and attempt, stored in the line itself where Kue keeps a job's log (a list of strings),
while ``get_log`` (both clients) and ``GET /api/job/<id>/log`` answer the lines as written."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from html import unescape

import pytest
from flask.testing import FlaskClient

from kue_core import Job, LogLine, NoRetry, Queue
from kue_core.jobs.log_lines import parse, stamp
from tests.clients import blocking_queue
from tests.conftest import wait_for
from tests.http.test_dashboard import fail, page


@pytest.fixture
def wq(redis_url: str, prefix: str) -> Iterator[Queue]:
    """A queue for the test's workers, shut down at the end."""
    q = Queue(redis_url, prefix=prefix)
    yield q
    q.shutdown(10)
    q.close()


def _facts(html: str, dt: str) -> str:
    found = re.search(rf"<dt>{dt}</dt><dd[^>]*>(.*?)</dd>", html, re.S)
    assert found, dt
    return " ".join(unescape(re.sub(r"<[^>]+>", "", found[1])).split())


def _log(html: str) -> list[str]:
    """Each log line's text as shown: its time, attempt and text, one space apart."""
    body = re.search(r'<ol class="log" id="log">(.*?)</ol>', html, re.S)
    assert body
    items = re.findall(r"<li>(.*?)</li>", body[1], re.S)
    return [" ".join(unescape(re.sub(r"<[^>]+>", " ", li)).split()) for li in items]


def test_a_job_failed_by_no_retry_shows_no_attempt_remaining(
    client: FlaskClient, queue: Queue, wq: Queue
) -> None:
    job = queue.create_job("charge", {"cents": "lots"}).attempts(3).save()
    wq.process("charge", 1, lambda j: (_ for _ in ()).throw(NoRetry("cents must be a number")))
    wait_for(lambda: queue.get_job(job.id).state == "failed")  # type: ignore[arg-type]

    html = page(client, f"/job/{job.id}")
    attempts = _facts(html, "Attempts")
    assert "remaining" not in attempts, attempts
    assert attempts.startswith("1 made of 3, not retried: its handler raised NoRetry"), attempts
    assert 'id="no-retry"' in html
    assert queue.history(job.id)[-1]["no_retry"] is True  # type: ignore[arg-type]
    assert re.search(r'<li class="state-failed">.*?>NoRetry</span>', html, re.S)


def test_attempts_of_a_job_retried_or_failed_for_good(client: FlaskClient, queue: Queue) -> None:
    """A job with attempts left says so; one that used them all, that none remains; neither
    is said to have raised NoRetry."""
    job = queue.create_job("report", {}).attempts(2).save()
    fail(queue, "report", "first failure")
    assert _facts(page(client, f"/job/{job.id}"), "Attempts") == "1 made, 1 remaining of 2"
    fail(queue, "report", "second failure")
    html = page(client, f"/job/{job.id}")
    assert _facts(html, "Attempts").startswith("2 made of 2, none remaining")
    assert "NoRetry" not in html
    assert "no_retry" not in queue.history(job.id)[-1]  # type: ignore[arg-type]


def test_log_lines_show_their_time_and_attempt(
    client: FlaskClient, queue: Queue, wq: Queue
) -> None:
    """Attempt 1 logs and fails, attempt 2 logs and completes: the page shows each line with
    the time it was written and its attempt; the API answers the lines as written."""
    job = queue.create_job("fetch", {}).attempts(2).save()
    before = round(time.time() * 1000)  # the stamp is on the clock of the process that logs
    tries: list[int] = []

    def handler(j: Job) -> str:
        tries.append(j.attempts_made)
        j.log("try %s <b>", len(tries))
        if len(tries) == 1:
            raise RuntimeError("flaky")
        return "ok"

    wq.process("fetch", 1, handler)
    wait_for(lambda: queue.get_job(job.id).state == "complete")  # type: ignore[arg-type]
    after = round(time.time() * 1000)

    assert queue.get_log(job.id) == ["try 1 <b>", "try 2 <b>"]  # type: ignore[arg-type]
    res = client.get(f"/api/job/{job.id}/log")
    assert res.status_code == 200 and res.json == ["try 1 <b>", "try 2 <b>"]

    lines = queue.get_log_lines(job.id)  # type: ignore[arg-type]
    assert [(x.text, x.attempt) for x in lines] == [("try 1 <b>", 1), ("try 2 <b>", 2)]
    assert all(x.at is not None and before - 1000 <= x.at <= after + 1000 for x in lines)

    html = page(client, f"/job/{job.id}")
    assert "<b>" not in html  # escaped
    shown = _log(html)
    assert len(shown) == 2
    for line, text in zip(lines, shown, strict=True):
        assert re.fullmatch(rf"\d\d:\d\d:\d\d\.\d{{3}} attempt {line.attempt} try \d <b>", text)
        assert line.at is not None and text.startswith(_clock(line.at))
    assert "times in UTC" in html


def test_kue_sees_the_stamp_and_a_kue_line_shows_as_it_is(
    client: FlaskClient, queue: Queue, redis_url: str, prefix: str
) -> None:
    """The stored line carries its stamp (what Node Kue shows); a line pushed as Node Kue
    writes it, without one, is shown as it is, by both clients alike."""
    job = queue.create_job("email", {}).save()
    queue.get_job(job.id).log("queued by %s", "python")  # type: ignore[arg-type]
    key = queue.keys.log(job.id)  # type: ignore[arg-type]
    queue.client.rpush(key, "sent by node")
    stored = [s.decode() if isinstance(s, bytes) else s for s in queue.client.lrange(key, 0, -1)]
    assert re.fullmatch(r"\[\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z\] queued by python", stored[0])
    assert stored[1] == "sent by node"

    expected = [LogLine("queued by python", parse(stored[0]).at), LogLine("sent by node")]
    assert queue.get_log_lines(job.id) == expected  # type: ignore[arg-type]
    with blocking_queue(redis_url, prefix) as aq:
        assert aq.get_log_lines(job.id) == expected
        assert aq.get_log(job.id) == ["queued by python", "sent by node"]
    shown = _log(page(client, f"/job/{job.id}"))
    assert re.fullmatch(r"\d\d:\d\d:\d\d\.\d{3} queued by python", shown[0])
    assert shown[1] == "sent by node"


def test_a_stamp_is_read_back_and_a_look_alike_is_not() -> None:
    line = stamp("[x] y", 1_764_394_781_123, 12)
    assert line == "[2025-11-29T05:39:41.123Z attempt 12] [x] y"
    assert parse(line) == LogLine("[x] y", 1_764_394_781_123, 12)
    assert parse(stamp("z", 1_764_394_781_000, None)) == LogLine("z", 1_764_394_781_000)
    for plain in ("[2025-11-29] z", "[2025-11-29T05:39:41Z] z", "[2025-11-29T05:39:41.123Z]z"):
        assert parse(plain) == LogLine(plain)


def _clock(ms: int) -> str:
    return time.strftime("%H:%M:%S", time.gmtime(ms / 1000)) + f".{ms % 1000:03d}"
