"""One event through a watcher's rules: what it makes, or why it cannot be handled.

Every rule is tried on the event, in order. A rule whose ``on`` matches binds its named
groups, runs its fetches in order (an array answer makes one binding per element, so chained
fetches multiply), then fills its ``make`` once per binding. Nothing is written here: the
watcher saves the jobs and pushes the tasks (see :mod:`kue_rules.store`).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kue_core import Job, KueError, Queue, apply_job_options

from .config import Rule, Watcher
from .fetch import FetchFailed, get_json
from .template import TemplateError


@dataclass
class Task:
    """A task string for a Resc list (``set``: its dedupe set, or None)."""

    rule: str
    queue: str
    task: str
    set: str | None = None


@dataclass
class Outcome:
    """What an event makes: the rules it matched (in order), their tasks and unsaved jobs."""

    matched: list[str] = field(default_factory=list)
    tasks: list[Task] = field(default_factory=list)
    jobs: list[tuple[str, Job]] = field(default_factory=list)


class EventFailed(KueError):
    """The event cannot be handled: a fetch failed after its tries (``kind`` ``fetch``), or a
    template or job option could not be filled from it (``kind`` ``make``)."""

    def __init__(self, rule: str, kind: str, reason: str) -> None:
        super().__init__(f"rule {rule!r}: {reason}")
        self.rule, self.kind, self.reason = rule, kind, reason


def apply(
    watcher: Watcher,
    event: str,
    given: Mapping[str, Any],
    queue: Queue,
    stop: threading.Event,
) -> Outcome:
    """Run ``event`` through the watcher's rules; ``given`` are the variables every rule has
    (``input_task``, and a job event's ``type``, ``id``, ``data`` and ``result``)."""
    out = Outcome()
    for rule in watcher.rules:
        m = rule.on.search(event)
        if m is None:
            continue
        out.matched.append(rule.name)
        start = {**given, **{k: (v if v is not None else "") for k, v in m.groupdict().items()}}
        for binding in _bindings(rule, start, stop):
            _make(rule, binding, queue, out)
    return out


def _bindings(rule: Rule, start: dict[str, Any], stop: threading.Event) -> list[dict[str, Any]]:
    bindings = [start]
    for fetch in rule.fetch:
        grown = []
        for b in bindings:
            try:
                url = fetch.url.render(b)
            except TemplateError as e:
                raise EventFailed(rule.name, "make", str(e)) from None
            try:
                answer = get_json(url, fetch.timeout, fetch.retries, fetch.backoff_ms, stop)
            except FetchFailed as e:
                raise EventFailed(rule.name, "fetch", str(e)) from None
            for value in answer if isinstance(answer, list) else [answer]:
                grown.append({**b, fetch.returns: value})
        bindings = grown
    return bindings


def _make(rule: Rule, b: dict[str, Any], queue: Queue, out: Outcome) -> None:
    make = rule.make
    try:
        if make.job is not None:
            spec = make.job
            job = queue.create_job(spec.type.render(b), spec.data.render(b))
            apply_job_options(job, {k: tree.render(b) for k, tree in spec.options.items()})
            out.jobs.append((rule.name, job))
            return
        assert make.queue is not None  # the config has a queue when it has no job
        task = Task(rule.name, make.queue.render(b), make.task.render(b))
        if make.set is not None:
            task.set = make.set.render(b)
        out.tasks.append(task)
    except (TemplateError, KueError) as e:
        raise EventFailed(rule.name, "make", str(e)) from None
