"""Unique jobs: ``create_job(...).unique(key, mode, ttl)`` saves at most one job per key.

Modes (what a save with a key that a job holds does):

* ``until_done`` (default): saves nothing and gives the holder's id, while the holder has not
  completed, failed for good, been cancelled or removed. The key goes in the script that ends
  the job, so no crash can leave it behind; ``ttl`` (optional) also expires it.
* ``throttle``: saves nothing for ``ttl`` ms after the first save, whatever became of that job.
* ``debounce``: while the holder waits (delayed or inactive), gives it the new data and due
  time (one job, run once after the last change); once it has started, saves a new job.
* ``reuse``: one job per key for ever, as Node's ``kue-unique`` plugin keeps it (in its hash
  ``<prefix>:unique:jobs``): the holder gets the new data, and waits again if it had finished.

Keys: ``<prefix>:unique:<key>`` (the holder's id) for the first three, kue-unique's hash for
``reuse``; the job's hash keeps ``unique`` and ``unique_mode``. See ``scripts/save_unique.lua``.
"""

from __future__ import annotations

import re
from datetime import timedelta
from typing import NamedTuple

from .. import defaults
from ..base import checks
from ..base.errors import InvalidJob

MODES = ("until_done", "throttle", "debounce", "reuse")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


class Unique(NamedTuple):
    key: str
    mode: str
    ttl: int  # ms; 0 = none


def normalize(key: object, mode: object, ttl: object) -> Unique:
    """A checked unique option, or ``InvalidJob``."""
    if not isinstance(key, str) or not key:
        raise InvalidJob(f"a unique key must be a non-empty string, got {key!r}")
    if len(key) > defaults.MAX_UNIQUE_KEY:
        raise InvalidJob(f"a unique key must be at most {defaults.MAX_UNIQUE_KEY} characters")
    if _CONTROL.search(key):
        raise InvalidJob("a unique key must not contain control characters")
    try:
        key.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidJob("a unique key is not valid unicode (lone surrogate)") from None
    if key == "jobs":
        raise InvalidJob(
            "the unique key 'jobs' is taken: <prefix>:unique:jobs is kue-unique's hash"
        )
    if mode not in MODES:
        raise InvalidJob(f"unique mode must be one of {', '.join(MODES)}, got {mode!r}")
    ms = 0
    if ttl is not None:
        if mode == "reuse":
            raise InvalidJob("a reuse key holds for ever: it takes no ttl")
        if isinstance(ttl, timedelta):
            ttl = ttl.total_seconds() * 1000
        ms = int(checks.number(ttl, "unique ttl", 1, defaults.MAX_MS, " ms"))
    elif mode == "throttle":
        raise InvalidJob("a throttle key needs a ttl (ms): how long it blocks duplicates")
    return Unique(key, mode, ms)
