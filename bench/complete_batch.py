#!/usr/bin/env python
"""Redis's instructions per completed job (callgrind, as ``bench/instructions.py`` counts
them) for ``complete_batch.lua`` at k jobs a call beside ``complete.lua``'s one: what a worker
whose slots share one connection saves by sending its completions together.

Two phases, each on N plain jobs saved in bulk first:

* ``complete``: the jobs are claimed first (not counted), then only their completions are
  counted: N calls of complete.lua (the worker counting, as a worker's do), or N/k calls of
  complete_batch.lua.
* ``complete+claim``: a worker holding k jobs completes them and claims the next k in the
  same call until all N are done (complete.lua: one job and the next); counted from the first
  completion, so it is a completion and a claim per job.

usage: python bench/complete_batch.py [--redis-server /usr/bin/redis-server] [--n 1000]
       [--k 1,4,16] [--fail]

``--fail`` also counts fail.lua per failed attempt (retried at once), for its own A/B.

Prints one JSON line per script, phase and k: instructions and Redis commands per job.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Callable

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from instructions import Callgrind

from kue_core import Queue
from kue_core.store import calls

W, LEASE, TYPE = "bench-worker", 600_000, "bench"


def _fresh(q: Queue, n: int) -> None:
    q.client.flushall()
    for start in range(0, n, 500):
        q.save_many([q.create_job(TYPE, {"i": i}) for i in range(start, min(n, start + 500))])


def _claimed(q: Queue, n: int) -> list[tuple[int, str]]:
    held = []
    for _ in range(n):
        got = q.scripts.call(calls.claim(q.keys, TYPE, W, LEASE))
        assert isinstance(got, tuple), got
        held.append((got[0], got[1]["lease"]))
    return held


def _count(cg: Callgrind, q: Queue, n: int, run: Callable[[], None]) -> dict[str, float]:
    cg.zero()
    before = cg.commands()
    run()
    commands = cg.commands() - before
    figures = {"instructions_per_job": round(cg.dumped() / n), "commands_per_job": commands / n}
    assert q.count("complete", TYPE) == n, q.count("complete", TYPE)
    return figures


def complete_only(cg: Callgrind, q: Queue, n: int, k: int | None) -> dict[str, float]:
    """N completions of claimed jobs: complete.lua (k None) or complete_batch.lua by k."""
    _fresh(q, n)
    held = _claimed(q, n)

    def single() -> None:
        for job_id, token in held:
            q.scripts.call(calls.complete(q.keys, job_id, token, "null", None, tallied=True))

    def batched() -> None:
        assert k is not None
        for start in range(0, n, k):
            done = [(i, t, "null") for i, t in held[start : start + k]]
            q.scripts.call(calls.complete_batch(q.keys, done, None))

    return _count(cg, q, n, single if k is None else batched)


def complete_and_claim(cg: Callgrind, q: Queue, n: int, k: int | None) -> dict[str, float]:
    """A worker of k slots (1 for complete.lua) completing what it holds and claiming as many
    in the same call, until N are done."""
    _fresh(q, n)
    held = _claimed(q, k or 1)

    def single() -> None:
        job_id, token = held[0]
        while True:
            got = q.scripts.call(calls.complete(q.keys, job_id, token, "null", (W, LEASE), True))
            nxt = got.next_job
            if not isinstance(nxt, tuple):
                return
            job_id, token = nxt[0], nxt[1]["lease"]

    def batched() -> None:
        assert k is not None
        now = held
        while now:
            done = [(i, t, "null") for i, t in now]
            got = q.scripts.call(calls.complete_batch(q.keys, done, (W, LEASE, k, [TYPE])))
            now = [(i, h["lease"]) for i, h in got.jobs]

    return _count(cg, q, n, single if k is None else batched)


def fail_only(cg: Callgrind, q: Queue, n: int, k: int | None) -> dict[str, float]:
    """N failed attempts of claimed jobs, one fail.lua call each (a job has one attempt by
    default: it fails for good; the figure of a plain failure, for fail.lua's own A/B)."""
    _fresh(q, n)
    held = _claimed(q, n)

    def run() -> None:
        for job_id, token in held:
            q.scripts.call(calls.fail(q.keys, job_id, token, "boom", "boom", 0, None))

    cg.zero()
    before = cg.commands()
    run()
    commands = cg.commands() - before
    figures = {"instructions_per_job": round(cg.dumped() / n), "commands_per_job": commands / n}
    assert q.count("failed", TYPE) == n
    return figures


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--redis-server", default=shutil.which("redis-server") or "redis-server")
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--k", default="1,4,16")
    ap.add_argument("--fail", action="store_true", help="also fail.lua's figure per attempt")
    args = ap.parse_args()
    ks = [int(k) for k in args.k.split(",")]
    with tempfile.TemporaryDirectory() as workdir:
        cg = Callgrind(args.redis_server, workdir)
        q = Queue(f"redis://127.0.0.1:{cg.port}", prefix="bench")
        try:
            for phase, measure in (
                ("complete", complete_only),
                ("complete+claim", complete_and_claim),
            ):
                measure(cg, q, 32, None)  # the scripts loaded (compiled), outside the count
                measure(cg, q, 32, 4)
                rows = [("complete", None)] + [("complete_batch", k) for k in ks]
                for script, k in rows:
                    figures = measure(cg, q, args.n, k)
                    print(json.dumps({"script": script, "phase": phase, "k": k or 1, **figures}))
            if args.fail:
                fail_only(cg, q, 32, None)
                figures = fail_only(cg, q, args.n, None)
                print(json.dumps({"script": "fail", "phase": "fail", "k": 1, **figures}))
        finally:
            q.close()
            cg.close()


if __name__ == "__main__":
    main()
