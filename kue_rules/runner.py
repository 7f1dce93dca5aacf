"""``kue rules``: the watchers of one configuration, run until stopped.

``Rules(config, queue).start()`` starts the feeds of the watchers on job events, one thread
per watcher and a heartbeat that renews their locks and tells the dashboard they run;
``stop()`` lets each watcher finish the event it handles (or leave it taken, to be replayed),
then gives the locks up so that another process can take the watchers at once.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import uuid

import redis

from kue_core import Queue, connection

from .config import Config
from .store import LOCK_MS, Store, holder
from .watcher import WatcherThread

log = logging.getLogger(__name__)


class Rules:
    def __init__(self, config: Config, queue: Queue) -> None:
        self.config, self.queue = config, queue
        self.store = Store(queue)
        self.token = f"{holder()}:{uuid.uuid4().hex[:8]}"
        self.stopping = threading.Event()
        self.threads = [
            WatcherThread(w, queue, self.store, self.token, self.stopping) for w in config.watchers
        ]
        self._beat = threading.Thread(
            target=self._heartbeat, name="kue-rules heartbeat", daemon=True
        )

    def start(self) -> Rules:
        for w in self.config.watchers:
            if w.events:
                self.queue.feed(*w.events)
        self._register()
        for t in self.threads:
            t.start()
        self._beat.start()
        return self

    def stop(self, timeout: float = 30.0) -> None:
        self.stopping.set()
        for t in self.threads:
            t.join(timeout)
        self._beat.join(timeout)
        for t in self.threads:
            if t.held and not t.is_alive():
                with contextlib.suppress(redis.RedisError, OSError):  # else it expires
                    self.store.take_lock(t.w, self.token, "drop")

    def _register(self) -> None:
        now = connection.server_ms(self.queue.client)
        for t in self.threads:
            self.store.register(t.w, self.token if t.held else "", now)

    def _heartbeat(self) -> None:
        while not self.stopping.wait(LOCK_MS / 3000):
            try:
                for t in self.threads:
                    if t.held and not self.store.take_lock(t.w, self.token, "renew"):
                        t.held = False
                        log.warning("watcher %s: its lock was taken over", t.w.label)
                now = connection.server_ms(self.queue.client)
                for t in self.threads:
                    if t.held:
                        self.store.register(t.w, self.token, now)
            except (redis.RedisError, OSError) as e:
                log.warning("heartbeat: Redis: %s", e)
