"""What the doctor's check modules (``doctor_deps``, ``doctor_records``, ``doctor_schedules``,
``doctor_limits``, ``doctor_pins``, ``doctor_rules``) need of ``doctor._Check``: one
Protocol, so they do not import doctor.py, which imports them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

import redis

from .keys import Keys

if TYPE_CHECKING:
    from .scripts import Scripts


class Checker(Protocol):
    """A check in progress: where to read, how much at once, and where findings go."""

    client: redis.Redis
    keys: Keys
    scripts: Scripts
    batch: int

    def add(
        self,
        kind: str,
        key: str,
        problem: str,
        repair: str,
        job_id: int | None = None,
        action: tuple[str, str, str, str] | None = None,
    ) -> None: ...
