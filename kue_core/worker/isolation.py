"""Handlers in a child process: ``queue.process(type, n, handler, isolation="process")``.

Each slot of such a ``process()`` call owns one child process, started on its first job and
kept for the next ones. The slot sends the claimed job down a pipe; the child runs the handler
and sends back the result as JSON, or the error's message and traceback. Leases stay with the
parent, so a busy child needs no connection of its own until the handler calls
``job.progress()`` or ``job.log()``: then it talks to Redis through its own ``Queue`` on the
same server and prefix.

A child can be killed without harm to the worker: past the job's ttl, on shutdown, or when its
lease was lost. A child that dies by itself (a crash in native code, ``os._exit``, the kernel's
OOM killer) fails the attempt, and the next job gets a new child.

Children start with the ``forkserver`` method (``spawn`` where there is none), never by forking
the multi-threaded worker: the handler must be importable (a module-level function), and a
script that calls ``process()`` needs the usual ``if __name__ == "__main__":`` guard.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import multiprocessing
import pickle
import signal
import threading
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from multiprocessing.connection import Connection
from typing import TYPE_CHECKING, Any, Protocol

import redis

from .. import connection
from ..base.errors import InvalidJob
from ..base.payloads import Offload
from ..base.sealing import Keyring
from ..jobs.job import Job
from . import middleware as mw
from .outcome import Failed, Outcome, run

if TYPE_CHECKING:
    from multiprocessing.context import DefaultContext


class Owner(Protocol):
    """What handlers in child processes use of the parent's queue: where its Redis is. A
    child makes a queue of the same class, on its own connection, and closes it at the end."""

    prefix: str
    client: redis.Redis
    keyring: Keyring | None
    offload: Offload | None

    def close(self) -> None: ...


ISOLATIONS = ("thread", "process")

#: What a child sends as it starts a job, before the job's outcome: the ttl counts from here.
_STARTED = "started"


def _context() -> DefaultContext:
    """Never ``fork``: a forked copy of a multi-threaded worker can inherit a held lock."""
    method = "forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn"
    return multiprocessing.get_context(method)  # type: ignore[return-value]


@dataclass(frozen=True)
class _Connect:
    """What a child needs to reach the parent's Redis: picklable, no password in its repr.
    Either the URL the parent's client was made from (with its options) or, for a client
    made otherwise, its pool's connection settings."""

    prefix: str
    #: The parent's queue class (pickled by name): the child makes its queue with it.
    make: Callable[..., Owner]
    source: tuple[str, str | None, dict[str, Any]] | None
    connection_class: type[redis.connection.AbstractConnection] | None = None
    kwargs: dict[str, Any] | None = None
    #: The parent's encryption keys, as Queue(encryption_keys=...) takes them ("" for none).
    sealing: list[str] | str = ""
    #: The parent's payload limits and store: Queue's max_data_bytes, payload_store (its
    #: URL) and max_payload_bytes; None: as the environment says.
    offload: tuple[int, str | None, int] | None = None

    def __repr__(self) -> str:
        return f"<_Connect prefix={self.prefix!r}>"

    @classmethod
    def of(cls, queue: Owner) -> _Connect:
        made_from = connection.source(queue.client)
        ring = queue.keyring
        sealing = "" if ring is None else ring.texts()
        off = queue.offload
        stored = None
        if off is not None:
            url = off.store.url if off.store is not None else None
            stored = (off.max_data_bytes, url, off.max_payload_bytes)
        if made_from is not None:
            return cls(queue.prefix, type(queue), made_from, sealing=sealing, offload=stored)
        pool = queue.client.connection_pool
        # The connection settings; objects a pool keeps for itself (registries, handlers
        # holding locks) do not pickle, and a new pool makes its own.
        kwargs = {k: v for k, v in pool.connection_kwargs.items() if _picklable(v)}
        return cls(queue.prefix, type(queue), None, pool.connection_class, kwargs, sealing, stored)

    def queue(self) -> Owner:
        if self.source is not None:
            url, route, options = self.source
            client = connection.from_url(url, route=route, **options)
        else:
            assert self.connection_class is not None and self.kwargs is not None
            pool = redis.ConnectionPool(connection_class=self.connection_class, **self.kwargs)
            client = redis.Redis(connection_pool=pool)
        limits: dict[str, Any] = {}
        if self.offload is not None:
            names = ("max_data_bytes", "payload_store", "max_payload_bytes")
            limits = dict(zip(names, self.offload, strict=True))
        return self.make(prefix=self.prefix, client=client, encryption_keys=self.sealing, **limits)


def check_handler(handler: Any) -> None:
    """A child finds its handler by module and name: refuse one it could not find."""
    try:
        pickle.dumps(handler)
    except Exception as e:
        raise InvalidJob(
            "with isolation='process' the handler must be importable by name "
            f"(a module-level function); {handler!r} is not: {e}"
        ) from None


def _picklable(value: Any) -> bool:
    try:
        pickle.dumps(value)
    except Exception:
        return False
    return True


def _child_main(conn: Connection, handler: Any, connect: _Connect) -> None:
    """The child's loop: run the handler on each job received, until told to stop."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    queue = connect.queue()
    is_async = inspect.iscoroutinefunction(handler)
    try:
        while True:
            try:
                message = conn.recv()
            except EOFError:
                return  # the parent is gone
            if message is None:
                return
            job_id, fields, middleware = message
            job = Job.from_hash(queue, job_id, fields)
            job._attempt = _ChildAttempt(fields.get("lease", ""))  # its steps and stream
            conn.send(_STARTED)
            if not is_async:
                conn.send(run(mw.wrap(middleware, handler), job))
                continue
            plain, awaited = mw.split(middleware)
            wrapped = partial(_run_async, mw.wrap_async(awaited, handler))
            conn.send(run(mw.wrap(plain, wrapped), job))
    finally:
        queue.close()


def _run_async(handler: Any, job: Job) -> Any:
    return asyncio.run(handler(job))


class Child:
    """One slot's child process (started when first needed, replaced when it dies)."""

    def __init__(self, queue: Owner, handler: Any, name: str) -> None:
        self._connect = _Connect.of(queue)
        self._handler = handler
        self._name = name
        self._lock = threading.Lock()
        self._process: multiprocessing.process.BaseProcess | None = None
        self._conn: Connection | None = None

    def run(
        self,
        job_id: int,
        fields: dict[str, str],
        started: Callable[[], Any],
        middleware: tuple[mw.Middleware, ...] = (),
    ) -> Outcome:
        """Run the handler, wrapped in ``middleware``, on one job in the child; a child that
        dies fails the attempt. ``started()`` is called when the child begins the job (its
        start-up is over)."""
        try:
            conn = self.start()
        except Exception as e:
            message = f"ChildProcessError: could not start the handler's process: {e}"
            return Failed(message, message, False)
        try:
            packed = pickle.dumps((job_id, fields, middleware))
        except Exception as e:  # checked by use() and process(): not expected
            text = f"ChildProcessError: the job could not be sent to the handler's process: {e}"
            return Failed(text, text, False)
        try:
            conn.send_bytes(packed)
            if conn.recv() == _STARTED:
                started()
            outcome: Outcome = conn.recv()
            return outcome
        except (EOFError, OSError):
            code = self._reap()
            message = f"ChildProcessError: the handler's process exited ({_exit_reason(code)})"
            return Failed(message, message, False)

    def kill(self) -> None:
        """End the running handler at once (the slot then sees the child exit)."""
        with self._lock:
            if self._process is not None and self._process.is_alive():
                self._process.kill()

    def close(self, timeout: float = 2.0) -> None:
        """Ask the child to exit; kill it if it does not within ``timeout``."""
        with self._lock:
            process, conn = self._process, self._conn
            self._process = self._conn = None
        if process is None or conn is None:
            return
        with contextlib.suppress(OSError):
            conn.send(None)
        process.join(timeout)
        if process.is_alive():
            process.kill()
            process.join()
        conn.close()

    def start(self) -> Connection:
        """The running child's pipe; starts the child when there is none (the slot calls this
        as it starts, so that its first job does not wait)."""
        with self._lock:
            if self._process is not None and self._conn is not None:
                return self._conn
            context = _context()
            parent, child = context.Pipe()
            process = context.Process(
                target=_child_main,
                args=(child, self._handler, self._connect),
                name=self._name,
                daemon=True,
            )
            process.start()
            child.close()
            self._process, self._conn = process, parent
            return parent

    def _reap(self) -> int | None:
        """Forget a child that died; return its exit code."""
        with self._lock:
            process, conn = self._process, self._conn
            self._process = self._conn = None
        if conn is not None:
            conn.close()
        if process is None:
            return None
        process.join(5)
        return process.exitcode


def _exit_reason(code: int | None) -> str:
    if code is None:
        return "exit status unknown"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


class _ChildAttempt:
    """The attempt as a child process sees it: the token its claim got, which the scripts of
    its steps and stream parts are fenced by (whether the attempt is over is the parent's to
    know: it stops the child)."""

    over = False

    def __init__(self, token: str) -> None:
        self.token = token
