"""``GET /job/<id>/stream``: a running job's stream of partial output (``job.stream()``, see
kue_core/features/streams.py) as Server-Sent Events, from the first part or after the one a
client last had (the ``Last-Event-ID`` header a browser's ``EventSource`` sends when it
reconnects, or ``?after=``), ending with the job.

Each part is an event ``part`` whose id is the part's entry id and whose data is
``{"attempt": n, "value": ...}``; once the job has ended and every part is sent, one event
``end`` with ``{"state": "complete" | "failed" | "removed"}`` closes the stream (a browser
should close its ``EventSource`` on it, or it reconnects and is told again). A job suspended
waiting for a signal (it may wait for days) ends it too, with ``{"state": "suspended"}``,
found at a keep-alive: follow it again once it runs, after the last part had. With
``?once=true`` it sends the parts held now and ends, ``end`` naming the job's state then. A
part is a payload: a role that may not see payloads gets ``"[hidden]"``
(kue_http/redaction.py). Like ``/events``, a stream holds a thread of the server while it is
open.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import redis
from flask import Response, current_app, request

from kue_core import JobNotFound, Queue, StreamReading

from . import redaction
from .api import api, bool_arg, queue
from .stream import RECONNECT_MS, Streams

#: Seconds one read of the stream waits for a part: the granularity of keep-alives.
_POLL = 0.5
#: The states after which a job streams nothing more (a read of the stream tells them itself,
#: with what is left to read).
_FINAL = ("complete", "failed", "removed")


@api.get("/job/<job_id>/stream")
def job_stream(job_id: str) -> Response:
    """The job's parts as events, then ``end``."""
    after = request.headers.get("Last-Event-ID") or request.args.get("after") or None
    once = bool_arg("once")
    q = queue()
    job = q.get_job(job_id)  # a 404 before the answer starts
    jid = int(job_id)  # read by get_job
    first = q.read_stream(jid, after=after, block=0.001)  # a bad position: a 400
    shown, streams = redaction.view(), current_app.extensions["kue_streams"]
    keepalive = current_app.config["KUE_SSE_KEEPALIVE"]
    body = _events(q, jid, job.type, after, first, shown, streams, keepalive, once)
    response = Response(body, mimetype="text/event-stream")
    response.headers["X-Accel-Buffering"] = "no"  # nginx: pass each part on at once
    response.headers["Cache-Control"] = "no-store"
    return response


def _events(
    q: Queue,
    job_id: int,
    job_type: str,
    after: str | None,
    got: StreamReading,
    shown: redaction.View,
    streams: Streams,
    keepalive: float,
    once: bool,
) -> Iterator[str]:
    streams.add(1)
    try:
        yield f"retry: {RECONNECT_MS}\n: connected\n\n"
        last = time.monotonic()
        look = True  # read the job's state at the next read that finds nothing
        seen = None  # a state read that ends the answer, after one more read
        while True:
            for part in got.parts:
                value = shown.value(part.value, "stream", job_type, [])
                data = json.dumps({"attempt": part.attempt, "value": value}, separators=(",", ":"))
                yield f"id: {part.id}\nevent: part\ndata: {data}\n\n"
                after, last = part.id, time.monotonic()
            ended = got.ended
            if ended is None and seen is not None:
                ended = seen  # with the parts written before the state was read
            elif ended is None and look and not got.parts:
                # Nothing more now: its state ends the answer (once; followed: suspended)
                # after one more read, for the parts written between the last read and the
                # state; a final state is left to that read, which tells it with them.
                state = _state(q, job_id)
                if (once and state not in _FINAL) or state == "suspended":
                    seen = state
                look = once
            if ended is not None:
                yield f"event: end\ndata: {json.dumps({'state': ended})}\n\n"
                return
            if streams.closing.is_set():
                return
            if time.monotonic() - last >= keepalive:
                yield ": keep-alive\n\n"
                last, look = time.monotonic(), True
            try:
                quick = once or seen is not None
                got = q.read_stream(job_id, after=after, block=0.001 if quick else _POLL)
            except redis.RedisError:
                # Redis went away: end the stream; the browser reconnects by itself, after
                # the last part it had.
                yield 'event: error\ndata: {"error": "Redis is unavailable"}\n\n'
                return
    finally:
        streams.add(-1)


def _state(q: Queue, job_id: int) -> str | None:
    """The job's state now (None when Redis does not answer: the next read tells)."""
    try:
        return str(q.get_job(job_id).state)
    except JobNotFound:
        return "removed"
    except redis.RedisError:
        return None
