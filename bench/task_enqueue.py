#!/usr/bin/env python
"""What a typed task's ``enqueue`` costs beside ``create_job(type, data).save()``, on one Redis
started here (``--save "" --appendonly no``).

A task's enqueue binds the call to the function's parameters, checks each argument by its
annotation (pydantic) and writes it as JSON before the same ``save()``. Each round saves N jobs
one by one with each of the two, in a process of its own, into a flushed Redis; the order is
rotated every round, and the medians of jobs per second and of the producer's CPU per job are
reported, with their ratio from the same round::

    python bench/task_enqueue.py --redis-server /usr/bin/redis-server --n 5000 --rounds 5
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import subprocess
import sys
import tempfile
import time

import redis

# One side's run, in a fresh interpreter: prints {"seconds", "cpu"}.
_RUN = r"""
import json, sys, time
import redis
from kue_core import Queue
port, n, kind = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
redis.Redis(port=port).flushall()
q = Queue(f"redis://127.0.0.1:{port}", prefix="bench")

@q.task("email", attempts=3)
def send_email(to: str, subject: str, body: str = "", retries: int = 0) -> None:
    return None

def plain(i):
    data = {"to": f"user{i}@example.com", "subject": "hello", "body": "", "retries": 0}
    q.create_job("email", data).attempts(3).save()

def task(i):
    send_email.enqueue(f"user{i}@example.com", subject="hello")

one = plain if kind == "plain" else task
one(-1)  # connected, scripts loaded, the task's annotations read
cpu0, t0 = time.process_time(), time.perf_counter()
for i in range(n):
    one(i)
print(json.dumps({"seconds": time.perf_counter() - t0, "cpu": time.process_time() - cpu0}))
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--redis-server", default="redis-server")
    parser.add_argument("--n", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    port = _free_port()
    with tempfile.TemporaryDirectory() as tmp:
        server = subprocess.Popen(
            [args.redis_server, "--port", str(port), "--save", "", "--appendonly", "no"],
            cwd=tmp,
            stdout=subprocess.DEVNULL,
        )
        try:
            deadline = time.monotonic() + 10
            while True:
                try:
                    redis.Redis(port=port).ping()
                    break
                except redis.ConnectionError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.05)
            rates: dict[str, list[float]] = {"plain": [], "task": []}
            cpus: dict[str, list[float]] = {"plain": [], "task": []}
            ratios = []
            for k in range(args.rounds):
                order = ["plain", "task"] if k % 2 == 0 else ["task", "plain"]
                got = {}
                for kind in order:
                    out = subprocess.run(
                        [sys.executable, "-c", _RUN, str(port), str(args.n), kind],
                        check=True,
                        capture_output=True,
                        text=True,
                    )
                    got[kind] = json.loads(out.stdout)
                for kind, run in got.items():
                    rates[kind].append(args.n / run["seconds"])
                    cpus[kind].append(1e6 * run["cpu"] / args.n)
                ratios.append(got["task"]["seconds"] / got["plain"]["seconds"])
            for kind in ("plain", "task"):
                print(
                    json.dumps(
                        {
                            "side": kind,
                            "jobs_per_s": round(statistics.median(rates[kind])),
                            "cpu_us_per_job": round(statistics.median(cpus[kind]), 1),
                            "n": args.n,
                            "rounds": args.rounds,
                        }
                    )
                )
            print(json.dumps({"task_time_over_plain": round(statistics.median(ratios), 3)}))
        finally:
            server.terminate()
            server.wait(10)


if __name__ == "__main__":
    main()
