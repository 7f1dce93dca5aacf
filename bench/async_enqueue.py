#!/usr/bin/env python
"""Enqueue from asyncio code: ``AsyncQueue`` beside the blocking ``Queue`` and BullMQ's
``queue.add``, on one Redis started here (``--save "" --appendonly no``).

Each round runs every client on N jobs into a flushed Redis, in a process of its own, one job
at a time (C=1) and C at a time (``asyncio.gather`` over C lanes; BullMQ: C promises; the
blocking client: C threads): jobs per second, the producer's CPU per job and Redis's CPU per
job. Rounds are interleaved and the order rotated; medians are reported, with ratios to
BullMQ from the same round. BullMQ runs from the shared harness's directory
(``../shared/bench/setup.sh`` makes it)::

    python bench/async_enqueue.py --redis-server /usr/bin/redis-server --bullmq /tmp/kue-bench
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time

import redis

HERE = os.path.dirname(os.path.abspath(__file__))

# One client's run, in a fresh interpreter: prints {"seconds", "cpu"}.
_PYTHON = r"""
import asyncio, json, sys, threading, time
import redis
port, n, c, kind = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
url = f"redis://127.0.0.1:{port}"
redis.Redis(port=port).flushall()
data = lambda i: {"i": i, "t": 1795474947.069}

def timed(run):
    cpu0, t0 = time.process_time(), time.perf_counter()
    run()
    return {"seconds": time.perf_counter() - t0, "cpu": time.process_time() - cpu0}

if kind == "sync":
    from kue_core import Queue
    q = Queue(url, prefix="bench")
    q.create_job("bench", data(-1)).save()
    def run():
        lanes = [range(k, n, c) for k in range(c)]
        def lane(ids):
            for i in ids:
                q.create_job("bench", data(i)).save()
        if c == 1:
            lane(lanes[0])
            return
        threads = [threading.Thread(target=lane, args=(ids,)) for ids in lanes]
        for t in threads: t.start()
        for t in threads: t.join()
    print(json.dumps(timed(run)))
else:
    from kue_core.aio import AsyncQueue
    async def main():
        async with AsyncQueue(url, prefix="bench") as q:
            await q.create_job("bench", data(-1)).save()
            async def lane(ids):
                for i in ids:
                    await q.create_job("bench", data(i)).save()
            cpu0, t0 = time.process_time(), time.perf_counter()
            await asyncio.gather(*(lane(range(k, n, c)) for k in range(c)))
            return {"seconds": time.perf_counter() - t0, "cpu": time.process_time() - cpu0}
    print(json.dumps(asyncio.run(main())))
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _redis_cpu(r: redis.Redis) -> float:
    info = r.info("cpu")
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


def _one(kind: str, port: int, n: int, c: int, bullmq: str | None) -> dict[str, float]:
    if kind == "bullmq":
        assert bullmq is not None
        argv = ["node", os.path.join(HERE, "bullmq_add.js"), bullmq, str(port), str(n), str(c)]
    else:
        argv = [sys.executable, "-c", _PYTHON, str(port), str(n), str(c), kind]
    r = redis.Redis(port=port)
    before = _redis_cpu(r)
    out = subprocess.run(argv, capture_output=True, text=True, check=True, timeout=600)
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    result["redis_cpu"] = _redis_cpu(r) - before  # includes its flush and warm-up: small
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--redis-server", default="redis-server")
    parser.add_argument("--bullmq", help="the shared harness's directory (BullMQ installed)")
    parser.add_argument("--n", type=int, default=10000)
    parser.add_argument("--conc", default="1,64")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    kinds = ["sync", "async", *(["bullmq"] if args.bullmq else [])]
    port = _free_port()
    with tempfile.TemporaryDirectory() as work:
        server = subprocess.Popen(
            [
                args.redis_server,
                "--port",
                str(port),
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                work,
            ],
            stdout=subprocess.DEVNULL,
        )
        try:
            r = redis.Redis(port=port)
            deadline = time.monotonic() + 10
            while True:
                try:
                    r.ping()
                    break
                except redis.ConnectionError:
                    assert time.monotonic() < deadline
                    time.sleep(0.05)
            results: dict[tuple[str, int], list[dict[str, float]]] = {}
            for rnd in range(args.rounds):
                order = kinds[rnd % len(kinds) :] + kinds[: rnd % len(kinds)]
                for c in (int(x) for x in args.conc.split(",")):
                    for kind in order:
                        got = _one(kind, port, args.n, c, args.bullmq)
                        results.setdefault((kind, c), []).append(got)
                        print(
                            f"round {rnd + 1} {kind} c={c}: {args.n / got['seconds']:.0f} jobs/s",
                            file=sys.stderr,
                        )
        finally:
            server.terminate()
            server.wait(10)
    print("| client | C | jobs/s | vs BullMQ | client CPU µs/job | Redis CPU µs/job |")
    print("|---|---:|---:|---:|---:|---:|")
    for c in (int(x) for x in args.conc.split(",")):
        base = None
        if ("bullmq", c) in results:
            base = statistics.median(args.n / x["seconds"] for x in results["bullmq", c])
        for kind in kinds:
            runs = results[kind, c]
            rate = statistics.median(args.n / x["seconds"] for x in runs)
            cpu = statistics.median(x["cpu"] / args.n * 1e6 for x in runs)
            rcpu = statistics.median(x["redis_cpu"] / args.n * 1e6 for x in runs)
            ratio = f"{rate / base:.2f}x" if base else "-"
            print(f"| {kind} | {c} | {rate:,.0f} | {ratio} | {cpu:.0f} | {rcpu:.0f} |")


if __name__ == "__main__":
    main()
