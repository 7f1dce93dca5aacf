"""A script call as a value: which transition script, its key and arguments, and how its reply
reads, with no I/O; plain reads (:class:`Read`); the steps and operations made of them; and the
small reply parsers the builders share. The builders, one per ``.lua`` file, are in the sibling
modules (:mod:`kue_core.store.calls`); :class:`kue_core.store.transport.Transport` runs calls on
a blocking connection and :class:`kue_core.store.aio_transport.AsyncTransport` on an asyncio
one, so both clients send the same arguments and read the same replies (see
:mod:`kue_core.jobs.ops` for operations of several steps)."""

from __future__ import annotations

from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class Call(Generic[T]):
    """One run of script ``name`` on ``key`` (its first key; the prefix is passed too) with
    ``args``; ``parse`` reads its reply. ``replicated``: the caller waits for the queue's
    replicas to confirm its writes (Redis ``WAIT``) before it counts as done. (A plain class
    with slots: one is made for every save, and a frozen dataclass costs four times more.)"""

    __slots__ = ("args", "key", "name", "parse", "replicated")

    def __init__(
        self,
        name: str,
        key: str,
        args: tuple[Any, ...],
        parse: Callable[[Any], T],
        replicated: bool = False,
    ) -> None:
        self.name = name
        self.key = key
        self.args = args
        self.parse = parse
        self.replicated = replicated

    def __repr__(self) -> str:
        return f"Call({self.name!r}, {self.key!r}, {self.args!r})"


@dataclass(frozen=True)
class Read:
    """Plain commands (each a tuple: name, arguments), sent in one round trip; the reply is
    the list of their replies. ``atomic``: run as one transaction (``MULTI``/``EXEC``), so
    that what they read is one moment's (a job moving between two sets counts once)."""

    commands: tuple[tuple[Any, ...], ...]
    atomic: bool = False


def read(*commands: tuple[Any, ...], atomic: bool = False) -> Read:
    return Read(commands, atomic)


#: One step of an operation: a script call, several calls of one script in one round trip
#: (the reply: their replies, in order), or plain commands.
Step = Call[Any] | list[Call[Any]] | Read
#: An operation: a generator that yields steps, is sent each step's reply, and returns its
#: result. Written once, run by either client (``Transport.drive``, ``AsyncTransport.drive``).
Op = Generator[Step, Any, T]


def flat(rows: Sequence[Sequence[Any]]) -> list[Any]:
    """A script's rows of values, one after another in its ARGV."""
    return [v for row in rows for v in row]


def flag(value: bool) -> str:
    """A flag in a script's ARGV: ``"1"`` or ``""``."""
    return "1" if value else ""


# -- replies the builders share ---------------------------------------------------------------
def as_is(reply: Any) -> Any:
    return reply


def nothing(reply: Any) -> None:
    return None


def ints(reply: Any) -> list[int]:
    return [int(i) for i in reply]


def integer(reply: Any) -> int:
    return int(reply)


def pair(reply: Any) -> tuple[int, int]:
    return int(reply[0]), int(reply[1])


def written(reply: Any) -> bool:
    """A reply of 1 (done) or 0."""
    return int(reply) == 1


def hash_reply(reply: Any) -> dict[str, str]:
    """An ``HGETALL`` reply as a dict (a client that does not parse it gives a flat list)."""
    if isinstance(reply, dict):
        return {str(k): str(v) for k, v in reply.items()}
    return {str(k): str(v) for k, v in zip(reply[::2], reply[1::2], strict=True)}
