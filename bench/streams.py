#!/usr/bin/env python
"""What a streamed part costs (docs/streams.md): ``job.stream()`` in a handler, on a
redis-server of its own (no persistence).

- **parts**: ``--jobs`` jobs in turn, whose handler streams ``--parts`` parts of 20 bytes of
  JSON each (a token of text; fewer than the stream keeps, so that nothing is trimmed), in a
  worker process of its own of one slot, three ways: a ``def`` handler's ``job.stream()``
  (waits for Redis), an ``async def`` one's ``await job.astream()`` (waits too), and an
  ``async def`` one's ``job.stream()`` (handed to the loop without waiting; the last part
  awaited, so that every part is written when the clock stops). Parts a second, the worker's
  CPU per part, and Redis's memory per part (``MEMORY USAGE`` of the stream, all of it).
- **drain**: ``--n`` jobs saved in bulk, then drained by one worker process of ``--slots``
  ``async def`` slots, a plain job beside one that streams ``--per-job`` parts
  (``job.stream()``): jobs a second from the first handler's start to the last's, and the
  worker's CPU per job.

The ways and the kinds of job take turns, in an order rotated every round; medians of
``--rounds``, and the median of the rounds' ratios, each against the figure it ran beside
(this machine's load moves both). With ``--instructions``, Redis's instructions per part too,
counted by valgrind's callgrind (``bench/instructions.py``): one job streaming
``--parts-counted`` parts, beside a drain of ``--n-counted`` plain jobs, one slot.

usage: python bench/streams.py [--rounds 3] [--parts 5000] [--jobs 5] [--n 6000] [--slots 16]
       [--per-job 10] [--instructions] [--n-counted 300] [--parts-counted 3000]
       [--redis-server PATH]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any

import redis
from worker_cpu import _started  # (bench/, on the path when run as a script)

from kue_core import Job, Queue

#: A part of 20 bytes of JSON: a string of 18 characters, as a token of text would be.
PART = "x" * 18

# Jobs streaming their parts, one after another: prints the first job's id, the parts a
# second and the CPU µs a part, from the first job's first part until the last one's last is
# written.
PARTS_WORKER = """
import asyncio, os, resource, sys, threading, time
from kue_core import Queue

url, way, n, jobs = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
queue = Queue(url, prefix="bench")
part = "x" * 18
marks = {}
done = threading.Event()

def cpu():
    u = resource.getrusage(resource.RUSAGE_SELF)
    return u.ru_utime + u.ru_stime

def started():
    if "t0" not in marks:
        marks["t0"], marks["c0"] = time.monotonic(), cpu()

def ended():
    marks["t1"], marks["c1"] = time.monotonic(), cpu()
    marks["ended"] = marks.get("ended", 0) + 1
    if marks["ended"] == jobs:
        done.set()

if way == "def":
    def handler(job):
        started()
        for _ in range(n):
            job.stream(part)
        ended()
elif way == "astream":
    async def handler(job):
        started()
        for _ in range(n):
            await job.astream(part)
        ended()
else:
    async def handler(job):
        started()
        for _ in range(n - 1):
            job.stream(part)
        await job.astream(part)  # after the others, in order: all are written
        ended()

first = [queue.create_job("bench").save() for _ in range(jobs)][0]
queue.process("bench", 1, handler)
done.wait(600)
took, streamed = marks["t1"] - marks["t0"], n * jobs
print(first.id, streamed / took, (marks["c1"] - marks["c0"]) / streamed * 1e6, flush=True)
os._exit(0)
"""

# A drain of jobs already saved: prints jobs a second and the CPU µs a job, from the first
# handler's start to the last's.
DRAIN_WORKER = """
import os, resource, sys, threading, time
from kue_core import Queue

url, n, slots, per_job = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
queue = Queue(url, prefix="bench")
part = "x" * 18
seen = [0]
marks = {}
done = threading.Event()

def cpu():
    u = resource.getrusage(resource.RUSAGE_SELF)
    return u.ru_utime + u.ru_stime

async def handler(job):
    seen[0] += 1
    if seen[0] == 1:
        marks["t0"], marks["c0"] = time.monotonic(), cpu()
    elif seen[0] == n:
        marks["t1"], marks["c1"] = time.monotonic(), cpu()
        done.set()
    for _ in range(per_job):
        job.stream(part)
    return None

queue.process("bench", slots, handler)
done.wait(600)
took = marks["t1"] - marks["t0"]
print((n - 1) / took, (marks["c1"] - marks["c0"]) / (n - 1) * 1e6, flush=True)
os._exit(0)
"""

WAYS = ("def", "astream", "stream")


def _run(source: str, *args: object) -> list[float]:
    argv = [sys.executable, "-c", source, *map(str, args)]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=600, check=True)
    return [float(x) for x in out.stdout.split()]


def parts(url: str, way: str, n: int, jobs: int) -> dict[str, float]:
    client = redis.Redis.from_url(url)
    client.flushall()
    job_id, rate, cpu_us = _run(PARTS_WORKER, url, way, n, jobs)
    with Queue(url, prefix="bench") as q:
        keys = [q.keys.stream(int(job_id) + i) for i in range(jobs)]
    held = [client.xlen(key) for key in keys]
    assert held == [n] * jobs, f"{held} parts held of {n} each"
    key = keys[0]
    memory = int(client.memory_usage(key, samples=0) or 0)
    return {"parts_per_s": rate, "worker_cpu_us": cpu_us, "redis_bytes": memory / n}


def drain(url: str, n: int, slots: int, per_job: int) -> dict[str, float]:
    client = redis.Redis.from_url(url)
    client.flushall()
    with Queue(url, prefix="bench") as q:
        for start in range(0, n, 500):
            q.save_many(
                [q.create_job("bench", {"i": i}) for i in range(start, min(n, start + 500))]
            )
    rate, cpu_us = _run(DRAIN_WORKER, url, n, slots, per_job)
    return {"jobs_per_s": rate, "worker_cpu_us": cpu_us}


def instructions(server: str, n: int, many: int) -> dict[str, float]:
    """Redis's instructions per part, under callgrind, one slot in this process: one job
    streaming ``many`` parts (its claim and completion are lost in them), beside a drain of
    ``n`` plain jobs."""
    from instructions import Callgrind  # (bench/, on the path when run as a script)

    with tempfile.TemporaryDirectory() as scratch:
        cg = Callgrind(server, scratch)
        url = f"redis://127.0.0.1:{cg.port}"
        try:
            _counted(cg, url, 20, 5)  # the scripts loaded, outside the count
            plain = _counted(cg, url, n, 0)
            streamed = _counted(cg, url, 1, many)
        finally:
            cg.close()
    return {
        "plain_job": plain["instructions_per_job"],
        "part": streamed["instructions_per_job"] / many,
        "commands_per_part": streamed["commands_per_job"] / many,
    }


def _counted(cg: Any, url: str, n: int, per_job: int) -> dict[str, float]:
    """``n`` jobs of ``per_job`` parts saved, then drained by one slot while ``cg`` counts:
    Redis's instructions and commands per job."""
    from instructions import _phase

    q = Queue(url, prefix="bench")
    q.client.flushall()
    _saved(q, n)
    left, done, lock = [n], threading.Event(), threading.Lock()

    def handler(job: Job) -> None:
        for _ in range(per_job):
            job.stream(PART)
        with lock:
            left[0] -= 1
            if left[0] == 0:
                done.set()

    def run() -> None:
        q.process("bench", 1, handler)
        done.wait(3600)
        while q.count("complete", "bench") < n:  # the last reports
            time.sleep(0.01)

    try:
        return _phase(cg, n, run)  # type: ignore[return-value]
    finally:
        q.shutdown()
        q.close()


def _saved(q: Queue, n: int) -> None:
    """``n`` jobs saved in bulk."""
    for start in range(0, n, 500):
        q.save_many([q.create_job("bench", {"i": i}) for i in range(start, min(n, start + 500))])


def _median(rows: list[dict[str, float]], figure: str) -> float:
    return statistics.median(r[figure] for r in rows)


def _ratios(rows: list[dict[str, float]], base: list[dict[str, float]], figure: str) -> str:
    """The median of the rounds' ratios of ``figure`` (each against its own round's, which
    ran beside it: the load this machine is under moves both), and their range."""
    ratios = sorted(r[figure] / b[figure] for r, b in zip(rows, base, strict=True))
    return f"{statistics.median(ratios):.2f}x ({ratios[0]:.2f}-{ratios[-1]:.2f})"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--parts", type=int, default=5000)
    ap.add_argument("--jobs", type=int, default=5)
    ap.add_argument("--n", type=int, default=6000)
    ap.add_argument("--slots", type=int, default=16)
    ap.add_argument("--per-job", type=int, default=10)
    ap.add_argument("--instructions", action="store_true")
    ap.add_argument("--n-counted", type=int, default=300)
    ap.add_argument("--parts-counted", type=int, default=3000)
    ap.add_argument("--redis-server", default=shutil.which("redis-server") or "redis-server")
    args = ap.parse_args()
    by_way: dict[str, list[dict[str, float]]] = {w: [] for w in WAYS}
    by_kind: dict[str, list[dict[str, float]]] = {"plain": [], "parts": []}
    with tempfile.TemporaryDirectory() as workdir:
        server, url = _started(args.redis_server, workdir)
        try:
            for r in range(args.rounds):
                for way in WAYS[r % 3 :] + WAYS[: r % 3]:
                    by_way[way].append(parts(url, way, args.parts, args.jobs))
                for kind in ["plain", "parts"] if r % 2 == 0 else ["parts", "plain"]:
                    per_job = args.per_job if kind == "parts" else 0
                    by_kind[kind].append(drain(url, args.n, args.slots, per_job))
        finally:
            server.kill()
            server.wait()
    size = len(json.dumps(PART))
    print(f"{args.jobs} jobs in turn, each streaming {args.parts:,} parts of {size} bytes of JSON:")
    print(
        "| way | parts a second | / def's, per round | worker CPU µs a part | Redis bytes a part |"
    )
    print("|---|---:|---:|---:|---:|")
    for way in WAYS:
        rows = by_way[way]
        against = _ratios(rows, by_way["def"], "parts_per_s")
        print(
            f"| {way} | {_median(rows, 'parts_per_s'):,.0f} | {against} | "
            f"{_median(rows, 'worker_cpu_us'):,.1f} | {_median(rows, 'redis_bytes'):,.1f} |"
        )
    slots = f"{args.slots} async def slots"
    print(f"\na drain of {args.n:,} jobs, {slots}, {args.per_job} parts a job:")
    print("| figure | plain | with parts | with parts / plain, per round |")
    print("|---|---:|---:|---:|")
    for figure in ("jobs_per_s", "worker_cpu_us"):
        plain, streamed = _median(by_kind["plain"], figure), _median(by_kind["parts"], figure)
        against = _ratios(by_kind["parts"], by_kind["plain"], figure)
        print(f"| {figure} | {plain:,.1f} | {streamed:,.1f} | {against} |")
    if args.instructions:
        counted = instructions(args.redis_server, args.n_counted, args.parts_counted)
        print("\nRedis's instructions (callgrind), one slot:", json.dumps(counted))


if __name__ == "__main__":
    main()
