"""Listening to the app's event stream from a test: each listener a thread with a client of
its own, reading until the first ``complete`` event."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from flask import Flask


@contextmanager
def listening(
    streams: dict[str, tuple[Flask, str, dict[str, str]]],
) -> Iterator[dict[str, list[dict[str, Any]]]]:
    """Open each stream (name -> (app, URL, headers)), and return once every one is
    subscribed; on leaving, wait (10 s at most each) for every one to have heard a
    ``complete`` event. Yields name -> the events heard, filled in as they come."""
    heard: dict[str, list[dict[str, Any]]] = {name: [] for name in streams}
    ready = threading.Barrier(len(streams) + 1, timeout=10)

    def listen(name: str, app: Flask, url: str, headers: dict[str, str]) -> None:
        res = app.test_client().get(url, headers=headers, buffered=False)
        events, chunks = heard[name], iter(res.response)
        next(chunks)  # connected: subscribed
        ready.wait()
        for chunk in chunks:
            for line in chunk.decode().splitlines():
                if line.startswith("data: "):
                    events.append(json.loads(line[6:]))
            if any(e["event"] == "complete" for e in events):
                break
        res.close()

    threads = [
        threading.Thread(target=listen, args=(name, *stream)) for name, stream in streams.items()
    ]
    for t in threads:
        t.start()
    ready.wait()
    yield heard
    for t in threads:
        t.join(10)
        assert not t.is_alive(), "a stream heard no complete event"
