"""Finding jobs by text: a bounded scan of the newest jobs (there is no full-text index)."""

from __future__ import annotations

import json
import re
from typing import cast

import redis

from . import checks
from .errors import InvalidJob
from .keys import Keys, job_id_from_zid

#: Jobs read per pipelined batch.
_BATCH = 500


def scan(client: redis.Redis, keys: Keys, text: str, limit: int, newest: int) -> list[int]:
    """See ``Queue.search``: ids of matching jobs among the ``newest`` jobs, newest first."""
    if not isinstance(text, str) or not text.strip():
        raise InvalidJob("search text must be a non-empty string")
    checks.integer(limit, "limit", 1)
    checks.integer(newest, "scan", 1)
    needle = text.strip().casefold()
    found: list[int] = []
    as_id = int(needle) if re.fullmatch(r"[0-9]{1,18}", needle) else None
    if as_id and client.exists(keys.job(as_id)):
        found.append(as_id)
    for start in range(0, newest, _BATCH):
        members = cast(
            list[str], client.zrange(keys.jobs, start, min(start + _BATCH, newest) - 1, desc=True)
        )
        ids = sorted((job_id_from_zid(m) for m in members), reverse=True)
        pipe = client.pipeline(transaction=False)
        for jid in ids:
            pipe.hmget(keys.job(jid), "type", "data")
        for jid, (job_type, data) in zip(ids, pipe.execute(), strict=True):
            if (
                jid != as_id
                and job_type is not None
                and (needle in job_type.casefold() or needle in _title(data).casefold())
            ):
                found.append(jid)
                if len(found) >= limit:
                    return found
        if len(members) < _BATCH:
            break
    return found


def _title(data: str | None) -> str:
    """``data.title`` of a stored job, or ""."""
    if not data or '"title"' not in data:
        return ""
    try:
        value = json.loads(data)
    except ValueError:
        return ""
    title = value.get("title") if isinstance(value, dict) else None
    return title if isinstance(title, str) else ""
