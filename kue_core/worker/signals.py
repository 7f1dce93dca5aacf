"""Running until told to stop: SIGTERM and SIGINT (Ctrl-C) caught; a second one while the
first is being handled ends the process at once, with status 1. ``Queue.run`` and the ``kue``
commands that run until stopped (``kue worker``, ``kue example``...) share these rules."""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from collections.abc import Callable
from typing import Any

from .. import defaults
from ..base.errors import InvalidWorkerConfig

#: The exit status of a process ended by a second signal.
EXIT_AGAIN = 1
CAUGHT = (signal.SIGTERM, signal.SIGINT)
#: How often a wait looks for a signal or a remote stop.
POLL_S = 0.05
log = logging.getLogger(__name__)


class Signals:
    """SIGTERM and SIGINT caught from now on (from the main thread only: Python delivers
    signals there); :meth:`wait` blocks until one came, :meth:`restore` puts the handlers
    that were there before back. ``again(name)`` is called before a second signal ends the
    process (to say so)."""

    def __init__(self, again: Callable[[str], Any] = lambda name: None) -> None:
        if threading.current_thread() is not threading.main_thread():
            raise InvalidWorkerConfig(
                "SIGINT and SIGTERM can only be caught in the main thread: run there, or "
                "wait in your own way and call shutdown()"
            )
        self.received: list[str] = []

        # The handler takes no lock: Python runs it in the main thread between two bytecodes,
        # which may be inside Event.wait holding that Event's lock (a handler that set the
        # Event the main thread waited on once deadlocked a worker that way).
        def handle(signum: int, frame: object) -> None:
            name = signal.Signals(signum).name
            if self.received:  # a second signal
                again(name)
                os._exit(EXIT_AGAIN)
            self.received.append(name)

        self._before = {sig: signal.signal(sig, handle) for sig in CAUGHT}

    def wait(
        self, stopped: threading.Event | None = None, done: Callable[[], bool] | None = None
    ) -> str | None:
        """The name of the signal that came, or None when ``stopped`` was set first (a remote
        stop: ``Queue.stopped_remotely``) or ``done()`` said True (a burst's work ran out).
        Looks every ``POLL_S`` seconds, and asks ``done`` every ``BURST_POLL`` seconds."""
        ask_at = 0.0
        while not self.received:
            if stopped is not None and stopped.is_set():
                return None
            if done is not None and time.monotonic() >= ask_at:
                if done():
                    return None
                ask_at = time.monotonic() + defaults.BURST_POLL
            time.sleep(POLL_S)
        return self.received[0]

    def restore(self) -> None:
        for sig, before in self._before.items():
            signal.signal(sig, before)


def serve(
    stopped: threading.Event,
    shutdown: Callable[[float], None],
    timeout: float,
    ready: Callable[[], Any] | None = None,
    done: Callable[[], bool] | None = None,
) -> str | None:
    """Wait for a signal (or ``stopped``: a remote stop; or ``done()``: a burst's work ran
    out), then ``shutdown(timeout)``; the signal's name, or None (see ``Queue.run``, and
    ``ready``)."""
    caught = Signals(lambda name: log.warning("%s again: exiting now", name))
    try:
        if ready is not None:
            ready()
        name = caught.wait(stopped, done)
        if name is None and not stopped.is_set():
            log.info("burst: no work left; stopping")
            shutdown(timeout)
        elif name is None:  # the workers have shut down already
            log.info("stopped remotely")
        else:
            log.info("%s: stopping; running jobs get %g s", name, timeout)
            shutdown(timeout)
    finally:
        caught.restore()
    return name
