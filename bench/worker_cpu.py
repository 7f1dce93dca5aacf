#!/usr/bin/env python
"""A worker process's CPU per job: one process of ``--slots`` slots drains ``--n`` jobs of a
no-op handler (``def`` or ``async def``), and its user + system CPU from idle to drained is
divided by the jobs. The figure the worker runtime is judged by (issue 53: at most 90 µs with
``def`` handlers and 60 µs with ``async def`` ones, at 16 slots).

A redis-server of its own is started on a free port, without persistence. The worker comes up
first, idle; the jobs are saved in bulk once it waits, and its CPU is read before the first
save and after the last job completed, so neither its start nor the saves count. Redis's CPU
over the same span (saves included) is printed beside it. With ``--profile FILE``, py-spy (when
installed) samples the thread holding the GIL over the drain, as collapsed stacks.

usage: python bench/worker_cpu.py [--kind def|async] [--slots 16] [--n 20000]
       [--redis-server /usr/bin/redis-server] [--profile FILE]
"""

from __future__ import annotations

import argparse
import json
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

import psutil
import redis

from kue_core import Queue

WORKER = """
import sys, threading
from kue_core import Queue

queue = Queue(sys.argv[1], prefix="bench")
{kind} handler(job):
    return None

queue.process("bench", int(sys.argv[2]), handler)
print("ready", flush=True)
threading.Event().wait()
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _cpu(proc: psutil.Process) -> float:
    times = proc.cpu_times()
    return float(times.user + times.system)


def _started(server: str, workdir: str) -> tuple[subprocess.Popen[bytes], str]:
    port = _free_port()
    argv = [server, "--port", str(port), "--save", "", "--appendonly", "no", "--dir", workdir]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL)
    url = f"redis://127.0.0.1:{port}/0"
    deadline = time.monotonic() + 10
    while True:
        try:
            redis.Redis.from_url(url).ping()
            return proc, url
        except redis.ConnectionError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def measure(kind: str, slots: int, n: int, server: str, profile: str | None) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as workdir:
        server_proc, url = _started(server, workdir)
        source = WORKER.format(kind="async def" if kind == "async" else "def")
        worker = subprocess.Popen(
            [sys.executable, "-c", source, url, str(slots)], stdout=subprocess.PIPE, text=True
        )
        spy = None
        try:
            assert worker.stdout is not None and worker.stdout.readline().strip() == "ready"
            if profile and shutil.which("py-spy"):
                spy_argv = ["py-spy", "record", "--pid", str(worker.pid), "--gil", "--rate"]
                spy_argv += ["400", "--format", "raw", "-o", profile, "--nonblocking"]
                spy = subprocess.Popen(spy_argv, stdout=subprocess.DEVNULL)
            with Queue(url, prefix="bench") as queue:
                jobs = [queue.create_job("bench", {"i": i}) for i in range(n)]
                worker_ps, redis_ps = psutil.Process(worker.pid), psutil.Process(server_proc.pid)
                cpu0, redis0, began = _cpu(worker_ps), _cpu(redis_ps), time.monotonic()
                for start in range(0, n, 1000):
                    queue.save_many(jobs[start : start + 1000])
                while queue.count("complete") < n:
                    time.sleep(0.005)
                took = time.monotonic() - began
                cpu = _cpu(worker_ps) - cpu0
                redis_cpu = _cpu(redis_ps) - redis0
        finally:
            if spy is not None:
                spy.send_signal(signal.SIGINT)
                spy.wait(30)
            worker.kill()
            worker.wait()
            server_proc.kill()
            server_proc.wait()
    return {
        "jobs_per_s": round(n / took),
        "worker_cpu_us_per_job": round(cpu / n * 1e6, 1),
        "redis_cpu_us_per_job": round(redis_cpu / n * 1e6, 1),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--kind", choices=("def", "async"), default="def")
    ap.add_argument("--slots", type=int, default=16)
    ap.add_argument("--n", type=int, default=20_000)
    ap.add_argument("--redis-server", default=shutil.which("redis-server") or "redis-server")
    ap.add_argument("--profile", help="write py-spy's collapsed stacks of the drain here")
    args = ap.parse_args()
    figures = measure(args.kind, args.slots, args.n, args.redis_server, args.profile)
    print(json.dumps({"kind": args.kind, "slots": args.slots, "n": args.n, **figures}))


if __name__ == "__main__":
    main()
