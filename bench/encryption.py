#!/usr/bin/env python
"""What encryption at rest costs a job (docs/security.md): a queue with a key beside one
without, interleaved, on a redis-server of its own (no persistence).

Per round and per queue: ``--n`` saves one at a time (jobs/s and the producer's CPU per job),
then a drain of them by one worker process of ``--slots`` ``async def`` slots whose handler
returns its data (jobs/s, and the worker's CPU per job, from its first job to its last).
The job's data is ``--size`` bytes of JSON. Medians of the rounds, and each sealed figure
against the plain one; and, alone, the time to seal and to open one value of that size.

usage: python bench/encryption.py [--rounds 3] [--n 5000] [--slots 16] [--size 1000]
       [--redis-server /usr/bin/redis-server]
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import timeit

import psutil
import redis
from worker_cpu import _started  # (bench/, on the path when run as a script)

from kue_core import Queue, sealing

KEY = f"bench:{base64.b64encode(os.urandom(32)).decode()}"

WORKER = """
import os, resource, sys, threading, time
from kue_core import Queue

n = int(sys.argv[3])
queue = Queue(sys.argv[1], prefix="bench", encryption_keys=sys.argv[2])
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
    return job.data

queue.process("bench", int(sys.argv[4]), handler)
done.wait(600)
took = marks["t1"] - marks["t0"]
print((n - 1) / took, (marks["c1"] - marks["c0"]) / (n - 1) * 1e6, flush=True)
os._exit(0)
"""


def one(url: str, keys: str, n: int, slots: int, data: dict[str, str]) -> dict[str, float]:
    redis.Redis.from_url(url).flushall()
    me = psutil.Process()
    with Queue(url, prefix="bench", encryption_keys=keys) as queue:
        cpu0, began = sum(me.cpu_times()[:2]), time.monotonic()
        for _ in range(n):
            queue.create_job("bench", data).save()
        took, cpu = time.monotonic() - began, sum(me.cpu_times()[:2]) - cpu0
    out = subprocess.run(
        [sys.executable, "-c", WORKER, url, keys, str(n), str(slots)],
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    rate, worker_us = map(float, out.stdout.split())
    return {
        "save_per_s": n / took,
        "save_cpu_us": cpu / n * 1e6,
        "drain_per_s": rate,
        "worker_cpu_us": worker_us,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--n", type=int, default=5000)
    ap.add_argument("--slots", type=int, default=16)
    ap.add_argument("--size", type=int, default=1000)
    ap.add_argument("--redis-server", default=shutil.which("redis-server") or "redis-server")
    args = ap.parse_args()
    data = {"payload": "x" * max(0, args.size - 15)}
    ring = sealing.keyring(KEY)
    assert ring is not None
    text = json.dumps(data)
    sealed = ring.seal(text, "data")
    seal_us = min(timeit.repeat(lambda: ring.seal(text, "data"), number=2000, repeat=5)) / 2000
    open_us = min(timeit.repeat(lambda: ring.open(sealed, "data"), number=2000, repeat=5)) / 2000
    figures: dict[str, list[dict[str, float]]] = {"plain": [], "sealed": []}
    with tempfile.TemporaryDirectory() as workdir:
        server, url = _started(args.redis_server, workdir)
        try:
            for r in range(args.rounds):
                order = ["plain", "sealed"] if r % 2 == 0 else ["sealed", "plain"]
                for name in order:
                    keys = KEY if name == "sealed" else ""
                    figures[name].append(one(url, keys, args.n, args.slots, data))
        finally:
            server.kill()
            server.wait()
    print(f"data of {len(text)} bytes; sealed: {len(sealed)} bytes")
    print(f"seal one value: {seal_us * 1e6:.1f} µs, open one: {open_us * 1e6:.1f} µs")
    print("| figure | plain | encrypted | encrypted / plain |")
    print("|---|---:|---:|---:|")
    for figure in ("save_per_s", "save_cpu_us", "drain_per_s", "worker_cpu_us"):
        plain = statistics.median(f[figure] for f in figures["plain"])
        enc = statistics.median(f[figure] for f in figures["sealed"])
        print(f"| {figure} | {plain:,.1f} | {enc:,.1f} | {enc / plain:.2f}x |")


if __name__ == "__main__":
    main()
