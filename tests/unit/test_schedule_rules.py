"""Schedule timetables, computed (``kue_core.features.schedule_rules``): cron across daylight saving
changes in Europe/Paris and America/New_York, intervals, and the plan of a firing under each
catch-up policy, limit and end."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from kue_core import InvalidJob, defaults
from kue_core.features import schedule_rules as rules


def _ms(text: str, tz: str) -> int:
    return int(datetime.fromisoformat(text).replace(tzinfo=ZoneInfo(tz)).timestamp() * 1000)


def _local(ms: int, tz: str) -> str:
    return datetime.fromtimestamp(ms / 1000, ZoneInfo(tz)).isoformat()


def _ticks(rule: rules.Rule, start: int, n: int) -> list[int]:
    out = [rule.at_or_after(start)]
    while len(out) < n:
        out.append(rule.after(out[-1]))
    return out


def test_cron_in_paris_across_both_changes() -> None:
    tz = "Europe/Paris"
    daily = rules.Cron(rules.cron_expression("30 2 * * *"), tz)
    # Spring forward (29 March 2026, 02:00 -> 03:00): 02:30 does not exist that day; it runs
    # at the first minute after the jump, then at 02:30 again the next day.
    got = [_local(t, tz) for t in _ticks(daily, _ms("2026-03-28T12:00", tz), 3)]
    assert got == [
        "2026-03-29T03:00:00+02:00",
        "2026-03-30T02:30:00+02:00",
        "2026-03-31T02:30:00+02:00",
    ]
    # Fall back (25 October 2026, 03:00 -> 02:00): 02:30 happens twice; it runs once.
    got = [_local(t, tz) for t in _ticks(daily, _ms("2026-10-24T12:00", tz), 3)]
    assert got == [
        "2026-10-25T02:30:00+02:00",
        "2026-10-26T02:30:00+01:00",
        "2026-10-27T02:30:00+01:00",
    ]
    hourly = rules.Cron(rules.cron_expression("@hourly"), tz)
    got = [_local(t, tz) for t in _ticks(hourly, _ms("2026-03-29T00:30", tz), 3)]
    assert got == [  # 02:00 does not exist: one hour fewer that night
        "2026-03-29T01:00:00+01:00",
        "2026-03-29T03:00:00+02:00",
        "2026-03-29T04:00:00+02:00",
    ]


def test_cron_in_new_york_across_both_changes() -> None:
    tz = "America/New_York"
    nine = rules.Cron(rules.cron_expression("0 9 * * 1-5"), tz)  # 09:00 local on weekdays
    got = _ticks(nine, _ms("2026-03-06T12:00", tz), 3)  # Friday, before 8 March's change
    assert [_local(t, tz) for t in got] == [
        "2026-03-09T09:00:00-04:00",  # Monday, after the change: still 09:00 local
        "2026-03-10T09:00:00-04:00",
        "2026-03-11T09:00:00-04:00",
    ]
    assert got[0] - _ms("2026-03-06T09:00", tz) == (3 * 24 - 1) * 3_600_000  # 71 h, not 72
    early = rules.Cron(rules.cron_expression("30 1 * * *"), tz)  # 1 November 2026: 01:30 twice
    got = _ticks(early, _ms("2026-10-31T12:00", tz), 2)
    assert got[1] - got[0] == 25 * 3_600_000  # once, then the next day's 01:30 (EST)


def test_every_counts_from_its_anchor() -> None:
    rule = rules.Every(200, 1_000)
    assert rule.after(0) == 1_000 and rule.at_or_after(1_000) == 1_000
    assert rule.after(1_000) == 1_200 and rule.after(1_199) == 1_200 and rule.after(1_200) == 1_400


def _every(**more: object) -> dict[str, object]:
    return {"kind": "every", "every": 100, "anchor": 0, "catch_up": "one", **more}


def test_a_firing_on_time_makes_one_job_and_moves_on() -> None:
    plan = rules.plan(_every(), 500, 503, 0)
    assert plan == rules.Plan([500], 600)


@pytest.mark.parametrize(
    ("mode", "ticks"),
    [("one", [900]), ("all", [500, 600, 700, 800, 900]), ("none", [900])],
)
def test_catch_up_after_missed_ticks(mode: str, ticks: list[int]) -> None:
    assert rules.plan(_every(catch_up=mode), 500, 950, 0) == rules.Plan(ticks, 1000)


def test_catch_up_none_skips_a_tick_reached_late() -> None:
    slow = _every(catch_up="none", every=10 * defaults.SCHEDULE_GRACE)
    late = defaults.SCHEDULE_GRACE + 1
    assert rules.plan(slow, 0, late, 0) == rules.Plan([], 10 * defaults.SCHEDULE_GRACE)


def test_catch_up_all_is_capped() -> None:
    n = defaults.CATCH_UP_MAX + 50
    plan = rules.plan(_every(catch_up="all"), 0, (n - 1) * 100, 0)
    assert len(plan.ticks) == defaults.CATCH_UP_MAX and plan.ticks[-1] == (n - 1) * 100


def test_a_long_outage_jumps_to_the_present() -> None:
    now = 100 * (defaults.CATCH_UP_SCAN + 500)
    plan = rules.plan(_every(), 0, now + 50, 0)
    assert len(plan.ticks) == 1 and plan.next == now + 100


def test_limit_and_end_end_the_schedule() -> None:
    assert rules.plan(_every(limit=3), 500, 503, 2) == rules.Plan([500], None)
    assert rules.plan(_every(catch_up="all", limit=3), 500, 950, 1).ticks == [500, 600]
    assert rules.plan(_every(end=700), 700, 701, 0) == rules.Plan([700], None)
    assert rules.plan(_every(catch_up="all", end=650), 500, 950, 0).ticks == [500, 600]


def test_upcoming_runs_stop_at_the_end() -> None:
    assert rules.upcoming(_every(), 500, 3) == [500, 600, 700]
    assert rules.upcoming(_every(end=600), 500, 3) == [500, 600]
    assert rules.upcoming(_every(), None, 3) == []


@pytest.mark.parametrize(
    "bad", ["", "* * *", "61 * * * *", "* * * * * * *", "@often", 5, None, "x" * 300]
)
def test_bad_cron_expressions(bad: object) -> None:
    with pytest.raises(InvalidJob):
        rules.cron_expression(bad)


@pytest.mark.parametrize("bad", ["Mars/Olympus", "", "../etc/passwd", 3, "/etc/localtime"])
def test_bad_time_zones(bad: object) -> None:
    with pytest.raises(InvalidJob):
        rules.zone(bad)


def test_times_and_intervals() -> None:
    assert rules.interval_ms(timedelta(seconds=2), "interval", 50) == 2000
    assert rules.time_ms(datetime(2026, 1, 1, tzinfo=UTC), "start") == 1_767_225_600_000
    with pytest.raises(InvalidJob):
        rules.time_ms(datetime(2026, 1, 1), "start")  # naive
    for bad in (10, -5, 1.5, "100", True):
        with pytest.raises(InvalidJob):
            rules.interval_ms(bad, "interval", 50)


def test_start_and_end_stay_before_the_year_3000() -> None:
    assert rules.time_ms(rules.LATEST, "end") == rules.LATEST
    for bad in (rules.LATEST + 1, 2**53, datetime(3001, 1, 1, tzinfo=UTC)):
        with pytest.raises(InvalidJob):
            rules.time_ms(bad, "end")
