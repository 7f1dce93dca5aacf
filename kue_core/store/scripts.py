"""The transition scripts of ``scripts/``, one wrapper each: what they take and what they
answer. :class:`kue_core.store.transport.Transport` runs them; see
:mod:`kue_core.store.lua_source` for how each script is put together."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from . import calls
from .claims import Claim, Holder, Next, claimed, completed, next_args
from .transport import Transport


class Scripts(Transport):
    """The transition scripts, bound to one Redis client and one key prefix."""

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

    # -- dependencies (see kue_core/features/flows.py) ---------------------------------------------
    def unblock(self, limit: int) -> int:
        """The dependencies sweep: how many awaited jobs it found ended (by Node Kue)."""
        return int(self._run("unblock", self._keys.awaited, limit))

    # -- worker transitions ---------------------------------------------------------------
    def claim(self, job_types: str | Sequence[str], worker_id: str, lease_ms: int) -> Claim:
        """The best inactive job of ``job_types`` (one, or several tried in order), now
        active under a lease. For one type: None when none is waiting, ``PAUSED`` when the
        type is paused, ``Held`` when its limits hold it back; for several, ``Waits``."""
        types = [job_types] if isinstance(job_types, str) else list(job_types)
        key = self._keys.type_state(types[0], "inactive")
        return claimed(self._run("claim", key, worker_id, lease_ms, *types))

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
        :mod:`kue_core.features.tally`): the script leaves the counters alone and ``tally(at_ms,
        duration_ms)`` is called with what to count, unless there is nothing to."""
        nxt = next_args(claim)
        counted = "1" if tally is not None else ""
        key = self._keys.job(job_id)
        reply = self._run("complete", key, job_id, token, result_json, counted, *nxt)
        return completed(reply, tally)

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
        nxt = next_args(claim)
        reply = self._run(
            "fail", self._keys.job(job_id), job_id, token, message, text, retry_delay, *nxt
        )
        return reply[-1], claimed(reply[:-1])

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

    # -- schedules (see kue_core/jobs/schedules.py) --------------------------------------------
    def tick(
        self,
        key: str,
        due: int | None,
        rev: str,
        at: int,
        rows: Sequence[Sequence[Any]],
        unique: Sequence[Any] | None = None,
    ) -> tuple[str, list[int], int]:
        """Fire a schedule (see :func:`kue_core.store.calls.tick`)."""
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
