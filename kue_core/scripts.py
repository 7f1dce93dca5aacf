"""The only place that runs Lua: one wrapper per transition script in ``scripts/``.

Each script is a preamble of constants from :mod:`kue_core.defaults`, then the helpers of
``scripts/lib/`` it uses, then the script's own file (:mod:`kue_core.lua_source`). On Redis 7 and
later it runs as a Redis function (``FCALL``), loaded when first missing, whose helpers are
defined once at load; before Redis 7 (or where functions are not allowed) as a script
(``EVALSHA``), which defines them again on every call. Error replies starting with a
``KUE_*`` code become the matching :mod:`kue_core.errors` exception.
"""

from __future__ import annotations

import json
import select
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal, TypeVar, cast

import hiredis
import redis
from redis.commands.core import Script
from redis.connection import AbstractConnection
from redis.exceptions import ConnectionError, NoScriptError, ResponseError

from . import calls
from .calls import Call, Op, Read
from .cluster import Redirected
from .defaults import REDIRECT_PATIENCE, REPLICA_TIMEOUT_MS
from .errors import SCRIPT_ERRORS, HasDependents, JobNotFound, KueError, NotReplicated
from .keys import Keys
from .lua_source import SCRIPT_NAMES, Library, function_library, script_source
from .retry import Pauses

T = TypeVar("T")


def translate(error: ResponseError) -> Exception:
    """Map a script's ``KUE_*`` error reply to its exception; other errors pass through."""
    code, _, detail = str(error).partition(" ")
    cls = SCRIPT_ERRORS.get(code)
    if cls is None:
        return error
    if cls is JobNotFound:
        return JobNotFound(int(detail) if detail.isdigit() else detail)
    if cls is HasDependents:
        job_id, _, waiting = detail.partition(" ")
        return HasDependents(int(job_id), [int(d) for d in waiting.split(",") if d])
    return cls(detail)


#: A claimed job: its id and its hash (see ``claim.lua``).
Claimed = tuple[int, dict[str, str]]
#: What a claim gives when the type is paused (see ``pause.lua``).
PAUSED: Final = "paused"
#: What a claim gives when no job is waiting for this worker and the type has pinned jobs:
#: the worker also waits on its own wake-up list of the type (see :mod:`kue_core.pins`).
PINS: Final = "pins"


@dataclass(frozen=True)
class Held:
    """What a claim gives when the type's limits hold it back: try again in ``wait_ms``
    (sooner when woken on the type's ``limited`` list)."""

    wait_ms: int


@dataclass(frozen=True)
class Waits:
    """What a claim from several types gives when none had a job: per type, in the order
    asked, None (none waiting), ``PAUSED``, or ``Held``."""

    each: tuple[Literal["paused", "pins"] | Held | None, ...]


#: What a claim gives: a job, ``PAUSED``, ``PINS``, ``Held``, ``Waits`` (several types), or
#: None when no job is waiting.
Claim = Claimed | Literal["paused", "pins"] | Held | Waits | None
#: The claim a finishing script makes next: worker id, lease ms, and the types to claim from
#: in order (left out: the finished job's type).
Next = tuple[str, int] | tuple[str, int, Sequence[str]]


def _claimed(reply: Sequence[Any]) -> Claim:
    """``{id, field, value, ...}`` -> (id, hash); ``{'paused'}`` -> ``PAUSED``; ``{'pins'}``
    -> ``PINS``; ``{'limited', ms}`` -> ``Held``; None for an empty reply."""
    if not reply:
        return None
    if reply[0] == PAUSED:
        return PAUSED
    if reply[0] == PINS:
        return PINS
    if reply[0] == "limited":
        return Held(int(reply[1]))
    if reply[0] == "wait":
        return Waits(tuple(_wait(w) for w in reply[1:]))
    it = iter(reply[1:])
    return int(reply[0]), dict(zip(it, it, strict=True))


def _completed(reply: Sequence[Any], tally: Callable[[int, int], None] | None) -> tuple[str, Claim]:
    """``complete.lua``'s reply -> (outcome, next job), telling ``tally`` what to count."""
    if tally is None:
        return reply[0], _claimed(reply[1:])
    if reply[1] != "":
        tally(int(reply[1]), int(reply[2]))
    return reply[0], _claimed(reply[3:])


def _wait(why: str) -> Literal["paused", "pins"] | Held | None:
    """One type's entry of a ``{'wait', ...}`` reply (see ``Waits``)."""
    if why == "":
        return None
    if why == PAUSED:
        return PAUSED
    if why == PINS:
        return PINS
    return Held(int(why))


def _no_functions(error: ResponseError) -> bool:
    """Whether ``error`` says the server has no Redis functions (before Redis 7: "unknown
    command `FCALL`") or this user may not call or load them (ACL: "no permissions to run the
    'fcall' command", or 'function|load'); never an error raised inside a function."""
    text = str(error).lower()
    if text.startswith("unknown command"):
        return text.startswith(("unknown command `fcall`", "unknown command `function`"))
    return "no permissions to run the 'fcall' command" in text or (
        "no permissions to run the 'function|load' command" in text
    )


def _unsent(result: Any) -> bool:
    """Whether a batched call did not run and may be sent again: its script or function was
    missing (:func:`_unrun`), or Redis Cluster redirected it."""
    return isinstance(result, Redirected) or _unrun(result)


def _unrun(result: Any) -> bool:
    """Whether a pipelined script's result says it did not run for want of its script or
    function (:meth:`Scripts._recovered` tells which)."""
    return isinstance(result, NoScriptError) or (
        isinstance(result, ResponseError)
        and (str(result).startswith("Function not found") or _no_functions(result))
    )


def _pack(*args: Any) -> bytes:
    """One command in Redis's protocol, packed in C."""
    packed: bytes = hiredis.pack_command(args)
    return packed


def _next(claim: Next | None) -> list[Any]:
    """The ARGV tail of a finishing script's claim (see ``claim_after`` in lib/claims.lua)."""
    if claim is None:
        return ["", ""]
    worker_id, lease_ms, *types = claim
    return [worker_id, lease_ms, *(types[0] if types else ())]


def confirmed(replicas: Any, wanted: int) -> None:
    """Raise ``NotReplicated`` unless ``WAIT``'s reply counts ``wanted`` replicas."""
    if int(replicas) < wanted:
        raise NotReplicated(
            f"only {replicas} of {wanted} replicas confirmed the save within "
            f"{REPLICA_TIMEOUT_MS} ms: the jobs are not acknowledged"
        )


@dataclass(frozen=True)
class Holder:
    """Another process registered under the worker id asked for (``heartbeat.lua``'s reply
    ``taken``): its description (host, pid, ...), its last heartbeat, its lease (0: unknown)
    and the server's time, all in ms, and its instance."""

    info: dict[str, Any]
    heartbeat: int
    lease_ms: int
    now: int
    instance: str

    @classmethod
    def parse(cls, reply: Sequence[Any]) -> Holder:
        try:
            info = json.loads(reply[1])
        except ValueError:
            info = None
        heartbeat, lease_ms, now = (int(v) for v in reply[2:5])
        return cls(info if isinstance(info, dict) else {}, heartbeat, lease_ms, now, reply[5])


def _stale(conn: AbstractConnection) -> bool:
    """Whether the connection is readable before we asked anything: the server closed it
    (restart, timeout, CLIENT KILL) or left a stray reply. Either way, it must not be used."""
    sock = getattr(conn, "_sock", None)
    if sock is not None:
        try:
            # One syscall: the usual answer, "nothing to read", costs a microsecond.
            if not select.select([sock], [], [], 0)[0]:
                return False
        except ValueError:
            pass  # a descriptor select() cannot watch (above FD_SETSIZE): ask redis-py
        except OSError:
            return True
    try:
        return bool(conn.can_read(timeout=0))
    except ConnectionError:
        return True


class _Held:
    """A connection held by one thread; given back to the pool when the thread ends."""

    def __init__(self, pool: redis.ConnectionPool) -> None:
        self.conn: AbstractConnection = pool.get_connection()
        weakref.finalize(self, pool.release, self.conn)


class _Redirects:
    """Pacing for resending a script Redis Cluster redirected: at once (a moved slot is
    served at once by its new owner), then backing off while a migration goes on, for at
    most ``REDIRECT_PATIENCE`` seconds."""

    def __init__(self) -> None:
        self.count = 0
        self.pauses = Pauses(0.005, 0.25)
        self.deadline = time.monotonic() + REDIRECT_PATIENCE

    def pause(self, error: Redirected) -> float:
        """How long to wait before sending again; ``error`` itself once out of patience."""
        if time.monotonic() >= self.deadline:
            raise error
        self.count += 1
        return self.pauses.next() if self.count > 1 else 0.0


class Scripts:
    """The transition scripts, bound to one Redis client and one key prefix.

    Transitions are the hot path (one per save, claim, complete...), so each thread keeps one
    pooled connection and talks to it directly, skipping the pool's per-command checkout:
    this is a third of the cost of a ``save()`` on loopback.
    """

    def __init__(self, client: redis.Redis, keys: Keys, replicas: int = 0) -> None:
        self._client = client
        self._keys = keys
        #: Replicas that must confirm a save before it returns (Redis ``WAIT``).
        self.replicas = replicas
        self._local = threading.local()
        self._scripts: dict[str, Script] = {
            name: client.register_script(script_source(name)) for name in SCRIPT_NAMES
        }
        self._libraries: dict[str, Library] = {
            name: function_library(name) for name in SCRIPT_NAMES
        }
        #: Whether the scripts run as Redis functions: until the server says it has none.
        self.functions = True

    def _command(self, name: str) -> tuple[str, str]:
        """How script ``name`` is called: ``FCALL`` and its function, or ``EVALSHA`` and its
        digest."""
        if self.functions:
            return "FCALL", self._libraries[name].name
        return "EVALSHA", self._scripts[name].sha

    def _recovered(self, name: str, error: ResponseError) -> bool:
        """Whether ``error`` says that script ``name`` did not run for want of its function,
        made right: the library is loaded (the server lost it: a restart without persistence,
        ``FUNCTION FLUSH``, a cluster node that never had it), or, on a server without
        functions (before Redis 7, or one whose users may not call or load them), the scripts
        go back to ``EVALSHA`` for good."""
        if _no_functions(error):
            # Also when another thread found out first: this call was sent as FCALL before.
            self.functions = False
            return True
        if not self.functions:
            return False
        text = str(error)
        if not text.startswith("Function not found"):
            return False
        try:
            self._client.execute_command("FUNCTION", "LOAD", self._libraries[name].code)  # type: ignore[no-untyped-call]
        except ResponseError as e:
            if _no_functions(e):
                self.functions = False
            elif "already exists" not in str(e):
                raise  # another process loaded it meanwhile, or the code is wrong
        return True

    def _connection(self) -> AbstractConnection:
        held: _Held | None = getattr(self._local, "held", None)
        if held is None:
            held = self._local.held = _Held(self._client.connection_pool)
        conn = held.conn
        if _stale(conn):
            conn.disconnect()  # type: ignore[no-untyped-call]
        return conn

    @staticmethod
    def _send(conn: AbstractConnection, packed: bytes) -> None:
        if getattr(conn, "_sock", None) is None:
            # Connect through connect(), not send's shortcut to the last address: Sentinel
            # finds the current primary there.
            conn.connect()  # type: ignore[no-untyped-call]
        conn.send_packed_command([packed])  # type: ignore[no-untyped-call]

    def _run(self, name: str, key: str, *args: Any, replicated: bool = False) -> Any:
        """Run script ``name``; with ``replicated``, return only once ``self.replicas``
        replicas have its writes."""
        conn = self._connection()
        failures = 0
        redirected: _Redirects | None = None
        while True:
            # Every argument is an int or a valid str (validated or ASCII JSON): hiredis packs
            # them in C, which is most of the client-side cost of a call.
            packed = _pack(*self._command(name), 1, key, self._keys.prefix, *args)
            try:
                self._send(conn, packed)
            except ConnectionError:
                # Nothing reached Redis: safe to send again on a fresh connection.
                conn.disconnect()  # type: ignore[no-untyped-call]
                failures += 1
                if failures == 3:
                    raise
                continue
            try:
                reply = conn.read_response()
                if replicated and self.replicas:
                    # WAIT counts the replicas that have this connection's writes so far.
                    self._send(conn, _pack("WAIT", self.replicas, REPLICA_TIMEOUT_MS))
                    confirmed(conn.read_response(), self.replicas)
                return reply
            except NoScriptError:
                # The server lost its script cache (restart, SCRIPT FLUSH): load and resend.
                failures += 1
                if failures == 3:
                    raise ConnectionError(f"could not run the {name} script") from None
                self._client.script_load(self._scripts[name].script)
            except Redirected as e:
                # It did not run: the cluster moved the slot, or is moving it. Resend (to the
                # new owner) for as long as a move may take.
                if e.elsewhere:
                    conn.disconnect()  # type: ignore[no-untyped-call]
                redirected = redirected or _Redirects()
                time.sleep(redirected.pause(e))
            except ResponseError as e:
                if not self._recovered(name, e):
                    raise translate(e) from None
                failures += 1
                if failures == 3:
                    raise ConnectionError(f"could not run the {name} function") from None
            except BaseException:
                # The reply is unknown (and may still arrive): never reuse this connection.
                conn.disconnect()  # type: ignore[no-untyped-call]
                raise

    def call(self, c: Call[T]) -> T:
        """Run one script call (see :mod:`kue_core.calls`); its reply, read."""
        return c.parse(self._run(c.name, c.key, *c.args, replicated=c.replicated))

    def drive(self, op: Op[T]) -> T:
        """Run an operation of several steps (see :mod:`kue_core.ops`) to its end. A
        ``KueError`` of a step is raised inside the operation, which may answer it."""
        reply: Any = None
        error: KueError | None = None
        try:
            while True:
                try:
                    step = op.send(reply) if error is None else op.throw(error)
                except StopIteration as done:
                    return cast(T, done.value)
                reply, error = None, None
                try:
                    if step.__class__ is Call:  # the common step first
                        reply = self.call(step)
                    else:
                        reply = self.batch(step) if isinstance(step, list) else self._step(step)
                except KueError as e:
                    error = e
        finally:
            op.close()  # a step that raised past it: its spans and clean-ups end now

    def _step(self, step: Call[Any] | Read) -> Any:
        if isinstance(step, Read):
            if not step.commands:
                return []
            if len(step.commands) == 1:
                return [self._client.execute_command(*step.commands[0])]  # type: ignore[no-untyped-call]
            pipe = self._client.pipeline(transaction=False)
            for command in step.commands:
                pipe.execute_command(*command)  # type: ignore[no-untyped-call]
            return pipe.execute()
        return self.call(step)

    def save(self, rows: Sequence[Sequence[Any]]) -> list[int]:
        """Store jobs given as rows of ``SAVE_WIDTH`` values in one call; returns their ids."""
        return self.call(calls.save(self._keys, rows))

    def batch(self, batch: Sequence[Call[T]]) -> list[T]:
        """Several calls of one script (``save``), pipelined in one round trip; each one's
        reply, read. The first error raises, once every call that could run has."""
        if not batch:
            return []
        name = batch[0].name
        results = self._pipelined(batch)
        loads = 0
        redirects: _Redirects | None = None
        while missing := [r for r in results if _unsent(r)]:
            # Redo the calls that did not run; the others are stored already, and are never
            # sent twice.
            if isinstance(missing[0], Redirected):
                # The cluster moved the slot, or is moving it: to the new owner, paced.
                redirects = redirects or _Redirects()
                time.sleep(redirects.pause(missing[0]))
            elif loads == 2:
                break
            else:
                # The server lost the script or function (restart, flush) or has no
                # functions: load it (or fall back to EVALSHA).
                loads += 1
                if isinstance(missing[0], NoScriptError):
                    self._client.script_load(self._scripts[name].script)
                elif not self._recovered(name, missing[0]):
                    break
            redo = [c for c, r in zip(batch, results, strict=True) if _unsent(r)]
            again = iter(self._pipelined(redo))
            results = [next(again) if _unsent(r) else r for r in results]
        for r in results:
            if isinstance(r, ResponseError):
                raise translate(r)
            if isinstance(r, Exception):
                raise r
        return [c.parse(r) for c, r in zip(batch, results, strict=True)]

    def _pipelined(self, batch: Sequence[Call[Any]]) -> list[Any]:
        """Send ``batch`` in one write on this thread's connection and read each reply (an
        error reply, or a redirect, as the exception in its place). Sent once: a redis-py
        pipeline would send it all again after a lost connection or a redirect, and the
        calls that had run would run twice."""
        waits = bool(self.replicas) and any(c.replicated for c in batch)
        packed = b"".join(
            _pack(*self._command(c.name), 1, c.key, self._keys.prefix, *c.args) for c in batch
        )
        if waits:
            packed += _pack("WAIT", self.replicas, REPLICA_TIMEOUT_MS)
        conn = self._connection()
        results: list[Any] = []
        try:
            self._send(conn, packed)
            for _ in range(len(batch) + waits):
                try:
                    results.append(conn.read_response())
                except (ResponseError, Redirected) as e:  # one error reply: still in step
                    results.append(e)
        except BaseException:
            conn.disconnect()  # type: ignore[no-untyped-call]
            raise
        if any(isinstance(r, Redirected) and r.elsewhere for r in results):
            conn.disconnect()  # type: ignore[no-untyped-call]  # to the new owner next time
        if waits:
            replicas = results.pop()
            if isinstance(replicas, Exception):
                raise replicas
            confirmed(replicas, self.replicas)
        return results

    def retain(self, limit: int) -> tuple[int, int]:
        """The retention sweep: (jobs found finished by others, jobs removed)."""
        found, removed = self._run("retain", self._keys.finished_cursor, limit)
        return int(found), int(removed)

    def set_state(self, job_id: int, state: str) -> str:
        return self.call(calls.set_state(self._keys, job_id, state))

    def set_priority(self, job_id: int, priority: int) -> None:
        self.call(calls.set_priority(self._keys, job_id, priority))

    def progress(self, job_id: int, percent: int, data_json: str) -> None:
        self._run("progress", self._keys.job(job_id), job_id, percent, data_json)

    def log(self, job_id: int, line: str) -> int:
        count: int = self._run("log", self._keys.job(job_id), job_id, line)
        return count

    # -- dependencies (see kue_core/flows.py) ---------------------------------------------
    def unblock(self, limit: int) -> int:
        """The dependencies sweep: how many awaited jobs it found ended (by Node Kue)."""
        return int(self._run("unblock", self._keys.awaited, limit))

    # -- job control (see kue_core/control.py): each returns a state ----------------------
    def wait_for_token(
        self, lists: Sequence[tuple[str, bool]], timeout: float, blocked: Callable[[int], None]
    ) -> bool:
        """Block until one of the wake-up ``lists`` (key, whether its token is left there)
        has a token or ``timeout`` seconds pass; a token left is put back (claims take them).
        ``blocked(client_id)`` is called as the wait starts, so that another connection can
        end it early with ``CLIENT UNBLOCK``. True if woken by a token."""
        conn = self._connection()
        seconds = max(timeout, 0.001)  # 0 would block for ever
        if len(lists) == 1 and lists[0][1]:
            key = lists[0][0]
            wait = _pack("BLMOVE", key, key, "RIGHT", "LEFT", seconds)
        else:
            wait = _pack("BLPOP", *(key for key, _ in lists), seconds)
        try:
            self._send(conn, _pack("CLIENT", "ID") + wait)
            blocked(int(conn.read_response()))
            reply = conn.read_response()
        except BaseException:
            conn.disconnect()  # type: ignore[no-untyped-call]
            raise
        if isinstance(reply, list):
            key = reply[0].decode() if isinstance(reply[0], bytes) else reply[0]
            if dict(lists).get(key):
                self._client.lpush(key, reply[1])  # not ours to take
        return reply is not None

    # -- worker transitions ---------------------------------------------------------------
    def claim(self, job_types: str | Sequence[str], worker_id: str, lease_ms: int) -> Claim:
        """The best inactive job of ``job_types`` (one, or several tried in order), now
        active under a lease. For one type: None when none is waiting, ``PAUSED`` when the
        type is paused, ``Held`` when its limits hold it back; for several, ``Waits``."""
        types = [job_types] if isinstance(job_types, str) else list(job_types)
        key = self._keys.type_state(types[0], "inactive")
        return _claimed(self._run("claim", key, worker_id, lease_ms, *types))

    def complete(
        self,
        job_id: int,
        token: str,
        result_json: str,
        claim: Next | None,
        tally: Callable[[int, int], None] | None = None,
    ) -> tuple[str, Claim]:
        """Complete a job held under ``token``; with ``claim`` (worker id, lease ms, types:
        none for the job's own), also claim the next job in the same call. Returns (outcome,
        next job). With ``tally``, the caller counts the completion (see
        :mod:`kue_core.tally`): the script leaves the counters alone and ``tally(at_ms,
        duration_ms)`` is called with what to count, unless there is nothing to."""
        nxt = _next(claim)
        counted = "1" if tally is not None else ""
        key = self._keys.job(job_id)
        reply = self._run("complete", key, job_id, token, result_json, counted, *nxt)
        return _completed(reply, tally)

    def fail(
        self,
        job_id: int,
        token: str,
        message: str,
        text: str,
        retry_delay: int,
        claim: Next | None,
    ) -> tuple[str, Claim]:
        """Fail an attempt (``retry_delay`` ms before the retry; -1 = never retry); like
        :meth:`complete` for ``claim``. Returns (outcome, next job)."""
        nxt = _next(claim)
        reply = self._run(
            "fail", self._keys.job(job_id), job_id, token, message, text, retry_delay, *nxt
        )
        return reply[0], _claimed(reply[1:])

    def release(self, job_id: int, token: str, rate_limited_ms: int | None = None) -> bool:
        """Give an unfinished job back, no attempt counted: to inactive (worker shutdown), or
        delayed ``rate_limited_ms``, its type held back as long (``RateLimited``). False if
        not held under ``token``."""
        wait = "" if rate_limited_ms is None else rate_limited_ms
        return bool(self._run("release", self._keys.job(job_id), job_id, token, wait))

    def heartbeat(
        self,
        worker_id: str,
        lease_ms: int,
        info_json: str,
        held: Sequence[tuple[int, str]],
        *,
        instance: str = "",
        mode: str = "beat",
    ) -> list[tuple[int, str]] | Holder:
        """Register the worker as ``instance`` and renew the leases in ``held`` (id, token);
        returns the (id, token) pairs whose lease is lost. ``mode`` ``start``, ``force`` or
        ``leave`` (deregister): see ``heartbeat.lua``. A :class:`Holder` when another
        instance holds the id: nothing was written."""
        pairs = [v for pair in held for v in pair]
        reply = self._run(
            "heartbeat",
            self._keys.leases,
            worker_id,
            instance,
            mode,
            lease_ms,
            info_json,
            len(held),
            *pairs,
        )
        if reply[0] == "taken":
            return Holder.parse(reply)
        it = iter(reply[1:])
        return [(int(i), str(token)) for i, token in zip(it, it, strict=True)]

    def recover(self, stall_limit: int, limit: int) -> tuple[int, int]:
        """Requeue (or fail, past ``stall_limit``) jobs whose lease expired: (requeued, failed)."""
        requeued, failed = self._run("recover", self._keys.leases, stall_limit, limit)
        return int(requeued), int(failed)

    def pause(self, job_type: str) -> bool:
        """Stop claims of ``job_type``; False when it was paused already."""
        return self.call(calls.pause(self._keys, job_type))

    def promote(self, limit: int) -> tuple[int, int, int, int]:
        """Move due delayed jobs to inactive: (moved, next due ms or -1, server time ms, next
        due time of a schedule or -1)."""
        moved, next_due, now, schedule = self._run("promote", self._keys.state("delayed"), limit)
        return int(moved), int(next_due), int(now), int(schedule)

    # -- schedules (see kue_core/schedules.py) --------------------------------------------
    def tick(
        self,
        key: str,
        due: int | None,
        rev: str,
        at: int,
        rows: Sequence[Sequence[Any]],
        unique: Sequence[Any] | None = None,
    ) -> tuple[str, list[int], int]:
        """Fire a schedule (see :func:`kue_core.calls.tick`)."""
        return self.call(calls.tick(self._keys, key, due, rev, at, rows, unique))

    # -- kue doctor (see kue_core/doctor/) ----------------------------------------------
    def inspect(
        self, jobs: Sequence[tuple[str, Sequence[str]]], types: Sequence[str]
    ) -> tuple[int, list[Any], list[Any]]:
        """A consistent snapshot of ``jobs`` (id, further set names to look in) and of the
        wake-up tokens of ``types``; writes nothing (see ``inspect.lua``)."""
        flat = [v for jid, names in jobs for v in (jid, len(names), *names)]
        now, found, counts = self._run(
            "inspect", self._keys.jobs, len(jobs), len(types), *flat, *types
        )
        return int(now), found, counts

    def screen(
        self, name: str, members: Sequence[str], lists: Sequence[tuple[int, str]]
    ) -> tuple[list[str], list[tuple[int, str]]]:
        """The ``members`` of the index set ``name`` (its key without the prefix) whose job may
        not belong there, and the job ``lists`` (id, ``log`` or ``history``) that exist while
        their job does not; writes nothing (see ``screen.lua``)."""
        flat = [v for pair in lists for v in pair]
        suspects, orphans = self._run(
            "screen", self._keys.jobs, name, len(members), *members, *flat
        )
        it = iter(orphans)
        return list(suspects), [(int(i), str(part)) for i, part in zip(it, it, strict=True)]

    def repair(self, actions: Sequence[tuple[str, str, str, str]]) -> list[int]:
        """Run repair actions (name and three values each, see ``repair.lua``); 1 for each
        that changed something, 0 for each that found nothing left to do."""
        done = self._run("repair", self._keys.jobs, len(actions), *calls.flat(actions))
        return [int(d) for d in done]
