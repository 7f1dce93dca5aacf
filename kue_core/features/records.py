"""Job records: tags, tracking, search words and retention policies, checked and turned into
the values the scripts take (pure: no Redis here).

* **Tags** (``job.tags("customer:42", "vip")``): free strings, kept in the job's hash as a JSON
  list, indexed in ``<p>:tag:<tag>`` (ids by tagging time) and counted in ``<p>:tags``.
* **Search words**: the words of ``data.title``, of the data fields the job names in Kue's
  ``searchKeys`` option, and of its tags, each indexed in ``<p>:words:<word>`` (a sorted set
  whose members are Kue's zids, all of score 0, so it reads in id order: newest last). The
  words of a job's type are not stored per job: a query matches them against the few types.
  A word is a run of letters, digits or ``_``, case-folded, at most ``SEARCH_WORD`` characters.
* **Retention** (``remove_on_complete``, ``remove_on_fail``, ``queue.set_retention``): how
  many finished jobs to keep and for how long; see :mod:`kue_core.features.retention`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from .. import defaults
from ..base import checks
from ..base.errors import InvalidJob
from ..base.values import num

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_WORD = re.compile(r"\w+")


# -- text ---------------------------------------------------------------------------------
def _text(value: object, what: str, longest: int) -> str:
    """A non-empty string without control characters, at most ``longest`` long."""
    if not isinstance(value, str) or not value.strip():
        raise InvalidJob(f"{what} must be a non-empty string, got {value!r}")
    if len(value) > longest:
        raise InvalidJob(f"{what} must be at most {longest} characters, got {len(value)}")
    if _CONTROL.search(value):
        raise InvalidJob(f"{what} must not contain control characters")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidJob(f"{what} is not valid unicode (lone surrogate)") from None
    return value


def words(text: str) -> list[str]:
    """The search words of a text, in order, without repeats: ``"Hello, hello world" ->
    ["hello", "world"]``."""
    seen: dict[str, None] = {}
    for word in _WORD.findall(text.casefold()):
        seen[word[: defaults.SEARCH_WORD]] = None
    return list(seen)


# -- tags ---------------------------------------------------------------------------------
def tag(value: object) -> str:
    """A checked tag."""
    return _text(value, "a tag", defaults.MAX_TAG)


def tags(values: Iterable[object]) -> list[str]:
    """Checked tags, without repeats, in the order given."""
    out = list(dict.fromkeys(tag(v) for v in values))
    if not out:
        raise InvalidJob("give at least one tag")
    if len(out) > defaults.MAX_TAGS:
        raise InvalidJob(f"a job has at most {defaults.MAX_TAGS} tags, got {len(out)}")
    return out


def tag_rows(values: Iterable[str]) -> list[str]:
    """``tag, its words, tag, its words...`` as ``tag.lua`` takes them."""
    flat: list[str] = []
    for t in values:
        flat += [t, " ".join(words(t))]
    return flat


# -- search keys and data words -----------------------------------------------------------
def search_keys(values: Iterable[object]) -> list[str]:
    """Checked names of data fields to index (Kue's ``searchKeys``)."""
    out = list(dict.fromkeys(_text(v, "a search key", defaults.MAX_TAG) for v in values))
    if not out:
        raise InvalidJob("give at least one search key")
    if len(out) > defaults.MAX_TAGS:
        raise InvalidJob(f"a job has at most {defaults.MAX_TAGS} search keys, got {len(out)}")
    return out


def data_words(data: Any, keys: Iterable[str] = (), title: bool = True) -> list[str]:
    """The words a job's data is found by: ``data.title``'s (unless not ``title``: an
    encrypted queue's), then those of each field named in ``keys`` (strings, numbers,
    booleans, and lists of those); at most ``SEARCH_WORDS``."""
    if data.__class__ is not dict:
        return []
    found: dict[str, None] = {}
    for name in ("title", *keys) if title else keys:
        value = data.get(name)
        for item in value if isinstance(value, list) else (value,):
            if isinstance(item, bool):
                item = "true" if item else "false"
            if isinstance(item, (str, int, float)):
                found.update(dict.fromkeys(words(str(item))))
    return list(found)[: defaults.SEARCH_WORDS]


# -- retention ----------------------------------------------------------------------------
@dataclass(frozen=True)
class Keep:
    """How many finished jobs to keep (``count``) and for how long (``age``, ms); None: no
    bound on that."""

    count: int | None
    age: int | None

    def to_text(self) -> str:
        """``"count,age"`` with an empty part for no bound, as the scripts read it."""
        return f"{'' if self.count is None else self.count},{'' if self.age is None else self.age}"

    def to_dict(self) -> dict[str, int | None]:
        return {"count": self.count, "age": self.age}


#: ``remove_on_fail(True)``: the job itself goes as soon as it fails for good.
REMOVE = "remove"


def keep(value: object, what: str) -> Keep | None:
    """A retention policy: ``{"count": n, "age": ms}`` (either may be left out or None) or a
    count alone; ``None`` for no bound at all."""
    if value is None:
        return None
    if isinstance(value, dict):
        unknown = set(value) - {"count", "age"}
        if unknown:
            raise InvalidJob(f"{what} takes count and age, not {', '.join(sorted(unknown))}")
        count, age = value.get("count"), value.get("age")
        if isinstance(age, timedelta):
            age = age.total_seconds() * 1000
        return Keep(
            None if count is None else checks.integer(count, f"{what} count", 0, 10**12),
            None if age is None else int(checks.number(age, f"{what} age", 1, defaults.MAX_MS)),
        )
    return Keep(checks.integer(value, f"{what} count", 0, 10**12), None)


def job_keep(value: object, what: str) -> Keep | str | None:
    """A job's own policy: ``True`` (remove it), ``False`` (the queue's policy), a count, or
    ``{"count", "age"}`` (BullMQ's shapes)."""
    if value is True:
        return REMOVE
    if value is False:
        return None
    kept = keep(value, what)
    if kept is None:
        raise InvalidJob(f"{what} takes true, false, a count or {{count, age}}, got None")
    return kept


def keep_from_text(text: str | None) -> Keep | str | None:
    """Inverse of the stored form: ``"remove"``, ``"count,age"``; None when absent."""
    if text is None or text == "":
        return None
    if text == REMOVE:
        return REMOVE
    count, _, age = text.partition(",")
    return Keep(int(count) if count.isdigit() else None, int(age) if age.isdigit() else None)


def stored(policy: Keep | str | None) -> str:
    """A job's policy as its hash keeps it ('' for none)."""
    if policy is None:
        return ""
    return policy if isinstance(policy, str) else policy.to_text()


# -- what a save takes --------------------------------------------------------------------
def save_extras(
    data_json_words: list[str],
    job_tags: list[str] | None,
    keys: list[str] | None,
    track: bool,
    keep_complete: Keep | str | None,
    keep_failed: Keep | str | None,
    group: str | None = None,
    only: list[str] | None = None,
    fan_out: dict[str, Any] | None = None,
    prefer: list[str] | None = None,
    trace: str | None = None,
    stored_data: str | None = None,
) -> str:
    """The last value of a job's save row: '' for a job without records, else a JSON object
    ``save_job`` in ``lib/saving.lua`` reads (see its comment)."""
    given = (data_json_words, job_tags, keys, track, keep_complete, keep_failed, group, only)
    if not any(given) and not fan_out and not prefer and not trace and not stored_data:
        return ""
    out: dict[str, Any] = dict(fan_out or ())
    if stored_data:  # the name of its data in the payload store (kue_core/base/payloads.py)
        out["stored"] = stored_data
    if trace:
        out["trace"] = trace
    if prefer:
        out["prefer"] = prefer
    if group:
        out["group"] = group
    if only:
        out["only"] = only
    if data_json_words:
        out["words"] = " ".join(data_json_words)
    if job_tags:
        out["tags"] = tag_rows(job_tags)
    if keys:
        out["keys"] = json.dumps(keys, separators=(",", ":"))
    if track:
        out["track"] = 1
    if keep_complete:
        out["kc"] = stored(keep_complete)
    if keep_failed:
        out["kf"] = stored(keep_failed)
    return json.dumps(out, separators=(",", ":"))


def trail_entries(trail: str, worker: str | None) -> list[dict[str, Any]]:
    """The entries a plain job's claim and completion left in its hash field ``trail``
    instead of its history (see lib/events.lua trail_entries): ``"<at>,<attempt>"``, then
    ``",<at>,<duration>,<attempt>"`` once it completed."""
    v = [num(x) for x in trail.split(",")]
    if len(v) not in (2, 5) or any(x is None for x in v):
        return []  # not ours: none rather than a wrong one
    who = {"worker": worker} if worker is not None else {}
    out = [{"state": "active", "at": v[0], **who, "attempt": v[1]}]
    if len(v) == 5:
        out.append({"state": "complete", "at": v[2], **who, "attempt": v[4], "duration": v[3]})
    return out


def search_keys_of(text: object) -> list[str]:
    """A job's stored ``searchKeys`` (a JSON list of strings), or [] (absent, or written
    otherwise)."""
    try:
        value = json.loads(text) if isinstance(text, str) else None
    except ValueError:
        return []
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []
