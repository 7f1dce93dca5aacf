"""The audit log: the changes made through the HTTP API and the dashboard, who made them and
how many jobs they touched (``kue_http`` records them; ``queue.audit()`` and
``GET /api/audit`` read them).

Each entry is one entry of a Redis stream (``<prefix>:audit``), whose id tells when. Its
fields: ``action`` (what was done: the API's name of the route, ``remove``), ``method``
and ``path`` of the request, ``who`` (the authenticated user, ``token`` for a bearer token,
or empty without authentication), ``from`` (the client's address), ``status`` (the answer's
HTTP status), ``jobs`` (how many jobs the change touched, when the answer tells) and
``detail`` (what the request does that its path does not say: a bulk action's filter). The log
is bounded: about ``AUDIT_MAX_ENTRIES`` entries, none older than ``AUDIT_MAX_AGE_MS``, trimmed
as entries are added (operations written once for both clients, as :mod:`kue_core.jobs.ops`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .. import defaults
from ..base import checks
from ..base.errors import InvalidJob
from ..base.keys import Keys
from ..store.calls import Op, read

#: The fields of an entry, in order; each a string (``status`` and ``jobs``: digits).
FIELDS = ("action", "method", "path", "who", "from", "status", "jobs", "detail")
#: Longest text kept of a field (a path with a long query string, say).
FIELD_LIMIT = 500
#: Entries read per round trip while looking for those a filter matches, and at most.
_CHUNK = 500
_CHUNKS = 20


def add(
    keys: Keys,
    entry: Mapping[str, Any],
    max_entries: int = defaults.AUDIT_MAX_ENTRIES,
    max_age_ms: int = defaults.AUDIT_MAX_AGE_MS,
) -> Op[str]:
    """Record ``entry`` (fields of :data:`FIELDS`; others are refused) and trim the log to
    its bounds: about ``max_entries``, none older than ``max_age_ms`` by the server's clock
    (the new entry's id). Returns the entry's id."""
    unknown = sorted(set(entry) - set(FIELDS))
    if unknown:
        raise InvalidJob(f"an audit entry has no field {unknown[0]!r}")
    checks.integer(max_entries, "max_entries", 1)
    checks.integer(max_age_ms, "max_age_ms", 1)
    values: list[str] = []
    for name in FIELDS:
        values += [name, str(entry.get(name, ""))[:FIELD_LIMIT]]
    (made,) = yield read(("XADD", keys.audit, "MAXLEN", "~", max_entries, "*", *values))
    made = str(made)
    oldest = max(0, int(made.partition("-")[0]) - max_age_ms)
    yield read(("XTRIM", keys.audit, "MINID", oldest))
    return made


def entries(
    keys: Keys,
    count: int = 100,
    before: str | None = None,
    action: str | None = None,
    who: str | None = None,
    since_ms: int | None = None,
) -> Op[list[dict[str, Any]]]:
    """The latest ``count`` entries (newest first) older than entry ``before`` (an id, for
    the next page), of ``action`` and by ``who`` when given (``who`` matches the user or the
    address), none before ``since_ms``: ``{"id", "at", field: value...}`` each, ``status`` and
    ``jobs`` as numbers (``jobs`` None when the answer did not tell)."""
    wanted = checks.integer(count, "count", 1, 1000)
    if before is not None and not _is_id(before):
        raise InvalidJob(f"before is an audit entry id (ms-seq), got {before!r:.100}")
    if before is not None and not before.strip("0-"):
        return []  # nothing is older than 0-0
    end = f"({before}" if before is not None else "+"
    start = "-" if since_ms is None else str(checks.integer(since_ms, "since", 0))
    found: list[dict[str, Any]] = []
    for _ in range(_CHUNKS):
        (chunk,) = yield read(("XREVRANGE", keys.audit, end, start, "COUNT", _CHUNK))
        for entry_id, fields in chunk:
            row = _row(str(entry_id), fields)
            if (action is None or row["action"] == action) and (
                who is None or who in (row["who"], row["from"])
            ):
                found.append(row)
                if len(found) == wanted:
                    return found
        if len(chunk) < _CHUNK:
            break
        end = f"({chunk[-1][0]}"
    return found


def _is_id(text: str) -> bool:
    """Whether ``text`` is a stream entry id: two numbers below 2**64."""
    ms, _, seq = text.partition("-")
    return (
        ms.isascii()
        and ms.isdigit()
        and seq.isascii()
        and seq.isdigit()
        and int(ms) < 2**64
        and int(seq) < 2**64
    )


def _row(entry_id: str, fields: Any) -> dict[str, Any]:
    if isinstance(fields, Mapping):
        got = {str(k): str(v) for k, v in fields.items()}
    else:
        got = {str(k): str(v) for k, v in zip(fields[::2], fields[1::2], strict=False)}
    row: dict[str, Any] = {"id": entry_id, "at": int(entry_id.partition("-")[0])}
    for name in FIELDS:
        row[name] = got.get(name, "")
    row["status"] = int(row["status"]) if row["status"].isdigit() else None
    row["jobs"] = int(row["jobs"]) if row["jobs"].isdigit() else None
    return row
