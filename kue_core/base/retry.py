"""Pauses between retries after errors: every loop that reconnects to Redis uses these."""

from __future__ import annotations

from redis.backoff import ExponentialBackoff

from .. import defaults


class Pauses:
    """Doubling pauses (seconds) from ``first`` up to ``last``; a success starts them anew."""

    def __init__(
        self, first: float = defaults.RETRY_PAUSE[0], last: float = defaults.RETRY_PAUSE[1]
    ) -> None:
        self._backoff = ExponentialBackoff(cap=last, base=first)
        self.failures = 0

    def next(self) -> float:
        """The pause before the next try."""
        pause = self._backoff.compute(self.failures)
        self.failures += 1
        return pause

    def reset(self) -> None:
        self.failures = 0
