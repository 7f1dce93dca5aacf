"""A plain job's save (no records, no delay, no dependencies, no unique key) takes a short
path in lib/saving.lua (save_plain): it must write exactly what the general path writes."""

from __future__ import annotations

import redis

from kue_core import Queue
from kue_core.base.keys import zid
from kue_core.store import calls
from tests.conftest import heard, wait_for


def _layout(r: redis.Redis, prefix: str, job_id: int, jtype: str) -> dict[str, object]:
    """What a save wrote for one job, its id and times left out."""
    h = r.hgetall(f"{prefix}:job:{job_id}")
    assert h["created_at"] == h["promote_at"] == h["updated_at"]
    for field in ("created_at", "promote_at", "updated_at"):
        h.pop(field)
    member = zid(job_id)
    scores = [
        r.zscore(f"{prefix}:jobs", member),
        r.zscore(f"{prefix}:jobs:inactive", member),
        r.zscore(f"{prefix}:jobs:{jtype}:inactive", member),
    ]
    return {"hash": h, "scores": scores, "history": r.exists(f"{prefix}:job:{job_id}:history")}


def test_the_plain_path_writes_what_the_general_one_does(
    queue: Queue, r: redis.Redis, prefix: str
) -> None:
    with heard(r, f"{prefix}:events") as got:
        rows = []
        for options in ({}, {"ttl": 5000, "backoff": True, "once": True}):
            job = queue.create_job('t "q"', {"n": 1}).priority("high")
            if options:
                job.ttl(5000).backoff(True).remove_on_complete(True)
            row = job._save_row()
            assert row[-1] == ""  # no records: the plain path
            # The same job with an empty records object takes the general path.
            rows += [row, [*row[:-1], "{}"]]
        # A priority that is not an integer (the client sends none): the same text and scores.
        odd = [*rows[0][:2], "2.5", *rows[0][3:]]
        rows += [odd, [*odd[:-1], "{}"]]
        ids = queue.scripts.call(calls.save(queue.keys, rows))
        for plain, general in zip(ids[::2], ids[1::2], strict=True):
            assert _layout(r, prefix, plain, 't "q"') == _layout(r, prefix, general, 't "q"')
        bare = r.hgetall(f"{prefix}:job:{ids[0]}")
        assert set(bare) == {
            "type",
            "data",
            "priority",
            "state",
            "created_at",
            "promote_at",
            "updated_at",
            "max_attempts",
        }
        full = r.hgetall(f"{prefix}:job:{ids[2]}")
        assert full["ttl"] == "5000" and full["removeOnComplete"] == "true" and "backoff" in full
        # A bare job after one with options: the options are not carried over.
        (last,) = queue.scripts.call(calls.save(queue.keys, [rows[0]]))
        assert set(r.hgetall(f"{prefix}:job:{last}")) == set(bare)
        assert r.llen(f'{prefix}:t "q":jobs') == 7
        assert r.smembers(f"{prefix}:job:types") == {'t "q"'}
        wait_for(lambda: len(got) >= 7)
        expected = {"event": "enqueue", "args": ["enqueue", 't "q"'], "type": 't "q"'}
        assert got == [{"id": i, **expected} for i in [*ids, last]]
