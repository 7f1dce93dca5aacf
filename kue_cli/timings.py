"""``kue stats``'s wait and run section: per job type, today's (UTC) count, mean and
standard deviation of how long jobs waited and ran, from ``Queue.timings()``."""

from __future__ import annotations

from typing import Any


def duration(ms: float) -> str:
    """``0.4ms``, ``12ms``, ``2.4s``, ``3m 5s``, ``2h 10m``."""
    if ms < 10:
        return f"{ms:.1f}ms"
    if ms < 1000:
        return f"{ms:.0f}ms"
    seconds = ms / 1000
    if seconds < 60:
        return f"{seconds:.1f}s"
    whole = int(seconds)
    if whole < 3600:
        return f"{whole // 60}m {whole % 60}s"
    return f"{whole // 3600}h {whole % 3600 // 60}m"


def _cell(summary: dict[str, Any]) -> str:
    if not summary["count"]:
        return "-"
    return f"{duration(summary['mean_ms'])} ± {duration(summary['stddev_ms'])} ({summary['count']})"


def lines(timings: dict[str, Any]) -> list[str]:
    """The section's lines: a heading, then one row per type with a job started or ended that
    day (none: a line saying so)."""
    rows = [
        (job_type, _cell(f["wait"]), _cell(f["run"]))
        for job_type, f in timings["types"].items()
        if f["wait"]["count"] or f["run"]["count"]
    ]
    out = [f"wait and run, {timings['day']} (UTC; mean ± stddev (jobs)):"]
    if not rows:
        return [*out, "  no job started today"]
    width = max(len("type"), *(len(t) for t, _, _ in rows))
    wait_width = max(len("wait"), *(len(w) for _, w, _ in rows))
    out.append("  " + "type".ljust(width) + "  " + "wait".ljust(wait_width) + "  run")
    out += ["  " + t.ljust(width) + "  " + w.ljust(wait_width) + "  " + r for t, w, r in rows]
    return out
