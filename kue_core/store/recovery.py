"""What a transport does when a call does not simply run: decisions only, no I/O, shared by the
blocking transport (:mod:`kue_core.store.transport`) and the asyncio one
(:mod:`kue_core.store.aio_transport`), which carry them out each with its own I/O.

- An error reply says what to do about the call (:func:`remedy`): Redis Cluster redirected it
  (``REDIRECT``: send it again, paced by :class:`Redirects`), the server lost the script or
  the function (``LOAD_SCRIPT``, ``LOAD_FUNCTION``, then send it again), the server has no
  functions or this user may not use them (``FALL_BACK``: ``EVALSHA`` from then on, for good),
  or it ran, or cannot (``RAISE``: :func:`translate` makes a ``KUE_*`` reply the matching
  :mod:`kue_core.base.errors` exception).
- A connection lost before the call was sent (nothing reached Redis) is made again and the call
  sent again, ``TRIES`` times at most, then given up on (:func:`unreachable`: a
  ``ConnectionFailed`` that is a ``redis.ConnectionError`` too, as plain commands that found no
  connection raise, :func:`lost`); one lost after it was sent is never sent again: the call
  may have run. A batch that finds no connection is not sent again: it raises at once.
- A save the queue's replicas must confirm is followed by ``WAIT`` (:func:`confirmed`).
- Several calls in one round trip (a batch): only those that did not run are sent again
  (:func:`unsent`, :func:`batch_remedy`, :func:`merged`), never those that did.

The loops that carry these decisions out are written once too, as generators over values (as
:mod:`kue_core.jobs.ops`'s operations are): :func:`recover_call` and :func:`recover_batch`
yield what the transport must do (:data:`Action`: send again, pause, load) and are sent what
came of it. A transport enters one only when a first send did not simply work: a call that
ran costs no generator.
"""

from __future__ import annotations

import time
from collections.abc import Generator, Sequence
from dataclasses import dataclass
from typing import Any, Final, Protocol, TypeVar, cast

from redis.exceptions import ConnectionError, NoScriptError, ResponseError

from ..base.errors import (
    SCRIPT_ERRORS,
    ConnectionFailed,
    HasDependents,
    JobNotFound,
    NotReplicated,
    Unreachable,
)
from ..base.retry import Pauses
from ..defaults import REDIRECT_PATIENCE, REPLICA_TIMEOUT_MS
from .calls import Call
from .cluster import Redirected

T = TypeVar("T")

#: Send the call again, once paced by :class:`Redirects` (on a new connection when the
#: redirect says ``elsewhere``): Redis Cluster moved the slot, or is moving it.
REDIRECT: Final = "redirect"
#: ``SCRIPT LOAD`` the script, then send the call again: the server lost its script cache
#: (a restart, ``SCRIPT FLUSH``).
LOAD_SCRIPT: Final = "load script"
#: ``FUNCTION LOAD`` the library, then send the call again: the server lost its functions (a
#: restart without persistence, ``FUNCTION FLUSH``, a cluster node that never had them).
LOAD_FUNCTION: Final = "load function"
#: Run the scripts as scripts (``EVALSHA``) from now on, and send the call again: the server
#: has no functions (before Redis 7) or this user may not call or load them (ACL).
FALL_BACK: Final = "fall back"
#: Raise the error (:func:`translate`): the call ran, or cannot run.
RAISE: Final = "raise"
#: The library was loaded (by this call or, meanwhile, by another process): send the call again.
LOADED: Final = "loaded"

#: Sends of one call (a connection lost before it was sent, or a script or function loaded)
#: before giving up.
TRIES: Final = 3


def remedy(error: Exception, functions: bool) -> str:
    """What to do about a call whose reply is the error ``error``, when the scripts run as
    functions (``functions``) or not: ``REDIRECT``, ``LOAD_SCRIPT``, ``LOAD_FUNCTION``,
    ``FALL_BACK`` or ``RAISE``. (A "Function not found" once the scripts have fallen back
    is raised: loading the function would not help.)"""
    if isinstance(error, Redirected):
        return REDIRECT
    if isinstance(error, NoScriptError):
        return LOAD_SCRIPT
    if isinstance(error, ResponseError):
        if no_functions(error):
            # Also when another call found out first: this one was sent as FCALL before.
            return FALL_BACK
        if functions and str(error).startswith("Function not found"):
            return LOAD_FUNCTION
    return RAISE


def load_failed(error: ResponseError) -> str:
    """What ``FUNCTION LOAD``'s error reply means: ``FALL_BACK`` (the user may not load
    functions), ``LOADED`` (another process loaded the library meanwhile) or ``RAISE`` (the
    code is wrong)."""
    if no_functions(error):
        return FALL_BACK
    if "already exists" in str(error):
        return LOADED
    return RAISE


def translate(error: Exception) -> Exception:
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


def no_functions(error: ResponseError) -> bool:
    """Whether ``error`` says the server has no Redis functions (before Redis 7: "unknown
    command `FCALL`") or this user may not call or load them (ACL: "no permissions to run the
    'fcall' command", or 'function|load'); never an error raised inside a function."""
    text = str(error).lower()
    if text.startswith("unknown command"):
        return text.startswith(("unknown command `fcall`", "unknown command `function`"))
    return "no permissions to run the 'fcall' command" in text or (
        "no permissions to run the 'function|load' command" in text
    )


def unreachable(name: str, error: Exception) -> Unreachable:
    """The error once script ``name``'s call found no connection ``TRIES`` times (nothing was
    sent: until then, it is sent again on a new connection)."""
    return Unreachable(f"could not send the {name} script: {error}")


def lost(error: ConnectionError) -> Exception:
    """What plain commands whose connection failed raise: ``Unreachable`` (a
    ``ConnectionFailed`` and a ``redis.ConnectionError``), unless the error is a
    ``ConnectionFailed`` already or a redirect (the commands did not run)."""
    if isinstance(error, (ConnectionFailed, Redirected)):
        return error
    return Unreachable(str(error))


def unrecoverable(name: str) -> Unreachable:
    """The error once script ``name`` was loaded ``TRIES`` times and still did not run (it
    never did: a ``redis.ConnectionError`` as before)."""
    return Unreachable(f"could not run the {name} script")


def confirmed(replicas: Any, wanted: int) -> None:
    """Raise ``NotReplicated`` unless ``WAIT``'s reply counts ``wanted`` replicas (an error
    reply, read as its exception, raises)."""
    if isinstance(replicas, Exception):
        raise replicas
    if int(replicas) < wanted:
        raise NotReplicated(
            f"only {replicas} of {wanted} replicas confirmed the save within "
            f"{REPLICA_TIMEOUT_MS} ms: the jobs are not acknowledged"
        )


class Redirects:
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


# -- batches --------------------------------------------------------------------------------
def unsent(result: Any) -> bool:
    """Whether a batched call did not run and may be sent again: its script or function was
    missing (:func:`unrun`), or Redis Cluster redirected it."""
    return isinstance(result, Redirected) or unrun(result)


def unrun(result: Any) -> bool:
    """Whether a pipelined script's result says it did not run for want of its script or
    function (:func:`remedy` tells what to do)."""
    return isinstance(result, NoScriptError) or (
        isinstance(result, ResponseError)
        and (str(result).startswith("Function not found") or no_functions(result))
    )


def batch_remedy(results: Sequence[Any], loads: int, functions: bool) -> tuple[str, Any] | None:
    """What to do about a batch's ``results`` once ``loads`` loads were made for it: None when
    every call ran (or failed: :func:`replies` raises); else the remedy (see :func:`remedy`)
    and the first error of the calls to send again (:func:`unsent`), which ``RAISE`` means to
    give up on (``TRIES - 1`` loads made already, or no load helps)."""
    first = next((r for r in results if unsent(r)), None)
    if first is None:
        return None
    what = remedy(first, functions)
    if what != REDIRECT and loads == TRIES - 1:
        return RAISE, first
    return what, first


def redo(batch: Sequence[Call[T]], results: Sequence[Any]) -> list[Call[T]]:
    """The calls of ``batch`` to send again: those whose result is :func:`unsent`."""
    return [c for c, r in zip(batch, results, strict=True) if unsent(r)]


def merged(results: Sequence[Any], again: Sequence[Any]) -> list[Any]:
    """``results`` with those :func:`unsent` replaced, in order, by ``again``: the results of
    the calls sent again."""
    more = iter(again)
    return [next(more) if unsent(r) else r for r in results]


def replies(batch: Sequence[Call[T]], results: Sequence[Any]) -> list[T]:
    """Each call's reply, read; the first error raises (a ``KUE_*`` reply translated)."""
    for r in results:
        if isinstance(r, ResponseError):
            raise translate(r)
        if isinstance(r, Exception):
            raise r
    return [c.parse(r) for c, r in zip(batch, results, strict=True)]


def settled(results: Sequence[Any]) -> bool:
    """Whether every call of a batch ran (or failed): none is to be sent again. (A loop, not
    ``all()`` over a generator: a batch that ran makes no object of recovery's.)"""
    for r in results:  # noqa: SIM110
        if unsent(r):
            return False
    return True


# -- the loops ------------------------------------------------------------------------------
class Unsent(Exception):
    """A call that reached no connection: nothing was sent, so it may be sent again."""


@dataclass(frozen=True, slots=True)
class Resend:
    """Send the call again, packed as the scripts run now (:attr:`Mode.functions`), and send
    back its reply, its error reply (a redirect too) as the exception, or an :class:`Unsent`.
    In a batch's loop, ``calls`` are those to send again (:func:`redo`), and what is sent back
    is their results."""

    calls: Sequence[Call[Any]] = ()


@dataclass(frozen=True, slots=True)
class Pause:
    """Wait ``seconds`` (a redirect, paced by :class:`Redirects`)."""

    seconds: float


@dataclass(frozen=True, slots=True)
class Load:
    """Carry out ``what`` for the script: ``LOAD_SCRIPT``, ``LOAD_FUNCTION`` (send back
    ``FUNCTION LOAD``'s error reply as the exception, else None) or ``FALL_BACK`` (run the
    scripts as scripts from now on)."""

    what: str


#: What a loop asks of the transport running it.
Action = Resend | Pause | Load
#: A loop: yields actions, is sent what came of each, returns the reply (or replies).
Loop = Generator[Action, Any, T]

_RESEND: Final = Resend()


class Mode(Protocol):
    """What a loop reads of the transport running it."""

    @property
    def functions(self) -> bool:
        """Whether the scripts run as Redis functions now (another call may have found out
        meanwhile that they cannot)."""
        ...


def recover_call(name: str, reply: Exception, mode: Mode) -> Loop[Any]:
    """The rest of a call of script ``name`` whose first send did not run it: ``reply`` is its
    error reply (a redirect too) or an :class:`Unsent`. Returns the reply once it ran; raises
    the error that ends it (:func:`translate`, :func:`unreachable`, :func:`unrecoverable`,
    a redirect out of patience). A connection lost once the call was sent is never seen
    here: the call may have run, and is not sent again."""
    tries = 0
    redirects: Redirects | None = None
    got: Any = reply
    while True:
        if isinstance(got, Unsent):
            # Nothing reached Redis (a command is run whole or not at all): safe to send
            # again, on a new connection.
            tries += 1
            if tries == TRIES:
                raise unreachable(name, got) from got
        elif isinstance(got, (ResponseError, Redirected)):
            what = remedy(got, mode.functions)
            if what == RAISE:
                raise translate(got) from None
            if what == REDIRECT:
                # It did not run: the cluster moved the slot, or is moving it. Send it again
                # (to the new owner) for as long as a move may take.
                redirects = redirects or Redirects()
                yield Pause(redirects.pause(cast(Redirected, got)))
            else:
                tries += 1
                if tries == TRIES:
                    raise unrecoverable(name) from None
                yield from _load(what)
        else:
            return got
        got = yield _RESEND


def recover_batch(calls: Sequence[Call[T]], results: list[Any], mode: Mode) -> Loop[list[T]]:
    """The rest of a batch (several calls of one script) whose first send left calls unrun
    (``results``: not :func:`settled`): only those are sent again, never those that ran.
    Returns each call's reply, read; the first error raises (see :func:`replies`)."""
    loads = 0
    redirects: Redirects | None = None
    while (todo := batch_remedy(results, loads, mode.functions)) is not None:
        what, first = todo
        if what == REDIRECT:
            redirects = redirects or Redirects()
            yield Pause(redirects.pause(first))
        elif what == RAISE:
            break
        else:
            loads += 1
            yield from _load(what)
        results = merged(results, (yield Resend(redo(calls, results))))
    return replies(calls, results)


def _load(what: str) -> Generator[Action, Any, None]:
    """Load the script or function (``what``), or fall back; a ``FUNCTION LOAD`` refused
    (:func:`load_failed`) falls back, is done with (loaded meanwhile) or raises."""
    failed = yield Load(what)
    if failed is not None:
        after = load_failed(failed)
        if after == RAISE:
            raise failed
        if after == FALL_BACK:
            yield Load(FALL_BACK)
