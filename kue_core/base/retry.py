"""Pauses between retries after errors, and a log of them that does not repeat itself: every
loop that reconnects to Redis uses these."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

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


class Repeats:
    """Says an error once, then how often it came back: during an outage, every loop that
    retries reports each failure, and a log gets one line every ``window`` seconds with the
    count, not one line a try (see :meth:`note`). Thread-safe: a worker's threads share one."""

    #: Distinct texts remembered at most (they are forgotten all at once beyond).
    LIMIT = 100

    def __init__(
        self,
        window: float = defaults.ERROR_REPEAT_WINDOW,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.window = window
        self._clock = clock
        self._lock = threading.Lock()
        self._seen: dict[str, tuple[float, int]] = {}  # kind -> (since, repeats since)
        self._runs: dict[str, tuple[float, int]] = {}  # kind -> (first, errors in all)

    def note(self, text: str, kind: str | None = None) -> str | None:
        """The line to log for this occurrence of ``text``: ``text`` the first time (or the
        first time in a while), then None for a repeat, until ``window`` seconds have passed
        since the line last logged; then ``text`` with the count: "(repeated 40 times in
        10 s)". Texts of one ``kind`` (default: the text) count as repeats of each other:
        the ways one outage shows (a connection reset, then refused) are one."""
        with self._lock:
            now = self._clock()
            key = text if kind is None else kind
            first, errors = self._runs.get(key, (now, 0))
            self._runs[key] = (first, errors + 1)
            seen = self._seen.get(key)
            if seen is None or (seen[1] == 0 and now - seen[0] >= self.window):
                if len(self._seen) >= self.LIMIT:
                    self._seen.clear()
                    self._runs = {key: self._runs[key]}
                self._seen[key] = (now, 0)
                return text
            since, repeats = seen[0], seen[1] + 1
            if now - since < self.window:
                self._seen[key] = (since, repeats)
                return None
            self._seen[key] = (now, 0)
            times = "once" if repeats == 1 else f"{repeats} times"
            return f"{text} (repeated {times} in {now - since:.0f} s)"

    def over(self, kind: str, text: str) -> str | None:
        """The line to log once errors of ``kind`` have stopped (a call succeeded): ``text``
        with the count since the first of them, "(after 3 errors in 2 s)"; None when none
        was noted since the last such line. The next error is then said at once."""
        with self._lock:
            run = self._runs.pop(kind, None)
            self._seen.pop(kind, None)
        if run is None:
            return None
        first, errors = run
        count = "1 error" if errors == 1 else f"{errors} errors"
        return f"{text} (after {count} in {self._clock() - first:.1f} s)"
