"""Finding jobs by words, through the index the saving scripts keep (see
:mod:`kue_core.features.records` for what is indexed, ``scripts/search.lua`` for the query).

A query is words: a job matches when it is found by every word (the last word may be the
start of one: ``"inv"`` finds ``invoice``). A job is found by a word of its type, of its
``data.title``, of the data fields it names in ``searchKeys``, or of its tags. Filters by
state and type narrow the result. The cost is in proportion to the jobs of the rarest word,
not to the jobs in the queue.
"""

from __future__ import annotations

import re
from typing import Any

from .. import defaults
from ..base import checks
from ..base.errors import InvalidJob
from ..base.keys import Keys
from ..base.states import STATES
from ..base.values import validate_type
from ..store import calls
from ..store.calls import Op, read
from . import records

_ID = re.compile(r"#?([1-9][0-9]{0,17})")


class Found(list[int]):
    """Ids of matching jobs, newest first (one page); ``total`` matches in all, counted
    exactly unless ``exact`` is false (then at least that many: a query whose words must be
    checked job by job looks at ``defaults.SEARCH_SCAN`` candidates at most)."""

    def __init__(self, ids: list[int], total: int, exact: bool = True) -> None:
        super().__init__(ids)
        self.total = total
        self.exact = exact

    def to_dict(self) -> dict[str, Any]:
        return {"ids": list(self), "total": self.total, "exact": self.exact}


def query(
    keys: Keys,
    text: object,
    state: str | None,
    job_type: str | None,
    offset: int,
    count: int,
) -> Op[Found]:
    """See ``Queue.search`` (an operation: see :mod:`kue_core.jobs.ops`)."""
    if not isinstance(text, str) or not text.strip():
        raise InvalidJob("search text must be a non-empty string")
    if state is not None and state not in STATES:
        raise InvalidJob(f"state must be one of {', '.join(STATES)}, got {state!r}")
    if job_type is not None:
        validate_type(job_type)
    checks.integer(offset, "offset", 0)
    checks.integer(count, "count", 0, 1000)
    wanted = records.words(text)
    if not wanted:
        raise InvalidJob("search text must hold a letter or a digit")
    (known,) = yield read(("SMEMBERS", keys.types))
    types = {t: set(records.words(t)) for t in known}
    prefix = text.rstrip()[-1:].isalnum() or text.rstrip().endswith("_")
    terms: list[Any] = []
    for i, word in enumerate(wanted):
        last = prefix and i == len(wanted) - 1
        hits = [
            t
            for t, ws in types.items()
            if word in ws or (last and any(w.startswith(word) for w in ws))
        ]
        terms += [word, "1" if last else "", len(hits), *hits]
    total, exact, ids = yield calls.search(
        keys,
        offset,
        count,
        defaults.SEARCH_SCAN,
        state or "",
        job_type or "",
        [len(wanted), *terms],
    )
    by_id = _ID.fullmatch(text.strip())
    if by_id and offset == 0 and state is None and job_type is None:
        jid = int(by_id.group(1))
        if jid not in ids and (yield read(("EXISTS", keys.job(jid))))[0]:
            return Found([jid, *ids][: max(count, 1)], total + 1, exact)
    return Found(ids, total, exact)


def _begins(words: set[str], start: str) -> bool:
    return any(w.startswith(start) for w in words)
