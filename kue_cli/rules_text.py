"""How ``kue stats`` writes the watchers of ``kue rules`` and their rules
(``kue_rules.Store.report``)."""

from __future__ import annotations

from typing import Any


def _length(n: int | None) -> str:
    return "?" if n is None else str(n)


def rule_line(rule: dict[str, Any]) -> str:
    """A rule's counts, as the Rules page shows them: events it matched, tasks and jobs it
    made, duplicates (tasks already in their set, jobs deduplicated), and failures (to fetch
    a job's data, or to make a task or job)."""
    c = rule.get("counts") or {}
    made = int(c.get("tasks", 0)) + int(c.get("jobs", 0))
    failed = int(c.get("fetch_errors", 0)) + int(c.get("make_errors", 0))
    return (
        f"    rule {rule.get('name')}: {c.get('matched', 0)} matched, {made} made, "
        f"{c.get('duplicates', 0)} duplicates, {failed} failed"
    )


def stats_lines(watchers: list[dict[str, Any]]) -> list[str]:
    """``rules:`` and one line per watcher: its label, whether a process runs it, its events
    and failed events, and the lengths of its input, taken and failed lists; under it, one
    line per rule (:func:`rule_line`); nothing when no watcher is known."""
    if not watchers:
        return []
    lines = ["rules:"]
    for w in watchers:
        counts, lengths = w["counts"], w["lengths"]
        lines.append(
            f"  {w['label']}: {'running' if w['running'] else 'stopped'}, "
            f"{counts['events']} events, {counts['failed']} failed; "
            f"lists: input {_length(lengths['input'])}, taken {_length(lengths['taken'])}, "
            f"failed {_length(lengths['failed'])}"
        )
        lines.extend(rule_line(rule) for rule in w.get("rules", []))
    return lines
