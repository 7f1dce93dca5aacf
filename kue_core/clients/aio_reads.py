"""The asyncio client's transport when its payload store is slow (S3): an operation's jobs
are made as it runs, and the values they hold in the store are read once it is done, each in
a thread, so that no request to the store blocks the event loop (see
:data:`kue_core.jobs.stored_fields.DEFERRED`)."""

from __future__ import annotations

import asyncio
from typing import TypeVar

from ..jobs import stored_fields
from ..store.aio_transport import AsyncTransport
from ..store.calls import Op

T = TypeVar("T")


class ReadingTransport(AsyncTransport):
    """``AsyncTransport`` whose operations read their jobs' stored values off the loop."""

    async def drive(self, op: Op[T]) -> T:
        reads: list[tuple[stored_fields.JobSpec, str, str]] = []
        token = stored_fields.DEFERRED.set(reads)
        try:
            done = await super().drive(op)
        finally:
            stored_fields.DEFERRED.reset(token)
        for job, field, stored in reads:
            await asyncio.to_thread(stored_fields.load, job, field, stored)
        return done
