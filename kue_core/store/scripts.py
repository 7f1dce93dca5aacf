"""The transition scripts, one method each, kept for one release: each runs its call of
:mod:`kue_core.store.calls` (``self.call(calls.claim(keys, ...))``, which new code writes
itself) and gives its reply in the shape it always had. :class:`kue_core.store.transport.Transport`,
which it extends, runs them; see :mod:`kue_core.store.lua_source` for how each script is put
together."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, cast

from . import calls
from .calls import Claim, Holder, Inspected, Next, Promoted, Recovered, Retained
from .transport import Transport


class Scripts(Transport):
    """The transition scripts, bound to one Redis client and one key prefix."""

    # -- a saved job --------------------------------------------------------------------------
    def set_state(self, job_id: int, state: str) -> str:
        return self.call(calls.set_state(self._keys, job_id, state))

    def set_priority(self, job_id: int, priority: int) -> None:
        self.call(calls.set_priority(self._keys, job_id, priority))

    def progress(self, job_id: int, percent: int, data_json: str) -> None:
        self.call(calls.progress(self._keys, job_id, percent, data_json))

    def log(self, job_id: int, line: str) -> int:
        return self.call(calls.log(self._keys, job_id, line))

    def pause(self, job_type: str) -> bool:
        return self.call(calls.pause(self._keys, job_type))

    # -- the worker's transitions -----------------------------------------------------------
    def claim(self, job_types: str | Sequence[str], worker_id: str, lease_ms: int) -> Claim:
        return self.call(calls.claim(self._keys, job_types, worker_id, lease_ms))

    def complete(
        self,
        job_id: int,
        token: str,
        result_json: str,
        claim: Next | None,
        tally: Callable[[int, int], None] | None = None,
    ) -> tuple[str, Claim]:
        """(outcome, next job); ``tally(at_ms, duration_ms)`` is told what to count, if any
        (see :func:`kue_core.store.calls.complete`)."""
        c = calls.complete(self._keys, job_id, token, result_json, claim, tally is not None)
        ended = self.call(c)
        if tally is not None and ended.tally is not None:
            tally(*ended.tally)
        return ended.outcome, ended.next_job

    def fail(
        self,
        job_id: int,
        token: str,
        message: str,
        text: str,
        retry_delay: int,
        claim: Next | None,
    ) -> tuple[str, Claim]:
        """(outcome, next job)."""
        c = calls.fail(self._keys, job_id, token, message, text, retry_delay, claim)
        ended = self.call(c)
        return ended.outcome, ended.next_job

    def release(self, job_id: int, token: str, rate_limited_ms: int | None = None) -> bool:
        return self.call(calls.release(self._keys, job_id, token, rate_limited_ms))

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
        c = calls.heartbeat(
            self._keys, worker_id, lease_ms, info_json, held, instance=instance, mode=mode
        )
        return cast("list[tuple[int, str]] | Holder", self.call(c))

    # -- sweeps -------------------------------------------------------------------------------
    def recover(self, stall_limit: int, limit: int) -> Recovered:
        return self.call(calls.recover(self._keys, stall_limit, limit))

    def promote(self, limit: int) -> Promoted:
        return self.call(calls.promote(self._keys, limit))

    def retain(self, limit: int) -> Retained:
        return self.call(calls.retain(self._keys, limit))

    def unblock(self, limit: int) -> int:
        return self.call(calls.unblock(self._keys, limit))

    def tick(
        self,
        key: str,
        due: int | None,
        rev: str,
        at: int,
        rows: Sequence[Sequence[Any]],
        unique: Sequence[Any] | None = None,
    ) -> tuple[str, list[int], int]:
        return self.call(calls.tick(self._keys, key, due, rev, at, rows, unique))

    # -- kue doctor ---------------------------------------------------------------------------
    def inspect(self, jobs: Sequence[tuple[str, Sequence[str]]], types: Sequence[str]) -> Inspected:
        return self.call(calls.inspect(self._keys, jobs, types))

    def screen(
        self, name: str, members: Sequence[str], lists: Sequence[tuple[int, str]]
    ) -> tuple[list[str], list[tuple[int, str]]]:
        return self.call(calls.screen(self._keys, name, members, lists))

    def repair(self, actions: Sequence[tuple[str, str, str, str]]) -> list[int]:
        return self.call(calls.repair(self._keys, actions))
