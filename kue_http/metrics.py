"""``GET /metrics``: Prometheus metrics, read from Redis at each scrape (so every process of
every host is counted, and a restarted server loses nothing)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from flask import Blueprint, Response, current_app
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)

from kue_core import Queue
from kue_rules.store import RULE_COUNTERS, WATCHER_COUNTERS

from .rules import report

metrics = Blueprint("kue_metrics", __name__)

#: Why a type is held back (``Queue.limit_status``), the ``reason`` of ``kue_jobs_held_back``.
HELD_REASONS = ("paused", "remote", "concurrency", "rate")
#: The limits of a type, the ``limit`` of ``kue_limit``.
LIMIT_NAMES = ("rate", "concurrency", "group_rate", "group_concurrency")


class QueueCollector:
    """The queue's state as Prometheus metric families."""

    def __init__(self, queue: Queue) -> None:
        self.queue = queue

    def collect(self) -> Iterator[Metric]:
        jobs = GaugeMetricFamily(
            "kue_jobs", "Jobs in each state, per job type.", labels=["type", "state"]
        )
        for job_type, counts in self.queue.counts_by_type().items():
            for state, n in counts.items():
                jobs.add_metric([job_type, state], n)
        yield jobs

        totals = self.queue.totals()
        for outcome, name, documentation in (
            ("complete", "kue_jobs_completed", "Jobs completed, per job type."),
            ("failed", "kue_jobs_failed", "Jobs failed for good (no attempt left), per job type."),
        ):
            family = CounterMetricFamily(name, documentation, labels=["type"])
            for job_type, n in sorted(totals[outcome].items()):
                family.add_metric([job_type], n)
            yield family

        buckets, running = [], 0
        for bound, n in totals["durations"]:
            running += n
            buckets.append(("+Inf" if bound is None else str(bound / 1000), running))
        yield HistogramMetricFamily(
            "kue_job_duration_seconds",
            "Time from start to completion of completed jobs.",
            buckets=buckets,
            sum_value=self.queue.work_time() / 1000,
        )

        yield from _timings(self.queue.timings())

        workers = self.queue.workers()
        yield GaugeMetricFamily("kue_workers", "Live worker processes.", value=len(workers))
        running_jobs = sum(len(w["jobs"]) for w in workers)
        yield GaugeMetricFamily("kue_jobs_running", "Jobs held by live workers.", running_jobs)
        yield GaugeMetricFamily(
            "kue_abandoned_threads",
            "Handler threads that live workers left running past their attempt (ttl, lease lost).",
            sum(w.get("abandoned_threads", 0) for w in workers),
        )
        paused = GaugeMetricFamily("kue_paused", "1 for a paused job type.", labels=["type"])
        for job_type in self.queue.paused():
            paused.add_metric([job_type], 1)
        yield paused
        yield from _limits(self.queue)
        yield from _rules(report(self.queue))


def _rules(watchers: list[dict[str, Any]]) -> Iterator[Metric]:
    """``kue rules``, from one report: each watcher's counters and each rule's, the lengths
    of its lists, and whether a process runs it. A watcher is named by its input list."""
    events = CounterMetricFamily(
        "kue_rules_events",
        "Events handled by each kue rules watcher: events, replayed (taken again after a "
        "stop), unmatched (no rule matched), failed (moved to its failed list).",
        labels=["watcher", "counter"],
    )
    rules = CounterMetricFamily(
        "kue_rules_rule",
        "What each rule of a kue rules watcher did: matched events, tasks pushed, jobs made, "
        "duplicates (a dedupe held them), fetch_errors and make_errors (events failed).",
        labels=["watcher", "rule", "counter"],
    )
    lengths = GaugeMetricFamily(
        "kue_rules_list_length",
        "Length of each list of a kue rules watcher: input, taken, failed.",
        labels=["watcher", "list"],
    )
    running = GaugeMetricFamily(
        "kue_rules_watcher_running",
        "1 when a kue rules process was heard of running the watcher lately, else 0.",
        labels=["watcher"],
    )
    for w in watchers:
        name = w["input"]
        for counter in WATCHER_COUNTERS:
            events.add_metric([name, counter], w["counts"][counter])
        for rule in w["rules"]:
            for counter in RULE_COUNTERS:
                rules.add_metric([name, rule["name"], counter], rule["counts"][counter])
        for which, n in w["lengths"].items():
            if n is not None:
                lengths.add_metric([name, which], n)
        running.add_metric([name], 1 if w["running"] else 0)
    yield events
    yield rules
    yield lengths
    yield running


def _limits(queue: Queue) -> Iterator[Metric]:
    """``kue_jobs_held_back``: the waiting jobs of each limited (or paused) type, under the
    reason it is held back now (0 under the others); ``kue_limit`` and
    ``kue_limit_window_seconds``: each type's limits."""
    found = queue.limits()
    held = GaugeMetricFamily(
        "kue_jobs_held_back",
        "Waiting jobs of a type held back now by its limits, by reason: paused, remote "
        "(a handler raised RateLimited), concurrency or rate.",
        labels=["type", "reason"],
    )
    for job_type in sorted(set(found) | set(queue.paused())):
        status = queue.limit_status(job_type)
        for reason in HELD_REASONS:
            n = status["waiting"] if status["held"] == reason else 0
            held.add_metric([job_type, reason], n)
    yield held
    most = GaugeMetricFamily(
        "kue_limit",
        "The limits of each job type: the most jobs started per window (rate, group_rate) "
        "or active at once (concurrency, group_concurrency); group ones apply to each group.",
        labels=["type", "limit"],
    )
    windows = GaugeMetricFamily(
        "kue_limit_window_seconds",
        "The window of each rate limit (rate, group_rate).",
        labels=["type", "limit"],
    )
    for job_type, rules in found.items():
        for name in LIMIT_NAMES:
            value = rules[name]
            if isinstance(value, tuple):
                most.add_metric([job_type, name], value[0])
                windows.add_metric([job_type, name], value[1] / 1000)
            elif value is not None:
                most.add_metric([job_type, name], value)
    yield most
    yield windows


def _timings(today: dict[str, Any]) -> Iterator[Metric]:
    """``kue_job_wait_seconds`` and ``kue_job_run_seconds`` per type, from the counters of the
    current UTC day (``Queue.timings``): they start again from zero at midnight UTC."""
    for kind, name, what in (
        (
            "wait",
            "kue_job_wait_seconds",
            "Time jobs waited, from their last change while "
            "waiting (saved, promoted, retried, released) to their start",
        ),
        ("run", "kue_job_run_seconds", "Time attempts ran, from start to completion or failure"),
    ):
        family = HistogramMetricFamily(
            name,
            f"{what}, per job type, today: the counters reset at midnight UTC.",
            labels=["type"],
        )
        for job_type, figures in today["types"].items():
            summary = figures[kind]
            buckets, running = [], 0
            for bound, n in summary["buckets"]:
                running += n
                buckets.append(("+Inf" if bound is None else str(bound / 1000), running))
            total = (summary["mean_ms"] or 0) * summary["count"] / 1000
            family.add_metric([job_type], buckets, sum_value=total)
        yield family


@metrics.get("/metrics")
def scrape() -> Response:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(QueueCollector(current_app.extensions["kue"]))
    return Response(generate_latest(registry), content_type=CONTENT_TYPE_LATEST)
