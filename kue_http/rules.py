"""``kue rules`` on the API blueprint (``kue_rules.store``): what each watcher is, runs and has
done, and a retry of its failed events.

``GET /rules`` reads every watcher a ``kue rules`` process has registered under the prefix:
its lists and their lengths, whether a process runs it now, its counters, its rules with their
counters and recent events, and its failed events with their reasons. ``POST /rules/retry``
puts the failed events of one watcher (``{"watcher": "<its input list>"}``) back on its input.
"""

from __future__ import annotations

from typing import Any

from flask import Response, jsonify, request
from werkzeug.exceptions import NotFound

from kue_core import InvalidJob, Queue, connection
from kue_rules import Store

from .api import api, queue


def report(q: Queue) -> list[dict[str, Any]]:
    """Every watcher known under ``q``'s prefix (``Store.report``), as of the server's now."""
    return Store(q).report(connection.server_ms(q.client))


@api.get("/rules")
def list_rules() -> Response:
    """Every watcher known, with its lists' lengths, counters, rules and failures."""
    return jsonify({"watchers": report(queue())})


@api.post("/rules/retry")
def retry_rules() -> Response:
    """Put the failed events of the watcher named in the body back on its input."""
    body = request.get_json()  # 400 when malformed
    if not isinstance(body, dict) or set(body) != {"watcher"}:
        raise InvalidJob('the body is {"watcher": "<its input list>"}')
    watcher = body["watcher"]
    if not isinstance(watcher, str) or not watcher:
        raise InvalidJob(f"watcher is the name of a watcher's input list, got {watcher!r:.100}")
    try:
        moved = Store(queue()).retry_failed(watcher)
    except KeyError:
        raise NotFound(description=f"no watcher takes from {watcher}") from None
    return jsonify({"moved": moved})
