#!/usr/bin/env python
"""Redis's instructions per claimed job, counted by callgrind: ``claim.lua`` (one job a call)
beside ``claim_batch.lua`` at n jobs a call, on plain jobs (no rules, no features).

For each row, N jobs are saved in bulk, the counters are zeroed, and only the claims run (one
client, one call at a time, until the N jobs are claimed); the jobs stay active. The figure is
Redis's user-space work for the claims alone (see ``bench/instructions.py``, whose Callgrind
class this uses).

usage: python bench/claim_batch.py [--redis-server /usr/bin/redis-server] [--n 2000]
       [--batch 1,4,16]

Prints one JSON line per row: the script, jobs per call, instructions and commands per job.
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

WORKER = "bench-worker"
LEASE = 600_000


def _saved(q: Queue, n: int) -> None:
    q.client.flushall()
    for start in range(0, n, 500):
        jobs = [
            q.create_job("bench", {"i": i, "t": 1795474947.069})
            for i in range(start, min(n, start + 500))
        ]
        q.save_many(jobs)


def _single(q: Queue) -> Callable[[], int]:
    def claim() -> int:
        return 1 if q.scripts.call(calls.claim(q.keys, "bench", WORKER, LEASE)) else 0

    return claim


def _batch(q: Queue, per_call: int) -> Callable[[], int]:
    def claim() -> int:
        got = q.scripts.call(calls.claim_batch(q.keys, "bench", WORKER, LEASE, per_call))
        return len(got.jobs)

    return claim


def _row(cg: Callgrind, q: Queue, n: int, claim: Callable[[], int]) -> dict[str, float]:
    _saved(q, n)
    cg.zero()
    before = cg.commands()
    claimed = 0
    while claimed < n:
        got = claim()
        assert got, "the jobs ran out before all were claimed"
        claimed += got
    commands = cg.commands() - before
    return {
        "instructions_per_job": round(cg.dumped() / n),
        "commands_per_job": round(commands / n, 3),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--redis-server", default=shutil.which("redis-server") or "redis-server")
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--batch", default="1,4,16")
    args = ap.parse_args()
    sizes = [int(b) for b in args.batch.split(",") if b]
    with tempfile.TemporaryDirectory() as workdir:
        cg = Callgrind(args.redis_server, workdir)
        q = Queue(f"redis://127.0.0.1:{cg.port}", prefix="bench")
        try:
            _saved(q, 40)  # both scripts loaded (compiled), outside the count
            _single(q)()
            if sizes:
                _batch(q, 4)()
            row = _row(cg, q, args.n, _single(q))
            print(json.dumps({"script": "claim", "per_call": 1, **row}))
            for size in sizes:
                row = _row(cg, q, args.n, _batch(q, size))
                print(json.dumps({"script": "claim_batch", "per_call": size, **row}))
        finally:
            q.close()
            cg.close()


if __name__ == "__main__":
    main()
