"""One watcher: a thread that takes events from its input list and runs them through its
rules, the way Resc does, with a lock so that one process runs it at a time.

An event is always in the input, in the taken list or gone with its work written: it is
moved to the taken list by ``BLMOVE``; the jobs its rules make are saved; then ``make.lua``
pushes its tasks, counts and removes it from the taken list in one call. At start (and when a
stalled process's lock is taken over) the events left in the taken list are handled first;
so are any found there later while the watcher is between events (taken by a process that had
stalled past its lock and woke up: its end of the event is refused, it writes nothing).
An event whose fetch keeps failing goes to the failed list with its reason, and the watcher
goes on.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

import redis

from kue_core import JobNotFound, KueError, Queue, connection

from . import engine
from .config import Watcher
from .fetch import Stopping
from .store import Store

log = logging.getLogger(__name__)

#: Seconds a blocking take waits before looking at the stop flag and the lock again.
TAKE_TIMEOUT = 1
#: Seconds between two tries after Redis did not answer, or while another process runs it.
PAUSE = 1.0


class WatcherThread(threading.Thread):
    def __init__(
        self, w: Watcher, queue: Queue, store: Store, token: str, stop: threading.Event
    ) -> None:
        super().__init__(name=f"kue-rules {w.label}", daemon=True)
        self.w, self.queue, self.store, self.token, self.stop = w, queue, store, token, stop
        #: Whether this process holds the watcher's lock (the heartbeat clears it when lost).
        self.held = False

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                if not self.held:
                    self._take_over()
                    continue
                event = self.queue.client.blmove(
                    self.w.input, self.w.taken, TAKE_TIMEOUT, "RIGHT", "LEFT"
                )
                if event is not None:
                    self.handle(str(event), replayed=False)
                elif self.queue.client.llen(self.w.taken):
                    self._replay("left taken by a process that lost the watcher")
            except Stopping:
                return
            except (redis.RedisError, OSError) as e:
                log.warning("watcher %s: Redis: %s; trying again", self.w.label, e)
                self.stop.wait(PAUSE)

    def _take_over(self) -> None:
        if not self.store.take_lock(self.w, self.token):
            self.stop.wait(PAUSE)  # another process runs it; stand by
            return
        self.held = True
        self.store.register(self.w, self.token, connection.server_ms(self.queue.client))
        log.info("watcher %s: running it", self.w.label)
        self._replay("left taken")

    def _replay(self, why: str) -> None:
        """Handle the events in the taken list, the oldest first. Only this thread takes
        events while it holds the lock, and it handles one at a time: when it is between
        events, whatever is in the taken list was left there by a process that crashed or
        lost the watcher (whose end of it will be refused)."""
        left = [str(e) for e in self.queue.client.lrange(self.w.taken, 0, -1)]
        if left:
            log.info("watcher %s: %d events %s, replayed", self.w.label, len(left), why)
        for event in reversed(left):
            if self.stop.is_set() or not self.held:
                return
            self.handle(event, replayed=True)

    def handle(self, event: str, replayed: bool) -> None:
        """Handle one taken event; on a Redis error, again until done or stopping."""
        while True:
            try:
                plan = self._plan(event, replayed)
                done = None if plan is None else self.store.finish(self.w, self.token, event, plan)
                if plan is None or done is None:
                    self._lost(event)
                else:
                    _log(self.w, event, plan, done)
                return
            except (redis.RedisError, OSError) as e:
                log.warning("watcher %s: Redis: %s; event %r again", self.w.label, e, event)
                if self.stop.wait(PAUSE):
                    raise Stopping("stopped with the event taken") from None

    def _lost(self, event: str) -> None:
        """The lock went to another process, which replays what is in the taken list (at
        take-over, and when it is between events): this one writes nothing more."""
        self.held = False
        log.warning(
            "watcher %s: another process took it over; event %r is left to it", self.w.label, event
        )

    def _plan(self, event: str, replayed: bool) -> dict[str, Any] | None:
        """What ``make.lua`` writes for ``event`` (its jobs saved already); None when the
        lock was lost before the jobs were saved."""
        plan: dict[str, Any] = {"replayed": replayed, "matched": [], "tasks": [], "jobs": {}}
        given: dict[str, Any] = {"input_task": event}
        rule = ""
        try:
            if self.w.events:
                given.update(self._job_variables(event))
            out = engine.apply(self.w, event, given, self.queue, self.stop)
            plan["matched"] = out.matched
            plan["tasks"] = [[t.rule, t.queue, t.set or False, t.task] for t in out.tasks]
            if out.jobs:
                rule = out.jobs[0][0]
                if not self.store.take_lock(self.w, self.token, "renew"):
                    return None  # another process runs the watcher now: it makes them
                saved = self.queue.save_many(job for _, job in out.jobs)  # all or none
                for (name, _), job in zip(out.jobs, saved, strict=True):
                    plan["jobs"].setdefault(name, []).append([job.id, job.deduplicated])
        except engine.EventFailed as e:
            return {**plan, "failed": {"rule": e.rule, "kind": e.kind, "reason": e.reason}}
        except (redis.RedisError, OSError, Stopping):
            raise  # handled again, or left taken
        except Exception as e:  # a job Redis refused, or a bug: the event waits in failed
            log.exception("watcher %s: event %r", self.w.label, event)
            reason = f"{type(e).__name__}: {e}"
            return {
                **plan,
                "matched": [],
                "tasks": [],
                "jobs": {},
                "failed": {"rule": rule, "kind": "make", "reason": reason},
            }
        return plan

    def _job_variables(self, event: str) -> dict[str, Any]:
        digits = event.rpartition("/")[2]
        try:
            job = self.queue.get_job(int(digits))
        except (ValueError, JobNotFound, KueError):
            raise engine.EventFailed("", "make", f"job {digits} no longer exists") from None
        return {"type": job.type, "id": job.id, "data": job.data, "result": job.result}


def _log(w: Watcher, event: str, plan: dict[str, Any], made: list[int]) -> None:
    if plan.get("failed"):
        log.warning("watcher %s: event %r failed: %s", w.label, event, plan["failed"]["reason"])
        return
    for rule in plan["matched"]:
        log.debug("watcher %s: rule %r fired on %r", w.label, rule, event)
    for (_, queue, _, task), pushed in zip(plan["tasks"], made, strict=True):
        log.info(
            "event %r: task %r %s %s",
            event,
            task,
            "to" if pushed else "already in the set of",
            queue,
        )
    for rule, jobs in plan["jobs"].items():
        for job_id, dup in jobs:
            log.info("event %r: rule %r %s job %s", event, rule, "found" if dup else "made", job_id)
    if not plan["matched"]:
        log.debug("watcher %s: no rule matches %r", w.label, event)
