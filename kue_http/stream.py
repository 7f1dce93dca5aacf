"""``GET /events``: job events as Server-Sent Events, straight from the queue's pub/sub channel.

Each stream holds one Redis pub/sub connection for as long as the client listens, so the
server must not give one worker per request (run gunicorn with ``--worker-class gthread``; see
docs/http-api.md). A stream is Kue's event message as JSON, one ``data:`` line per event, filtered
by ``?type=`` and ``?id=``; a comment every ``KUE_SSE_KEEPALIVE`` seconds keeps proxies from
closing an idle stream and lets the server notice a client that left.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Iterator
from typing import Any

import redis
from flask import Response, current_app, request

from kue_core import CannotDecrypt, EventStream, InvalidJob, sealing, validate_type

from . import redaction
from .api import api, queue

#: Seconds one wait for a message lasts: the granularity of keep-alives.
_POLL = 0.5
#: What a browser's EventSource waits before reconnecting after the stream ends (ms).
RECONNECT_MS = 2000


class Streams:
    """The app's open event streams, so that a server that stops can end them."""

    def __init__(self) -> None:
        self.closing = threading.Event()
        self._open = 0
        self._changed = threading.Condition()

    def add(self, delta: int) -> None:
        with self._changed:
            self._open += delta
            self._changed.notify_all()

    def close(self, timeout: float) -> bool:
        """End every open stream (each within ``_POLL`` seconds); True if all ended in time."""
        self.closing.set()
        with self._changed:
            return self._changed.wait_for(lambda: self._open == 0, timeout)


@api.get("/events")
def events() -> Response:
    """Job events; ``?type=`` keeps one job type, ``?id=`` one job."""
    job_type = request.args.get("type")
    if job_type is not None:
        validate_type(job_type)
    job_id = request.args.get("id")
    if job_id is not None and not re.fullmatch(r"[1-9]\d{0,18}", job_id):
        raise InvalidJob(f"id must be a job id, got {job_id!r}")
    # Subscribed before the answer starts: a Redis outage is a 503, not a broken stream.
    subscription = queue().event_stream(current_app.config["KUE_REDIS_TIMEOUT"])
    keepalive = current_app.config["KUE_SSE_KEEPALIVE"]
    wanted = _Filter(job_type, int(job_id) if job_id else None)
    streams: Streams = current_app.extensions["kue_streams"]
    ring = queue().keyring
    body = _stream(subscription, wanted, keepalive, streams, redaction.view(), ring)
    response = Response(body, mimetype="text/event-stream")
    response.headers["X-Accel-Buffering"] = "no"  # nginx: pass each event on at once
    return response


class _Filter:
    def __init__(self, job_type: str | None, job_id: int | None) -> None:
        self.job_type = job_type
        self.job_id = job_id

    def __call__(self, event: dict[str, Any]) -> bool:
        # Node Kue's messages name no type: let them by, the page checks what changed. A job
        # moved to another type names the new one, and the old one after the event's name.
        if self.job_type is not None and event.get("type") not in (None, self.job_type):
            args = event.get("args")
            if not (event.get("event") == "moved" and _second(args) == self.job_type):
                return False
        if self.job_id is not None:
            try:
                return int(event.get("id", 0)) == self.job_id
            except (TypeError, ValueError):
                return False
        return True


#: Events whose argument at this index is a payload an encrypted queue seals, and its field.
_SEALED_ARGS = {"complete": (1, "result"), "progress": (2, "progress")}


def _opened(event: dict[str, Any], ring: sealing.Keyring) -> dict[str, Any]:
    """An event of an encrypted queue with its result (``complete``) or progress data opened,
    as the job's page shows them; left sealed when the server lacks its key."""
    found = _SEALED_ARGS.get(str(event.get("event")))
    args = event.get("args")
    if found is None or not isinstance(args, list) or len(args) <= found[0]:
        return event
    at, field = found
    try:
        value = sealing.opened_value(ring, args[at], field)
    except CannotDecrypt:
        return event
    return {**event, "args": [*args[:at], value, *args[at + 1 :]]}


def _second(args: object) -> object:
    """An event's first argument after its name (``args`` is ``[name, ...]``), or None."""
    return args[1] if isinstance(args, list) and len(args) > 1 else None


def _stream(
    subscription: EventStream,
    wanted: _Filter,
    keepalive: float,
    streams: Streams,
    shown: redaction.View,
    ring: sealing.Keyring | None,
) -> Iterator[str]:
    streams.add(1)
    try:
        yield f"retry: {RECONNECT_MS}\n: connected\n\n"
        last = time.monotonic()
        while not streams.closing.is_set():
            try:
                event = subscription.get(timeout=_POLL)
            except redis.RedisError:
                # Redis went away: end the stream; the browser reconnects by itself.
                yield 'event: error\ndata: {"error": "Redis is unavailable"}\n\n'
                return
            now = time.monotonic()
            if event is not None and wanted(event):
                event = redaction.event(_opened(event, ring) if ring else event, shown)
                yield f"data: {json.dumps(event, separators=(',', ':'))}\n\n"
                last = now
            elif now - last >= keepalive:
                yield ": keep-alive\n\n"
                last = now
    finally:
        subscription.close()
        streams.add(-1)
