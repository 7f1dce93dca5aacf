"""The dashboard's schedules page: every schedule with its rule in words, time zone, next runs,
last job, runs made and state, and buttons to pause, resume, trigger or remove it through the
JSON API (routes on the ``dashboard`` blueprint; imported by the app so that they join it)."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import quote

from flask import current_app, request, url_for
from werkzeug.routing import BuildError

from ..api import queue
from .base import dashboard, render_page

#: Interval units, largest first: a rule reads in the largest one that divides it.
_UNITS = (
    ("d", "day", 86_400_000),
    ("h", "hour", 3_600_000),
    ("min", "minute", 60_000),
    ("s", "second", 1000),
    ("ms", "millisecond", 1),
)
_DAYS = ("Sundays", "Mondays", "Tuesdays", "Wednesdays", "Thursdays", "Fridays", "Saturdays")
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
#: The API endpoints of the buttons, by action.
ENDPOINTS = {
    "pause": "kue_api.pause_schedule",
    "resume": "kue_api.resume_schedule",
    "trigger": "kue_api.trigger_schedule",
    "remove": "kue_api.remove_schedule",
}


@dashboard.app_template_filter("interval")
def interval_text(ms: int) -> str:
    """``every 5 s``, ``every 200 ms``, ``every hour``: in the largest unit that divides it."""
    short, name, size = next(u for u in _UNITS if ms % u[2] == 0)
    count = ms // size
    return f"every {name}" if count == 1 and size > 1 else f"every {count} {short}"


@dashboard.app_template_filter("cron_words")
def cron_words(expression: str) -> str | None:
    """A short reading of the common five-field expressions (``daily at 09:00``,
    ``weekdays at 09:00``, ``every 15 minutes``), or None where there is none."""
    fields = expression.split()
    if len(fields) != 5:
        return None
    minute, hour, day, month, weekday = fields
    if fields == ["*"] * 5:
        return "every minute"
    step = re.fullmatch(r"\*/(\d+)", minute)
    if step and [hour, day, month, weekday] == ["*"] * 4:
        return f"every {int(step[1])} minutes"
    if not minute.isdigit():
        return None
    if [hour, day, month, weekday] == ["*"] * 4:
        return "every hour" if int(minute) == 0 else f"every hour at :{int(minute):02d}"
    if not hour.isdigit():
        return None
    at = f"at {int(hour):02d}:{int(minute):02d}"
    if [day, month] == ["*", "*"]:
        if weekday == "*":
            return f"daily {at}"
        if weekday == "1-5":
            return f"weekdays {at}"
        if weekday in ("0,6", "6,0"):
            return f"weekends {at}"
        if weekday.isdigit() and int(weekday) <= 7:
            return f"{_DAYS[int(weekday) % 7]} {at}"
        return None
    if weekday != "*" or not day.isdigit():
        return None
    if month == "*":
        return f"monthly on day {int(day)} {at}"
    if month.isdigit() and 1 <= int(month) <= 12:
        return f"yearly on {_MONTHS[int(month) - 1]} {int(day)} {at}"
    return None


def schedule_url(action: str, key: str) -> str:
    """The API URL of a button's ``action`` on schedule ``key``: by its endpoint, or from the
    API prefix while that endpoint is not registered."""
    endpoint = ENDPOINTS[action]
    if endpoint in current_app.view_functions:
        try:
            return url_for(endpoint, key=key)
        except BuildError:
            pass
    tail = "" if action == "remove" else "/" + action
    prefix = request.script_root + current_app.config["KUE_API_PREFIX"]
    return f"{prefix}/schedules/{quote(key, safe='')}{tail}"


def state_of(schedule: dict[str, Any]) -> str:
    """``active``, ``paused`` or ``ended``."""
    if schedule["ended"]:
        return "ended"
    return "paused" if schedule["paused"] else "active"


@dashboard.get("/schedules")
def schedules() -> str:
    found = queue().schedules()
    return render_page(
        "schedules.html",
        url_for("kue_api.events"),
        schedules=found,
        schedule_url=schedule_url,
        state_of=state_of,
    )
