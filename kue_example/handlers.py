"""Example handlers. A handler takes the job and returns its result (anything JSON can hold);
raising fails the attempt, and the job is retried while it has attempts left.

Run one of them on its own with the command line::

    kue worker kue_example.handlers:send_email --type email -n 4
"""

from __future__ import annotations

import asyncio
import random
import time
import zlib
from typing import Any

from kue_core import Job, NoRetry


def send_email(job: Job) -> dict[str, Any]:
    """Fast and high priority: a welcome mail or a password reset."""
    to = job.data["to"]
    if "@" not in to:
        raise NoRetry(f"not an email address: {to!r}")  # retrying cannot help
    time.sleep(random.uniform(0.05, 0.4))  # talking to the mail server
    return {"to": to, "message_id": f"<{job.id}.{int(time.time())}@mail.example.com>"}


async def transcode_video(job: Job) -> dict[str, Any]:
    """Long: reports its progress and writes log lines as it goes. An ``async def`` handler
    runs on the worker's event loop, so many of them can wait at once."""
    source, frames = job.data["file"], job.data["frames"]
    job.log("transcoding %s to %s", source, job.data["format"])
    for done in range(0, frames + 1, frames // 10):
        await asyncio.sleep(random.uniform(0.2, 0.8))  # encoding a tenth of the frames
        job.progress(done, frames, {"frame": done})
        if done and done % (frames // 2) == 0:
            job.log("%d of %d frames done", done, frames)
    return {"output": source.rsplit(".", 1)[0] + "." + job.data["format"], "frames": frames}


def deliver_webhook(job: Job) -> dict[str, Any]:
    """Flaky: each receiving server answers 503 to the first 0 to 3 tries (the same count for
    the same URL, so a run of the example always shows the same story). The job is created
    with ``attempts(3)`` and an exponential backoff, so most deliveries get through, some on a
    retry, and those to a server that fails three times fail for good."""
    time.sleep(random.uniform(0.05, 0.2))
    url = job.data["url"]
    if job.attempts_made < zlib.crc32(url.encode()) % 4:
        raise ConnectionError(f"POST {url}: 503 Service Unavailable")
    return {"status": 200}


def send_reminder(job: Job) -> dict[str, Any]:
    """Delayed: created with ``delay(...)``, it waits in the delayed state until it is due."""
    due = job.promote_at or job.created_at or 0
    return {"reminded": job.data["user"], "ms_after_due": int(time.time() * 1000) - due}


def build_report(job: Job, seconds_a_page: float = 0.0) -> dict[str, Any]:
    """The report of the FastAPI recipe (kue_example/fastapi_app.py): one page at a time,
    reporting progress as it goes, which the service streams to its client."""
    pages = job.data["pages"]
    for page in range(1, pages + 1):
        time.sleep(seconds_a_page * random.uniform(0.6, 1.4))  # gathering a page's figures
        job.progress(page, pages, {"page": page})
    return {"title": job.data["title"], "pages": pages}


def compile_report(job: Job) -> dict[str, Any]:
    """The demo's reports: a page every half second or so. Jobs waiting for a report stay
    blocked until it completes."""
    return build_report(job, seconds_a_page=0.65)
