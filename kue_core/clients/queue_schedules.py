"""The schedules of a ``Queue``: define, read and steer them (the operations are
:mod:`kue_core.jobs.schedules`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..jobs.schedules import (
    cron_definition,
    define,
    every_definition,
    pause_schedule,
    read_schedule,
    read_schedules,
    remove_schedule,
    resume_schedule,
    trigger,
)

if TYPE_CHECKING:
    import redis

    from ..base.keys import Keys
    from ..jobs.job import Job
    from ..store.transport import Transport


class ScheduleMethods:
    """Mixed into ``Queue``: define, read and steer schedules."""

    client: redis.Redis
    keys: Keys
    scripts: Transport

    if TYPE_CHECKING:  # Queue's

        def create_job(self, job_type: str, data: Any = None) -> Job: ...
        def _loaded(self, job_id: int, h: dict[str, str], runs: dict[str, str] | None) -> Job: ...

    def every(
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
        """Make a ``job_type`` job every ``interval`` (ms or a timedelta), the first at
        ``start`` (default now) plus ``offset``. Upserted by ``key``: an unchanged definition
        keeps its timetable; a changed one starts again from now. See :meth:`schedule`."""
        definition = every_definition(interval, offset)
        op = define(self, key, definition, job_type, data, start, end, limit, catch_up, job_options)
        return self.scripts.drive(op)

    def cron(
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
        """Make a ``job_type`` job at each time the five-field cron ``expression`` (or a name
        such as ``@hourly``) matches in the IANA time zone ``tz``. Upserted by ``key``."""
        definition = cron_definition(expression, tz)
        op = define(self, key, definition, job_type, data, start, end, limit, catch_up, job_options)
        return self.scripts.drive(op)

    def schedule(self, key: str) -> dict[str, Any]:
        """One schedule: its definition, whether paused or ended, the next three due times
        (ms), runs made, jobs triggered by hand, and the last job made with its state."""
        return self.scripts.drive(read_schedule(self, key))

    def schedules(self) -> list[dict[str, Any]]:
        """Every schedule, by key."""
        return self.scripts.drive(read_schedules(self))

    def pause_schedule(self, key: str) -> dict[str, Any]:
        """Make no more jobs until resumed; the definition and runs are kept."""
        return self.scripts.drive(pause_schedule(self, key))

    def resume_schedule(self, key: str) -> dict[str, Any]:
        """Make jobs again, from the next tick after now (the ticks while paused are skipped)."""
        return self.scripts.drive(resume_schedule(self, key))

    def remove_schedule(self, key: str) -> None:
        """Delete a schedule (the jobs it made stay)."""
        self.scripts.drive(remove_schedule(self, key))

    def trigger(self, key: str) -> Job:
        """Make one job of the schedule now; its timetable is unchanged."""
        return self.scripts.drive(trigger(self, key))
