"""Both clients' side of job streams (see :mod:`kue_core.features.streams`): reading a job's
stream of partial output live. Part of ``Queue`` and of ``AsyncQueue``."""

from __future__ import annotations

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
from ..features.streams import ENDED, Part, parts

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
        key, deadline = self.keys.stream(jid), _deadline(limit)
        block = int(defaults.STREAM_POLL * 1000)
        while True:
            got: Any = self.client.xread({key: last}, count=_READ_COUNT, block=block)
            if got:
                entries = got[key] if isinstance(got, dict) else got[0][1]  # (RESP3, RESP2)
                for part in parts(entries, self.keyring):
                    last = part.id
                    yield part
                continue
            if self.client.hget(self.keys.job(jid), "state") in (None, *ENDED):
                # Ended: what it streamed last came before its end.
                rest: Any = self.client.xrange(key, f"({last}", "+")
                for part in parts(rest, self.keyring):
                    yield part
                return
            if deadline is not None and time.monotonic() >= deadline:
                raise WaitTimeout(f"job {jid} had not ended after {limit} s")


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
        key, deadline = self.keys.stream(jid), _deadline(limit)
        block = int(defaults.STREAM_POLL * 1000)
        while True:
            got: Any = await self.client.xread({key: last}, count=_READ_COUNT, block=block)
            if got:
                entries = got[key] if isinstance(got, dict) else got[0][1]
                for part in parts(entries, self.keyring):
                    last = part.id
                    yield part
                continue
            if await self.client.hget(self.keys.job(jid), "state") in (None, *ENDED):
                rest: Any = await self.client.xrange(key, f"({last}", "+")
                for part in parts(rest, self.keyring):
                    yield part
                return
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
    ms, dash, seq = text.partition("-")
    return ms.isdigit() and (not dash or seq.isdigit()) and len(text) <= 41
