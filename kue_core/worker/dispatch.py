"""The worker loop's dispatcher: the slots' completions and claims go to Redis together.

A slot hands :class:`Dispatcher` a completion (with the types to claim its next job from) or
a claim, and waits for its answer. What the slots hand it while a call is on its way goes out
in the next call, as one script call: the completions of k jobs with the claims of the next
jobs for the slots they free (``complete_batch.lua``), and one claim of up to n jobs for the
slots that asked with the same types (``claim_batch.lua``). Nothing waits for company: what an
idle dispatcher is handed goes out once the loop has run what was ready with it (the other
slots woken by the same reply), and a request that is alone then goes as the single-job
script (``complete.lua``, ``claim.lua``) it would have been without batching.

Each answer is a slot's own: its completion's :class:`~kue_core.store.calls.Reported` and the
job claimed for it, or (when fewer jobs were waiting than slots asked) why there was none, from
which the slot picks the lists to wait on. When a call fails, every slot in it gets the error.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass

from ..base.keys import Keys
from ..store import calls
from ..store.aio_transport import AsyncTransport
from ..store.calls import Claim, Next, Reported

#: The most completions (and claims) one call carries: more wait for the next call.
BATCH_MOST = 64
#: Calls on their way at once, each with a share of the slots: while Redis runs one, the
#: slots of the other run their handlers, so Redis and the worker work at the same time.
#: Measured with 16 slots of no-op handlers: one call of 16 at a time costs Redis the least
#: (288k instructions a job drained, against 337k for two calls of 8) but leaves each side
#: idle while the other works (async def: 8-9k jobs/s, against 19k with two; 4 calls of 4:
#: 11k).
IN_FLIGHT = 2


@dataclass(eq=False)
class _Ask:
    """One slot's request: a completion (``job_id`` set) and/or a claim (``order`` not empty)."""

    order: tuple[str, ...]
    future: asyncio.Future[tuple[Reported | None, Claim]]
    job_id: int = 0
    token: str = ""
    result: str = ""
    #: What its call gave it: its completion's report, and the job claimed for it.
    reported: Reported | None = None
    claimed: Claim = None


class Dispatcher:
    """Sends the slots' completions and claims of one worker process (see the module doc)."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        transport: AsyncTransport,
        keys: Keys,
        worker_id: str,
        lease_ms: int,
    ):
        #: The loop it runs on (asking asyncio for the running one costs a getpid() on 3.11).
        self._loop = loop
        self._redis = transport
        self._keys = keys
        self._id = worker_id
        self._lease_ms = lease_ms
        self._queued: list[_Ask] = []
        self._senders = 0  # tasks sending: at most IN_FLIGHT
        #: The slots that ask: with one, nothing can join a call, which goes from the
        #: asking task itself.
        self.company = 0

    def complete(
        self, job_id: int, token: str, result: str, order: Sequence[str]
    ) -> Awaitable[tuple[Reported | None, Claim]]:
        """Complete a job held under ``token`` (``result``: JSON) and claim the slot's next one
        from ``order`` (none when empty): awaited, the completion's report (None only when
        the call failed, which raises), and the job claimed (or why there was none)."""
        return self._ask(_Ask(tuple(order), self._future(), job_id, token, result))

    async def claim(self, order: Sequence[str]) -> Claim:
        """The best waiting job of the types in ``order`` (or why there was none)."""
        _, claimed = await self._ask(_Ask(tuple(order), self._future()))
        return claimed

    def _future(self) -> asyncio.Future[tuple[Reported | None, Claim]]:
        return self._loop.create_future()

    async def _ask(self, ask: _Ask) -> tuple[Reported | None, Claim]:
        if self.company <= 1 and not self._senders:
            await self._send([ask])
            return ask.future.result()
        self._queued.append(ask)
        if self._senders < IN_FLIGHT:
            # Sent by a task of its own, which starts once the loop has run what is ready
            # now: the other slots a reply woke in the same turn ask before it sends, so a
            # reply that gave 16 slots their jobs is followed by one call, not a call of one
            # and then one of 15. Nothing waits for more than that turn.
            self._senders += 1
            self._loop.create_task(self._send_all())
        return await ask.future

    async def _send_all(self) -> None:
        """Send what is queued, then what was queued meanwhile, until nothing is (counted
        in ``_senders`` by the caller)."""
        try:
            # A share of the slots a call: the others' call goes out behind it, and Redis
            # runs it while this one's slots run their handlers.
            most = min(BATCH_MOST, max(1, -(-self.company // IN_FLIGHT)))
            while self._queued:
                batch, self._queued = self._queued[:most], self._queued[most:]
                try:
                    await self._send(batch)
                except Exception as e:  # each slot reports it and tries again
                    for ask in batch:
                        _answer(ask, error=e)
                # The slots this call answered ask again in the loop's next turn: they join
                # what waits (else a share split once, 8 as 4 + 4, say, stays split).
                await asyncio.sleep(0)
        finally:
            self._senders -= 1

    async def _send(self, batch: list[_Ask]) -> None:
        if len(batch) == 1:
            await self._alone(batch[0])
            return
        groups: dict[tuple[str, ...], list[_Ask]] = {}
        for ask in batch:
            if ask.order:
                groups.setdefault(ask.order, []).append(ask)
        # The completions carry the claims of the largest group; the other groups claim
        # apart, in the same write (the transport pipelines the calls made at once).
        done = [a for a in batch if a.job_id]
        first = max(groups, key=lambda o: len(groups[o]), default=None) if done else None
        sent = []
        if done:
            claiming = groups.pop(first) if first is not None else []
            sent.append(self._complete(done, first, claiming))
        sent.extend(self._claim(order, asks) for order, asks in groups.items())
        failed = [r for r in await asyncio.gather(*sent, return_exceptions=True) if r is not None]
        for ask in batch:
            if ask.job_id and ask.reported is None:  # its completion's call failed
                _answer(ask, error=failed[0])
            else:  # a claim whose call failed: none now, the slot waits and asks again
                _answer(ask, (ask.reported, ask.claimed))

    async def _alone(self, ask: _Ask) -> None:
        """One request: the single-job script, as a slot would call it alone."""
        keys = self._keys
        nxt: Next | None = None
        if ask.order:
            nxt = (self._id, self._lease_ms, list(ask.order))
        if ask.job_id:
            c = calls.complete(keys, ask.job_id, ask.token, ask.result, nxt, tallied=True)
            reported = await self._redis.call(c)
            _answer(ask, (reported, reported.next_job))
        else:
            claimed = await self._redis.call(
                calls.claim(keys, list(ask.order), self._id, self._lease_ms)
            )
            _answer(ask, (None, claimed))

    async def _complete(
        self, done: list[_Ask], order: tuple[str, ...] | None, claiming: list[_Ask]
    ) -> None:
        items = [(a.job_id, a.token, a.result) for a in done]
        claim = (self._id, self._lease_ms, len(claiming), list(order)) if order else None
        finished = await self._redis.call(calls.complete_batch(self._keys, items, claim))
        _share(claiming, finished.jobs, finished.why)
        for ask, reported in zip(done, finished.reports, strict=True):
            ask.reported = reported

    async def _claim(self, order: tuple[str, ...], asks: list[_Ask]) -> None:
        c = calls.claim_batch(self._keys, list(order), self._id, self._lease_ms, len(asks))
        batch = await self._redis.call(c)
        _share(asks, batch.jobs, batch.why)


def _answer(
    ask: _Ask,
    value: tuple[Reported | None, Claim] = (None, None),
    error: BaseException | None = None,
) -> None:
    """Answer ``ask``, unless its slot stopped waiting (its task cancelled as the loop closed:
    a job claimed for it comes back through its lease)."""
    if ask.future.done():
        return
    if error is not None:
        ask.future.set_exception(error)
    else:
        ask.future.set_result(value)


def _share(asks: list[_Ask], jobs: list[tuple[int, dict[str, str]]], why: Claim) -> None:
    """Each ask's claim: the jobs claimed, in turn, then why there were none."""
    for i, ask in enumerate(asks):
        ask.claimed = jobs[i] if i < len(jobs) else why
