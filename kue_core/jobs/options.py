"""A job's own options, Kue's fluent API: priority, attempts, backoff, delay, ttl and a unique
key. Part of :class:`kue_core.jobs.spec.JobSpec`; each feature adds its own options beside
these (records, dependencies, pins, fan-out)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, TypeVar, overload

from .. import defaults
from ..base import checks
from ..base.errors import InvalidJob
from ..base.values import due_ms as _due_ms
from ..base.values import ms as _ms
from ..base.values import now_ms as _now_ms
from ..base.values import parse_priority
from . import backoff as backoff_policy
from . import unique

_UNSET: Any = object()
#: A job of any class (``Job``, ``kue_core.aio.AsyncJob``): option setters return their own.
_J = TypeVar("_J", bound="JobOptions")


class JobOptions:
    """Defaults as class attributes: a new job sets only what differs, which keeps
    ``create_job(...).save()`` cheap. Loaded jobs override them from the hash."""

    id: int | None
    _priority = 0
    _priority_ok = True  # False for a Kue hash whose priority is not a number
    _max_attempts = defaults.MAX_ATTEMPTS
    _backoff: backoff_policy.Backoff = None
    _delay = 0
    _due_at = 0  # ms since the epoch, when the delay was given as a time; 0: none
    _ttl = 0
    _unique: unique.Unique | None = None

    @overload
    def priority(self) -> int: ...
    @overload
    def priority(self: _J, level: str | int) -> _J: ...
    def priority(self, level: Any = _UNSET) -> Any:
        """Set the priority: ``low``, ``normal``, ``medium``, ``high``, ``critical`` or an int."""
        if level is _UNSET:
            return self._priority
        self._priority = parse_priority(level)
        return self

    @overload
    def attempts(self) -> int: ...
    @overload
    def attempts(self: _J, n: int) -> _J: ...
    def attempts(self, n: Any = _UNSET) -> Any:
        """Set the maximum number of attempts (at least 1; default 1)."""
        if n is _UNSET:
            return self._max_attempts
        self._max_attempts = checks.integer(n, "attempts", 1)
        return self

    @overload
    def backoff(self) -> backoff_policy.Backoff: ...
    @overload
    def backoff(self: _J, policy: bool | dict[str, Any] | None) -> _J: ...
    def backoff(self, policy: Any = _UNSET) -> Any:
        """Retry after a delay: ``True`` (the job's delay) or ``{"type": "fixed"|"exponential",
        "delay": ms, "maxDelay": ms, "jitter": 0..1}``."""
        if policy is _UNSET:
            return self._backoff
        self._backoff = backoff_policy.normalize(policy)
        return self

    @overload
    def delay(self) -> int: ...
    @overload
    def delay(self: _J, ms: int | float | timedelta | datetime) -> _J: ...
    def delay(self, ms: Any = _UNSET) -> Any:
        """Run no sooner than ``ms`` milliseconds (or a timedelta) after saving; or, given a
        ``datetime`` with a time zone, at that time (Kue's ``delay(Date)``), at once if it is
        past. A datetime without a time zone is refused: it means another time on each machine.

        A time goes to Redis as it is, and the save (or ``update()``) compares it with the
        Redis server's clock, the one every worker follows: the job is due at that time, however
        long after ``delay()`` it is saved and whatever this machine's clock says. Only the local
        guesses use this machine's clock: ``job.state`` right after ``save()``, and ``delay()``
        without an argument, which gives the delay in ms (for a time: the ms left until it).
        """
        if ms is _UNSET:
            return max(0, self._due_at - _now_ms()) if self._due_at else self._delay
        if isinstance(ms, datetime):
            self._due_at, self._delay = _due_ms(ms), 0
        else:
            self._due_at, self._delay = 0, _ms(ms, "delay", 0)
        return self

    @overload
    def ttl(self) -> int: ...
    @overload
    def ttl(self: _J, ms: int | float | timedelta) -> _J: ...
    def ttl(self, ms: Any = _UNSET) -> Any:
        """Bound each attempt's run time to ``ms`` milliseconds."""
        if ms is _UNSET:
            return self._ttl
        self._ttl = _ms(ms, "ttl", 1)
        return self

    @overload
    def unique(self) -> dict[str, Any] | None: ...
    @overload
    def unique(
        self: _J, key: str, mode: str = "until_done", ttl: int | float | timedelta | None = None
    ) -> _J: ...
    def unique(self, key: Any = _UNSET, mode: str = "until_done", ttl: Any = None) -> Any:
        """Save at most one job per ``key`` (see :mod:`kue_core.jobs.unique` for the modes:
        ``until_done``, ``throttle`` (needs ``ttl`` ms), ``debounce``, ``reuse``)."""
        if key is _UNSET:
            u = self._unique
            return None if u is None else {"key": u.key, "mode": u.mode, "ttl": u.ttl or None}
        if self.id is not None:
            raise InvalidJob("a unique key is given before the job is saved")
        self._unique = unique.normalize(key, mode, ttl)
        return self
