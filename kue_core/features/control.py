"""Job control: what an operator does to jobs and worker processes from anywhere.

* ``cancel``: a job in any state but complete fails at once, without retry (``cancel.lua``).
* ``move``: a job goes under another type, keeping its id, data, priority and state
  (``move.lua``); a running one only with ``force``, which ends its attempt.
* ``edit``: the data of a waiting or failed job is replaced (``edit.lua``).
* ``stop_worker``: a worker process shuts down gracefully, as on SIGTERM.

A job that is running when it is cancelled or moved leaves ``active`` in the script itself, so
its worker's reports are refused by the fencing token whatever happens next. The script also
publishes ``{"op": "end", ...}`` on the channel of the worker process holding the job
(``Keys.control``): the process stops the handler within milliseconds instead of at its next
heartbeat (which would find the lease lost anyway, if the message was missed). A stop request
is ``{"op": "stop", "timeout": seconds}`` on the same channel. Each worker process listens to
its own channel with a :class:`LoopListener`, a task of its event loop.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import logging
import threading
from collections.abc import Callable, Coroutine
from typing import Any, cast

import redis
import redis.asyncio

from .. import defaults
from ..base import checks
from ..base.errors import InvalidJob, WorkerNotFound
from ..base.keys import Keys, job_id_from_zid
from ..base.retry import Pauses
from ..store.calls import Op, read
from ..store.transport import Transport

log = logging.getLogger(__name__)


def reason_text(reason: object) -> str:
    if not isinstance(reason, str):
        raise InvalidJob(f"reason must be a string, got {type(reason).__name__}")
    if len(reason) > defaults.MAX_REASON:
        raise InvalidJob(f"reason must be at most {defaults.MAX_REASON} characters")
    try:
        reason.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidJob("reason is not valid unicode (lone surrogate)") from None
    return reason


class Control:
    """The control operations of one queue (see the module docstring)."""

    def __init__(self, client: redis.Redis, keys: Keys, scripts: Transport) -> None:
        self._client = client
        self._keys = keys
        self._scripts = scripts

    def stop_worker(self, worker_id: object, timeout: float) -> None:
        """Ask a live worker process to shut down; ``WorkerNotFound`` when none has this id."""
        self._scripts.drive(stop_worker(self._keys, worker_id, timeout))

    def workers(self) -> list[dict[str, Any]]:
        """The live worker processes (see ``Queue.workers``)."""
        return self._scripts.drive(workers(self._keys))


def stop_worker(keys: Keys, worker_id: object, timeout: float) -> Op[None]:
    """Ask a live worker process to shut down (an operation: see :mod:`kue_core.jobs.ops`)."""
    if not isinstance(worker_id, str) or not worker_id:
        raise InvalidJob(f"a worker id must be a non-empty string, got {worker_id!r}")
    seconds = checks.number(timeout, "timeout", 0, defaults.MAX_MS / 1000, " s")
    score, registered = yield read(
        ("ZSCORE", keys.workers, worker_id), ("EXISTS", keys.worker(worker_id))
    )
    if score is None or not registered:
        raise WorkerNotFound(worker_id)
    message = json.dumps({"op": "stop", "timeout": seconds})
    yield read(("PUBLISH", keys.control(worker_id), message))


def workers(keys: Keys) -> Op[list[dict[str, Any]]]:
    """The live worker processes (see ``Queue.workers``; an operation)."""
    ids, active, runs = yield read(
        ("ZRANGE", keys.workers, 0, -1),
        ("ZRANGE", keys.state("active"), 0, -1),
        ("ZRANGE", keys.run_leases, 0, -1),
    )
    running = [job_id_from_zid(m) for m in active]
    replies = yield read(
        *(("HGETALL", keys.worker(wid)) for wid in ids),
        *(("HMGET", keys.job(jid), "workerId", "fan_out") for jid in running),
    )
    jobs: dict[str, list[int]] = {}
    for jid, (holder, fan_out) in zip(running, replies[len(ids) :], strict=True):
        if holder is not None and fan_out is None:  # held under its worker's lease
            jobs.setdefault(holder, []).append(jid)
    for member in runs:  # a fan-out job's run: <id>@<worker>, leased by its worker
        jid, _, holder = member.partition("@")
        if jid.isdigit():
            jobs.setdefault(holder, []).append(int(jid))
    out = []
    for h in cast(list[dict[str, str]], replies[: len(ids)]):
        if not h:
            continue  # expired since: its process is gone
        info = json.loads(h.get("info") or "{}")
        info["jobs"] = sorted(jobs.get(info.get("id"), []))
        info["heartbeat"] = int(h.get("heartbeat") or 0)
        info.setdefault("paused", [])
        info.setdefault("stopping", False)
        out.append(info)
    return out


def parse(message: str) -> dict[str, Any] | None:
    """A control message, or None (logged) when it is not one this version knows."""
    try:
        msg = json.loads(message)
        op = msg["op"]
        if op == "end":
            return {
                "op": op,
                "id": int(msg["id"]),
                "lease": str(msg["lease"]),
                "reason": str(msg.get("reason", "")),
            }
        if op == "stop":
            timeout = float(msg.get("timeout", defaults.SHUTDOWN_TIMEOUT))
            if not 0 <= timeout < float("inf"):
                raise ValueError(timeout)
            return {"op": op, "timeout": timeout}
    except (ValueError, KeyError, TypeError):
        pass
    log.warning("ignoring a malformed control message: %.200r", message)
    return None


class _Listening:
    """What both listeners share: the channel, the handling of a message, the flags."""

    def __init__(
        self,
        channel: str,
        handle: Callable[[dict[str, Any]], Any],
        report: Callable[[Exception], Any],
    ) -> None:
        self._channel = channel
        self._handle = handle
        self._report = report
        self._stop = threading.Event()
        self.listening = threading.Event()

    def _dispatch(self, data: str) -> None:
        parsed = parse(data)
        if parsed is None:
            return
        try:
            self._handle(parsed)
        except Exception as e:  # a bug: report it and go on listening
            self._report(e)


class LoopListener(_Listening):
    """A task of a worker's event loop subscribed to its process's control channel, on the
    loop's asyncio ``client``: ``handle(message)`` is called on the loop for each message
    (parsed); it resubscribes after a Redis error. ``submit`` runs a coroutine on the loop
    from any thread (``EventLoop.submit``)."""

    def __init__(
        self,
        client: redis.asyncio.Redis,
        channel: str,
        handle: Callable[[dict[str, Any]], Any],
        report: Callable[[Exception], Any],
        submit: Callable[[Coroutine[Any, Any, None]], concurrent.futures.Future[None]],
    ) -> None:
        super().__init__(channel, handle, report)
        self._client = client
        self._submit = submit
        self._task: concurrent.futures.Future[None] | None = None

    def start(self) -> None:
        """Start listening; returns once subscribed (or after ``SUBSCRIBE_TIMEOUT``)."""
        self._task = self._submit(self._listen_async())
        self.listening.wait(defaults.SUBSCRIBE_TIMEOUT)

    def close(self) -> None:
        self._stop.set()
        if self._task is not None:
            self._task.cancel()  # its pubsub is closed as it ends

    async def _listen_async(self) -> None:
        pauses = Pauses()
        while not self._stop.is_set():
            pubsub: Any = self._client.pubsub()
            try:
                await pubsub.subscribe(self._channel)
                confirm = await pubsub.get_message(timeout=defaults.SUBSCRIBE_TIMEOUT)
                if confirm is None:  # not subscribed: try again
                    raise redis.ConnectionError(f"no confirmation of {self._channel}")
                self.listening.set()
                pauses.reset()
                while not self._stop.is_set():
                    # No timeout: close() cancels the task (and so does the loop's end).
                    msg = await pubsub.get_message(ignore_subscribe_messages=True, timeout=None)
                    if msg is not None and msg["type"] == "message":
                        self._dispatch(msg["data"])
            except (redis.RedisError, OSError) as e:
                self._report(e)
                await asyncio.sleep(pauses.next())
            finally:
                self.listening.clear()
                await pubsub.aclose()
