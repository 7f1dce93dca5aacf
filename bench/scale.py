#!/usr/bin/env python
"""What a request costs as the backlog grows: with N waiting jobs (10,000, 100,000,
1,000,000 by default), the time of a save, a claim (with the completion of the job before it,
as a busy worker slot makes them), a dashboard list page (first and last), the JSON API's
list, the overview page, the counts, a search, and one whole ``kue doctor`` check; and the
Redis memory per waiting job.

usage: python bench/scale.py REDIS_URL [--sizes 10000,100000,1000000] [--reps 30]

Every job has a title ``order <i mod 1000>`` (searchable words: ``order`` in every job, the
number in one in a thousand); one in ten is of a second type. Times are medians over --reps
calls, in ms, measured in this process (so they include the round trip and, for pages, the
rendering). The Redis is flushed, and its functions: use a private one.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable

from kue_core import Queue, doctor
from kue_core.store import calls
from kue_http.app import create_app

CHUNK = 1000
WORKER, LEASE = "scale:1", 600_000


def _used(q: Queue) -> int:
    return int(q.client.info("memory")["used_memory"])


def _fill(q: Queue, start: int, stop: int) -> None:
    for first in range(start, stop, CHUNK):
        q.save_many(
            [
                q.create_job("bench" if i % 10 else "other", {"i": i, "title": f"order {i % 1000}"})
                for i in range(first, min(first + CHUNK, stop))
            ]
        )


def _ms(fn: Callable[[], object], reps: int) -> float:
    times = []
    for _ in range(reps):
        began = time.perf_counter()
        fn()
        times.append((time.perf_counter() - began) * 1000)
    return round(statistics.median(times), 3)


def _get(client, path: str) -> Callable[[], object]:  # type: ignore[no-untyped-def]
    def fetch() -> object:
        reply = client.get(path)
        assert reply.status_code == 200, (path, reply.status_code)
        return reply

    return fetch


def measure(q: Queue, app_client, n: int, reps: int) -> dict[str, float]:  # type: ignore[no-untyped-def]
    held: list[tuple[int, str]] = []

    def claim() -> None:
        # As a busy slot: complete the job held, claim the next in the same call.
        if held:
            job_id, token = held.pop()
            got = q.scripts.call(
                calls.complete(q.keys, job_id, token, "{}", (WORKER, LEASE))
            ).next_job
        else:
            got = q.scripts.call(calls.claim(q.keys, "bench", WORKER, LEASE))
        assert isinstance(got, tuple), got
        held.append((got[0], got[1]["lease"]))

    last_page = max(1, n * 9 // 10 // 20)
    out = {
        "save": _ms(lambda: q.create_job("bench", {"title": "order 1"}).save(), reps),
        "claim": _ms(claim, reps),
        "list page 1": _ms(_get(app_client, "/jobs/inactive?type=bench&size=20"), reps),
        "list last page": _ms(
            _get(app_client, f"/jobs/inactive?type=bench&size=20&page={last_page}"), reps
        ),
        "api list": _ms(_get(app_client, "/api/jobs/bench/inactive/0..19/asc"), reps),
        "overview": _ms(_get(app_client, "/"), reps),
        "counts": _ms(q.counts, reps),
        "api stats": _ms(_get(app_client, "/api/stats"), reps),
        "search rare": _ms(lambda: q.search("order 17"), reps),
        "search common": _ms(lambda: q.search("order"), reps),
    }
    began = time.perf_counter()
    report = doctor.check(q)
    out["doctor s"] = round(time.perf_counter() - began, 2)
    assert report.healthy, report.counts()
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("redis_url")
    ap.add_argument("--sizes", default="10000,100000,1000000")
    ap.add_argument("--reps", type=int, default=30)
    args = ap.parse_args()
    q = Queue(args.redis_url, prefix="scale")
    # No background sampling of the history: the pages' times alone.
    app = create_app(
        {"KUE_REDIS_URL": args.redis_url, "KUE_PREFIX": "scale", "KUE_HISTORY_SAMPLE": False}
    )
    client = app.test_client()
    q.client.flushall()
    if q.scripts.functions:
        q.client.function_flush()  # libraries of other versions would be doctor findings
    have = 0
    rows: list[dict[str, float]] = []
    base = _used(q)
    for n in sorted(int(s) for s in args.sizes.split(",")):
        began = time.perf_counter()
        _fill(q, have, n)
        fill_s = time.perf_counter() - began
        have = n
        row: dict[str, float] = {"waiting": n, "bytes per job": round((_used(q) - base) / n)}
        row["fill jobs/s"] = round((n - (rows[-1]["waiting"] if rows else 0)) / fill_s)
        row.update(measure(q, client, n, args.reps))
        rows.append(row)
        print(json.dumps(row), flush=True)
    q.client.flushall()
    q.close()


if __name__ == "__main__":
    main()
