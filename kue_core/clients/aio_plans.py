"""Schedules and limits for asyncio code: part of ``AsyncQueue`` (:mod:`kue_core.aio`), each
method running the operation ``Queue``'s runs (:mod:`kue_core.jobs.schedules`,
:mod:`kue_core.features.limits`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..base.keys import Keys
from ..features import limits
from ..jobs import schedules

if TYPE_CHECKING:
    from ..jobs.aio_job import AsyncJob
    from ..store.aio_transport import AsyncTransport

_UNSET: Any = limits._UNSET


class AsyncPlans:
    """Mixed into ``AsyncQueue``; see ``Queue``'s methods of the same names."""

    keys: Keys
    scripts: AsyncTransport

    if TYPE_CHECKING:

        def create_job(self, job_type: str, data: Any = None) -> AsyncJob: ...
        def _loaded(
            self, job_id: int, h: dict[str, str], runs: dict[str, str] | None
        ) -> AsyncJob: ...

    # -- schedules --------------------------------------------------------------------------
    async def every(
        self,
        key: str,
        interval: Any,
        job_type: str,
        data: Any = None,
        *,
        offset: Any = None,
        start: Any = None,
        end: Any = None,
        limit: int | None = None,
        catch_up: str = "one",
        **job_options: Any,
    ) -> dict[str, Any]:
        """Make a ``job_type`` job every ``interval`` (see ``Queue.every``)."""
        definition = schedules.every_definition(interval, offset)
        return await self.scripts.drive(
            schedules.define(
                self, key, definition, job_type, data, start, end, limit, catch_up, job_options
            )
        )

    async def cron(
        self,
        key: str,
        expression: str,
        job_type: str,
        data: Any = None,
        *,
        tz: str = "UTC",
        start: Any = None,
        end: Any = None,
        limit: int | None = None,
        catch_up: str = "one",
        **job_options: Any,
    ) -> dict[str, Any]:
        """Make a ``job_type`` job at each time a cron expression matches (see
        ``Queue.cron``)."""
        definition = schedules.cron_definition(expression, tz)
        return await self.scripts.drive(
            schedules.define(
                self, key, definition, job_type, data, start, end, limit, catch_up, job_options
            )
        )

    async def schedule(self, key: str) -> dict[str, Any]:
        """One schedule (see ``Queue.schedule``)."""
        return await self.scripts.drive(schedules.read_schedule(self, key))

    async def schedules(self) -> list[dict[str, Any]]:
        """Every schedule, by key."""
        return await self.scripts.drive(schedules.read_schedules(self))

    async def pause_schedule(self, key: str) -> dict[str, Any]:
        """Make no more jobs until resumed; the definition and runs are kept."""
        return await self.scripts.drive(schedules.pause_schedule(self, key))

    async def resume_schedule(self, key: str) -> dict[str, Any]:
        """Make jobs again, from the next tick after now."""
        return await self.scripts.drive(schedules.resume_schedule(self, key))

    async def remove_schedule(self, key: str) -> None:
        """Delete a schedule (the jobs it made stay)."""
        await self.scripts.drive(schedules.remove_schedule(self, key))

    async def trigger(self, key: str) -> AsyncJob:
        """Make one job of the schedule now; its timetable is unchanged."""
        job: AsyncJob = await self.scripts.drive(schedules.trigger(self, key))
        return job

    # -- limits -----------------------------------------------------------------------------
    async def limit(
        self,
        job_type: str,
        *,
        rate: Any = _UNSET,
        concurrency: Any = _UNSET,
        group_rate: Any = _UNSET,
        group_concurrency: Any = _UNSET,
    ) -> dict[str, Any]:
        """Set the limits of ``job_type`` that are given (see ``Queue.limit``)."""
        given = {
            "rate": rate,
            "concurrency": concurrency,
            "group_rate": group_rate,
            "group_concurrency": group_concurrency,
        }
        return await self.scripts.drive(limits.set_limits(self.keys, job_type, given))

    async def remove_limits(self, job_type: str) -> None:
        """Remove every limit of ``job_type``, and end a hold asked by ``RateLimited``."""
        await self.scripts.drive(limits.remove_limits(self.keys, job_type))

    async def limits(self) -> dict[str, dict[str, Any]]:
        """Every type with a limit (see ``Queue.limits``)."""
        return await self.scripts.drive(limits.read_limits(self.keys))

    async def limit_status(self, job_type: str) -> dict[str, Any]:
        """Whether ``job_type`` is held back by its limits right now (see
        ``Queue.limit_status``)."""
        return await self.scripts.drive(limits.limit_status(self.keys, job_type))

    async def groups(self, job_type: str, start: int = 0, count: int = 50) -> dict[str, Any]:
        """The groups of ``job_type`` with jobs waiting or running (see ``Queue.groups``)."""
        return await self.scripts.drive(limits.groups(self.keys, job_type, start, count))
