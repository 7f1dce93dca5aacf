"""How ``kue stats`` writes the watchers of ``kue rules`` (``kue_rules.Store.report``)."""

from __future__ import annotations

from typing import Any


def _length(n: int | None) -> str:
    return "?" if n is None else str(n)


def stats_lines(watchers: list[dict[str, Any]]) -> list[str]:
    """``rules:`` and one line per watcher: its label, whether a process runs it, its events
    and failed events, and the lengths of its input, taken and failed lists; nothing when no
    watcher is known."""
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
    return lines
