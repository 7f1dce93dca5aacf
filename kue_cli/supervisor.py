"""``kue worker --processes P``: P worker processes under one supervisor.

The supervisor runs ``kue worker`` P times as child processes (each with its own threads and
Redis connections, so a CPU-bound handler uses P cores), restarts a child that dies, and on
SIGTERM or SIGINT passes the signal on and waits for every child's graceful shutdown.

- Children run in a session of their own, so a Ctrl-C in the terminal reaches only the
  supervisor, which forwards it once; a second signal is forwarded too (children then exit
  at once, as a lone worker does). On Linux each child also gets SIGTERM if the supervisor
  itself is killed, so no worker outlives it unwatched.
- The Redis URL reaches the children in their environment, never on a command line that
  ``ps`` would show.
- Given a worker id ``ID``, child k (from 1) runs as ``--id=ID-k``, restarted or not.
- A child that dies is started again after a pause that doubles with each quick death
  (0.5 s up to 30 s), so a handler that crashes its process does not spin the machine.
  A child that exits with status 2 (bad usage: it can never work) stops everything.
- A child that exits with status 0 was stopped on purpose (``kue stop-worker``, or a SIGTERM
  sent to it alone) and is not started again; once every child has stopped so, the
  supervisor exits 0 too.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass

from redis.backoff import ExponentialBackoff

from .errors import EXIT_FAILED, EXIT_USAGE

log = logging.getLogger(__name__)

#: Restart pauses after a child dies: first, longest (seconds); a child that ran this long
#: (``STABLE``) before dying starts again after the first pause.
RESTART_PAUSE = (0.5, 30.0)
STABLE = 60.0
_RESTART_BACKOFF = ExponentialBackoff(cap=RESTART_PAUSE[1], base=RESTART_PAUSE[0])
#: Seconds a child gets beyond its own shutdown timeout before it is killed.
GRACE = 10.0

_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:  # pragma: no cover - runs in the child, between fork and exec
    """Linux: ask for SIGTERM when the parent dies (elsewhere: nothing)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):
        pass


@dataclass
class _Child:
    slot: int
    proc: subprocess.Popen[bytes] | None = None
    started: float = 0.0
    quick_deaths: int = 0
    restart_at: float | None = None
    stopped: bool = False  # exited 0: not to be started again


class Supervisor:
    """Keeps ``processes`` copies of ``argv`` running until told to stop."""

    def __init__(
        self,
        argv: Sequence[str],
        env: dict[str, str],
        processes: int,
        shutdown_timeout: float,
        worker_id: str | None = None,
    ) -> None:
        self.argv = list(argv)
        self.worker_id = worker_id
        self.env = env
        self.children = [_Child(slot) for slot in range(1, processes + 1)]
        self.shutdown_timeout = shutdown_timeout
        # Only appended to by the handler: a handler that takes a lock (Event.set) can
        # deadlock the main thread it interrupts inside that lock.
        self._signals: list[signal.Signals] = []

    def run(self) -> int:
        """Supervise until SIGTERM or SIGINT and every child has exited; the exit status."""
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self._on_signal)
        for child in self.children:
            self._start(child)
        status = self._supervise()
        if status == 0:
            log.info("every worker process was stopped: stopped")
            return 0
        return self._stop(status)

    def _on_signal(self, signum: int, frame: object) -> None:
        self._signals.append(signal.Signals(signum))

    def _start(self, child: _Child) -> None:
        argv = self.argv
        if self.worker_id is not None:
            argv = [*argv, f"--id={self.worker_id}-{child.slot}"]
        child.proc = subprocess.Popen(
            argv,
            env=self.env,
            start_new_session=True,
            preexec_fn=_die_with_parent if sys.platform == "linux" else None,
        )
        child.started = time.monotonic()
        child.restart_at = None
        log.info("worker process %d started: pid %d", child.slot, child.proc.pid)

    def _supervise(self) -> int | None:
        """Until the first signal: restart children that die. None; or the status to exit
        with when a child reported bad usage (2), or when every child was stopped (0)."""
        while not self._signals:
            now = time.monotonic()
            for child in self.children:
                if child.stopped:
                    continue
                if child.restart_at is not None:
                    if now >= child.restart_at:
                        self._start(child)
                    continue
                assert child.proc is not None
                code = child.proc.poll()
                if code is None:
                    continue
                if code == EXIT_USAGE:
                    log.error("worker process %d exited with status 2 (bad usage)", child.slot)
                    return EXIT_USAGE
                if code == 0:
                    child.stopped = True
                    log.info(
                        "worker process %d (pid %d) was stopped: not started again",
                        child.slot,
                        child.proc.pid,
                    )
                    continue
                ran = now - child.started
                child.quick_deaths = 0 if ran >= STABLE else child.quick_deaths + 1
                pause = _RESTART_BACKOFF.compute(max(0, child.quick_deaths - 1))
                child.restart_at = now + pause
                log.warning(
                    "worker process %d (pid %d) %s after %.1f s; starting another in %g s",
                    child.slot,
                    child.proc.pid,
                    _describe(code),
                    ran,
                    pause,
                )
            if all(child.stopped for child in self.children):
                return 0
            time.sleep(0.2)
        return None

    def _stop(self, status: int | None) -> int:
        """Forward the stop to every child and wait for them; the exit status."""
        running = [c.proc for c in self.children if c.proc is not None and c.proc.poll() is None]
        name = self._signals[0].name if self._signals else "bad usage"
        log.info("%s: stopping %d worker processes", name, len(running))
        forwarded, killed = 0, False
        deadline = time.monotonic() + self.shutdown_timeout + GRACE
        while any(p.poll() is None for p in running):
            if forwarded < max(1, min(len(self._signals), 2)):
                for proc in running:
                    _signal(proc, signal.SIGTERM)
                forwarded += 1
            if time.monotonic() > deadline and not killed:
                log.error("worker processes still running after %g s: killing them", GRACE)
                for proc in running:
                    _signal(proc, signal.SIGKILL)
                killed = True
            time.sleep(0.1)
        if status is not None:
            return status
        failed = [p for p in running if p.returncode != 0]
        if len(self._signals) > 1 or failed:
            return EXIT_FAILED
        log.info("stopped")
        return 0


def _signal(proc: subprocess.Popen[bytes], sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        proc.send_signal(sig)  # a no-op once the child has been reaped


def _describe(code: int) -> str:
    if code < 0:
        return f"was killed by {signal.Signals(-code).name}"
    return f"exited with status {code}"
