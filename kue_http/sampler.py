"""The statistics' history sampled by the server process too, not only by workers' keepers:
so that the backlog of a queue whose workers are down, or are Node Kue's (which sample
nothing), is still kept minute by minute. ``Queue.sample_history`` writes each minute once,
whichever process comes first, so a server beside running workers adds one cheap read every
``HISTORY_CHECK`` seconds and no write.

One thread per server process, started with the app and again in a process forked from it
(gunicorn's ``--preload``: a thread does not survive the fork), at its first request. A
read-only app does not sample (``KUE_READONLY`` promises no writes), nor one with
``KUE_HISTORY_SAMPLE`` off.
"""

from __future__ import annotations

import logging
import os
import threading

import redis

from kue_core import Queue
from kue_core import defaults as core_defaults

log = logging.getLogger(__name__)


class Sampler:
    """Calls ``queue.sample_history()`` every ``every`` seconds in a daemon thread, until
    :meth:`close`."""

    def __init__(self, queue: Queue, every: float = core_defaults.HISTORY_CHECK) -> None:
        self.queue = queue
        self.every = every
        self._closed = threading.Event()
        self._lock = threading.Lock()
        self._pid: int | None = None
        self.thread: threading.Thread | None = None  # this process's

    def ensure(self) -> None:
        """Start the thread unless it runs in this process (a cheap check per request)."""
        if self._pid == os.getpid() or self._closed.is_set():
            return
        with self._lock:
            if self._pid != os.getpid():
                self._pid = os.getpid()
                self.thread = threading.Thread(target=self._run, name="kue-history", daemon=True)
                self.thread.start()

    def close(self) -> None:
        self._closed.set()

    def _run(self) -> None:
        failing = False
        while not self._closed.is_set():
            try:
                self.queue.sample_history()
                failing = False
            except (redis.RedisError, OSError) as e:
                if not failing:  # once per outage: the requests report it meanwhile
                    log.warning("the statistics' history could not be sampled: %s", e)
                failing = True
            except Exception:
                log.exception("the statistics' history could not be sampled")
            self._closed.wait(self.every)
