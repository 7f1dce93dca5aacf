"""What the rules tests share: a real local web service for the fetches, Resc's configurations
written with the service's address, Resc-style workers, and the real ``kue rules`` process."""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import redis

from tests.cli.running import Kue

CONFIGS = Path(__file__).resolve().parent / "configs"
#: The host Resc's documented configuration calls; replaced by the local service.
RESC_HOST = "my-web-service"
_CHILDREN = re.compile(r"/products/([^/]+)/direct-children\Z")


class WebService:
    """``GET /products/<id>/direct-children`` answering the JSON array ``children[id]``
    (``[]`` for an unknown id), on 127.0.0.1 in a thread.

    ``status``: when set, every answer is that status (e.g. 500) instead. ``hold``: ids whose
    *first* request waits until :meth:`release` (the test then acts while a fetch is under
    way); ``held`` is set once such a request has arrived. ``requests`` counts per id."""

    def __init__(self) -> None:
        self.children: dict[str, list[dict[str, Any]]] = {}
        self.status: int | None = None
        self.hold: set[str] = set()
        self.held = threading.Event()
        self._gate = threading.Event()
        self.requests: dict[str, int] = {}
        #: (id, n) -> (arrived, gate): the n-th request for id waits for its gate.
        self.later: dict[tuple[str, int], tuple[threading.Event, threading.Event]] = {}
        self._lock = threading.Lock()
        service = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                m = _CHILDREN.match(self.path)
                if m is None:
                    self.send_error(404)
                    return
                pid = m.group(1)
                with service._lock:
                    service.requests[pid] = service.requests.get(pid, 0) + 1
                    n = service.requests[pid]
                if n == 1 and pid in service.hold:
                    service.held.set()
                    service._gate.wait(60)
                if (pid, n) in service.later:
                    arrived, gate = service.later[pid, n]
                    arrived.set()
                    gate.wait(60)
                if service.status is not None:
                    self.send_error(service.status)
                    return
                body = json.dumps(service.children.get(pid, [])).encode()
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except OSError:
                    pass  # the client is gone (killed)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.host = f"127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def hold_request(self, pid: str, n: int) -> tuple[threading.Event, threading.Event]:
        """Make the ``n``-th request for ``pid`` wait: (set when it arrives, set to answer)."""
        self.later[pid, n] = (threading.Event(), threading.Event())
        return self.later[pid, n]

    def release(self) -> None:
        self._gate.set()
        for _, gate in self.later.values():
            gate.set()

    def close(self) -> None:
        self.release()
        self.server.shutdown()
        self.server.server_close()


def resc_config(name: str, service: WebService, into: Path) -> Path:
    """Resc's documented configuration ``name`` (in ``configs/``) as a file in ``into``,
    verbatim but for the web service's host."""
    text = (CONFIGS / name).read_text("utf-8")
    assert RESC_HOST in text or "fetch" not in text
    path = into / name
    path.write_text(text.replace(RESC_HOST, service.host), "utf-8")
    return path


def write_config(doc: dict[str, Any], into: Path, name: str = "rules.json") -> Path:
    path = into / name
    path.write_text(json.dumps(doc, indent=2), "utf-8")
    return path


def delete_lists(client: redis.Redis, *patterns: str) -> None:
    """Delete the Resc lists and sets matching ``patterns`` (global names, not under a kue
    prefix): before and after each test that uses them."""
    for pattern in patterns:
        for key in list(client.scan_iter(match=pattern, count=1000)):
            client.delete(key)


def strings(client: redis.Redis, key: str) -> list[str]:
    return [str(x) for x in client.lrange(key, 0, -1)]


def start_rules(config: Path, redis_url: str, prefix: str, *args: str) -> Kue:
    """``kue rules CONFIG`` as a real process, once its watchers run."""
    kue = Kue("rules", str(config), "--redis", redis_url, "--prefix", prefix, *args)
    kue.wait_for_line(r"kue rules: \d+ watchers of .* running")
    return kue


class RescWorker(threading.Thread):
    """A worker written as Resc documents them: ``BRPOPLPUSH todo taken``, ``SREM`` the set
    (before the work), work, ``LREM taken 1 task``, ``LPUSH done task``."""

    def __init__(
        self,
        redis_url: str,
        todo: str,
        taken: str,
        dedupe: str | None,
        done: str,
        work: Callable[[str], None] = lambda task: None,
    ) -> None:
        super().__init__(daemon=True)
        self.client = redis.Redis.from_url(redis_url, decode_responses=True)
        self.todo, self.taken, self.dedupe, self.done, self.work = todo, taken, dedupe, done, work
        self.did: list[str] = []
        self.halt = threading.Event()

    def run(self) -> None:
        while not self.halt.is_set():
            taken = self.client.brpoplpush(self.todo, self.taken, timeout=1)
            if taken is None:
                continue
            task = str(taken)
            if self.dedupe:
                self.client.srem(self.dedupe, task)
            self.work(task)
            self.did.append(task)
            self.client.lrem(self.taken, 1, task)
            self.client.lpush(self.done, task)

    def stop(self) -> None:
        self.halt.set()
        self.join(10)
        assert not self.is_alive(), f"worker on {self.todo} did not stop"
        self.client.close()


def counts_of(report: list[dict[str, Any]], watcher: str) -> dict[str, Any]:
    """The watcher's counters and each rule's, from ``Store.report``."""
    for w in report:
        if w["input"] == watcher:
            return {"": w["counts"], **{r["name"]: r["counts"] for r in w["rules"]}}
    raise AssertionError(f"no watcher on {watcher!r} in the report: {[w['input'] for w in report]}")


def now_ms() -> int:
    return int(time.time() * 1000)
