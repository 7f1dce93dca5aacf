"""Both clients' side of job streams (see :mod:`kue_core.features.streams`): reading a job's
stream of partial output live. Part of ``Queue`` and of ``AsyncQueue``."""

from __future__ import annotations

import re
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import redis
import redis.asyncio

from .. import defaults
from ..base import checks
from ..base.errors import InvalidJob, WaitTimeout
from ..base.keys import Keys
from ..base.sealing import Keyring
from ..features.streams import ENDED, Part, Reading, parts

#: Entries one read takes at most.
_READ_COUNT = 100


class StreamMethods:
    """Mixed into ``Queue``."""

    client: redis.Redis
    keys: Keys
    keyring: Keyring | None

    def stream_parts(
        self, job_id: int | str, *, after: str | None = None, timeout: float | None = None
    ) -> Iterator[Part]:
        """The parts job ``job_id`` streams (``job.stream()``), oldest first, as they come:
        those after entry id ``after`` (None: from the first; a reader that stopped resumes
        with the id of the last part it had), until the job has ended (completed, failed or
        removed) and every part is read. ``timeout`` (seconds, None: no bound): how long the
        whole may take before ``WaitTimeout``. Each part holds its attempt: a retry's parts
        follow the last attempt's."""
        jid, last, limit = _checked(job_id, after, timeout)
        deadline = _deadline(limit)
        while True:
            got = self.read_stream(jid, after=last)
            for part in got.parts:
                last = part.id
                yield part
            if got.ended is not None:
                return
            _check(deadline, jid, limit)

    def read_stream(
        self, job_id: int | str, *, after: str | None = None, block: float = defaults.STREAM_POLL
    ) -> Reading:
        """One read of job ``job_id``'s stream: the parts after entry id ``after`` (at most
        100), waiting ``block`` seconds at most for one (and half the connection's socket
        timeout at most: a longer wait would be cut as a timeout); ``ended`` is the job's last state
        (``complete``, ``failed``, ``removed``) once it has ended and nothing is left to
        read, None while it may stream more. :meth:`stream_parts` is a loop of these."""
        jid, last, _ = _checked(job_id, after, None)
        key = self.keys.stream(jid)
        wait = _wait_ms(self.client, block)
        got: Any = self.client.xread({key: last}, count=_READ_COUNT, block=wait)
        if got:
            return Reading(parts(_entries(got, key), self.keyring), None)
        state = self.client.hget(self.keys.job(jid), "state")
        if state not in (None, *ENDED):
            return Reading([], None)
        # Ended: what it streamed last came before its end.
        rest: Any = self.client.xrange(key, f"({last}", "+", count=_READ_COUNT)
        return Reading(parts(rest, self.keyring), _ended(rest, state))


class AsyncStreamMethods:
    """Mixed into ``AsyncQueue``."""

    client: redis.asyncio.Redis
    keys: Keys
    keyring: Keyring | None

    async def stream_parts(
        self, job_id: int | str, *, after: str | None = None, timeout: float | None = None
    ) -> AsyncIterator[Part]:
        """``Queue.stream_parts``, as an asynchronous iterator (``async for``)."""
        jid, last, limit = _checked(job_id, after, timeout)
        deadline = _deadline(limit)
        while True:
            got = await self.read_stream(jid, after=last)
            for part in got.parts:
                last = part.id
                yield part
            if got.ended is not None:
                return
            _check(deadline, jid, limit)

    async def read_stream(
        self, job_id: int | str, *, after: str | None = None, block: float = defaults.STREAM_POLL
    ) -> Reading:
        """``Queue.read_stream``, awaited."""
        jid, last, _ = _checked(job_id, after, None)
        key = self.keys.stream(jid)
        wait = _wait_ms(self.client, block)
        got: Any = await self.client.xread({key: last}, count=_READ_COUNT, block=wait)
        if got:
            return Reading(parts(_entries(got, key), self.keyring), None)
        state = await self.client.hget(self.keys.job(jid), "state")
        if state not in (None, *ENDED):
            return Reading([], None)
        rest: Any = await self.client.xrange(key, f"({last}", "+", count=_READ_COUNT)
        return Reading(parts(rest, self.keyring), _ended(rest, state))


def _entries(got: Any, key: str) -> Any:
    """XREAD's entries of one stream (RESP3 gives a dict, RESP2 a list of pairs)."""
    return got[key] if isinstance(got, dict) else got[0][1]


def _ended(rest: list[Any], state: str | None) -> str | None:
    """An ended job's last state, once the read after its end left nothing to read."""
    return None if len(rest) >= _READ_COUNT else state or "removed"


def _wait_ms(client: Any, block: float) -> int:
    """``block`` in ms (checked), kept to half the client's socket timeout at most: Redis
    answers a blocked read only once it ends, and a socket timeout shorter than the wait
    would cut it as a failure."""
    ms = max(1, int(checks.number(block, "block", 0, 3600, " s") * 1000))
    pool = getattr(client, "connection_pool", None)
    timeout = (getattr(pool, "connection_kwargs", None) or {}).get("socket_timeout")
    return max(1, min(ms, int(timeout * 500))) if timeout else ms


def _check(deadline: float | None, jid: int, limit: float | None) -> None:
    if deadline is not None and time.monotonic() >= deadline:
        raise WaitTimeout(f"job {jid} had not ended after {limit} s")


def _checked(
    job_id: int | str, after: str | None, timeout: float | None
) -> tuple[int, str, float | None]:
    """A read's job id, where it starts, and its bound in seconds, checked."""
    jid = checks.job_id(job_id)
    if after is not None and not _entry_id(after):
        raise InvalidJob(f"after is a stream entry id (<ms>-<seq>), got {after!r:.60}")
    limit = None if timeout is None else checks.number(timeout, "timeout", 0, 86_400, " s")
    return jid, after or "0-0", limit


def _deadline(limit: float | None) -> float | None:
    return None if limit is None else time.monotonic() + limit


def _entry_id(text: str) -> bool:
    return re.fullmatch(r"[0-9]{1,19}(-[0-9]{1,19})?", text) is not None
