"""A rule's ``fetch``: HTTP GET of a URL whose answer is JSON, with a timeout and retries.

A connection error, a timeout, an answer that is not JSON, a 429 or a 5xx is tried again after
``backoff`` ms, doubling each time, ``retries`` times; any other 4xx is final at once (asking
again cannot help). What still fails raises :class:`FetchFailed`, and the watcher moves the
event to its failed list.
"""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from typing import Any

from kue_core import KueError

#: The longest pause between two tries (ms).
MAX_PAUSE_MS = 30_000
#: The largest answer read (bytes): a web service that sends more is failing.
MAX_ANSWER = 16 * 1024 * 1024


class FetchFailed(KueError):
    """The web service did not give a JSON answer, after every try."""


class Stopping(KueError):
    """``kue rules`` is stopping: the event stays in the taken list, replayed at the next start."""


def get_json(url: str, timeout: float, retries: int, backoff_ms: int, stop: threading.Event) -> Any:
    """The JSON answer of ``GET url``."""
    if not url.startswith(("http://", "https://")):
        raise FetchFailed(f"GET {url}: not an http:// or https:// URL")
    pause = backoff_ms
    for attempt in range(retries + 1):
        try:
            return _get(url, timeout)
        except _Final as e:
            raise FetchFailed(f"GET {url}: {e}") from None
        except _Again as e:
            if attempt == retries:
                tries = f"{retries + 1} tries" if retries else "1 try"
                raise FetchFailed(f"GET {url}: {e} ({tries})") from None
        if stop.wait(pause / 1000):
            raise Stopping(f"GET {url}: stopped between tries")
        pause = min(pause * 2, MAX_PAUSE_MS)
    raise AssertionError("unreachable")


class _Again(Exception):
    pass


class _Final(Exception):
    pass


def _get(url: str, timeout: float) -> Any:
    request = urllib.request.Request(url, headers={"Accept": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as answer:
            body = answer.read(MAX_ANSWER + 1)
    except urllib.error.HTTPError as e:
        if e.code == 429 or e.code >= 500:
            raise _Again(f"{e.code} {e.reason}") from None
        raise _Final(f"{e.code} {e.reason}") from None
    except (urllib.error.URLError, OSError, ValueError) as e:
        reason = getattr(e, "reason", e)
        raise _Again(str(reason) or type(e).__name__) from None
    if len(body) > MAX_ANSWER:
        raise _Final(f"the answer is over {MAX_ANSWER} bytes")
    try:
        return json.loads(body)
    except ValueError as e:
        raise _Again(f"the answer is not JSON: {e}") from None
