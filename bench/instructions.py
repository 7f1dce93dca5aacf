#!/usr/bin/env python
"""Redis's instructions per job, counted by valgrind's callgrind: a figure that does not move
with the machine's load, unlike CPU time (this machine's varies by 2x from one hour to the
next), for an A/B of a change to the scripts, and beside BullMQ.

A redis-server is started under ``valgrind --tool=callgrind`` on a free port (about 50x
slower than usual: keep N in the thousands). For each measurement the counters are zeroed
when the jobs are waiting and dumped once the last one is done, so the figure is Redis's
user-space work for the phase alone (system calls, the kernel's share, are not counted).
Phases: ``enqueue`` (``save()`` one by one) and ``drain`` at each concurrency (jobs saved in
bulk first, then one worker process drains them: its keeper's sweeps are counted too).

usage: python bench/instructions.py [--redis-server /usr/bin/redis-server] [--n 2000]
       [--conc 1,16] [--bullmq /tmp/kue-bench] [--save-many 1,4,16,96] [--keep DIR]

``--keep DIR`` keeps callgrind's files in DIR (one per phase, named in its row as
``callgrind``), to be read with ``callgrind_annotate --inclusive=yes FILE``: where a phase's
instructions go, by function.

``--save-many K,...`` also counts ``save_many`` in calls of K jobs, with nobody listening to
the events and then with a subscriber (a call sends its first ``EVENTS_UNASKED`` events, then
asks whether anyone listens: see ``publish`` in ``kue_core/scripts/lib/events.lua``).

``--bullmq DIR`` also runs ``bench/bullmq_instructions.js`` with the BullMQ installed in
``DIR/node_bullmq`` (the shared harness's setup.sh puts it in /tmp/kue-bench). Prints one JSON
line per system and phase: instructions and Redis commands per job.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable

import redis

from kue_core import Job, Queue

HERE = os.path.dirname(os.path.abspath(__file__))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Callgrind:
    """A redis-server under callgrind, whose counters are zeroed and dumped on demand."""

    def __init__(self, server: str, workdir: str, keep: bool = False) -> None:
        self.port = _free_port()
        self.workdir = workdir
        self.last = ""  # the file of the last dump
        self.keep = keep  # the files are kept: rows name theirs
        out = os.path.join(workdir, "callgrind.out.%p")
        argv = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", server]
        argv += ["--port", str(self.port), "--save", "", "--appendonly", "no"]
        self.proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.client = redis.Redis(port=self.port)
        deadline = time.monotonic() + 60
        while True:
            try:
                self.client.ping()
                break
            except redis.ConnectionError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    def zero(self) -> None:
        subprocess.run(
            ["callgrind_control", "-z", str(self.proc.pid)], check=True, capture_output=True
        )

    def dumped(self) -> int:
        """Dump the counters; the instructions since the last zero."""
        before = set(glob.glob(os.path.join(self.workdir, f"callgrind.out.{self.proc.pid}.*")))
        subprocess.run(
            ["callgrind_control", "-d", str(self.proc.pid)], check=True, capture_output=True
        )
        (new,) = (
            set(glob.glob(os.path.join(self.workdir, f"callgrind.out.{self.proc.pid}.*"))) - before
        )
        self.last = new
        with open(new) as f:
            for line in f:
                if line.startswith(("summary:", "totals:")):
                    return int(line.split()[1])
        raise RuntimeError(f"no totals in {new}")

    def commands(self) -> int:
        stats = self.client.info("commandstats")
        return sum(int(v["calls"]) for v in stats.values())

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=60)


def _phase(cg: Callgrind, n: int, run: Callable[[], None]) -> dict[str, float | str]:
    cg.zero()
    before = cg.commands()
    run()
    commands = cg.commands() - before
    row: dict[str, float | str] = {
        "instructions_per_job": round(cg.dumped() / n),
        "commands_per_job": commands / n,
    }
    if cg.keep:
        row["callgrind"] = cg.last
    return row


def _job(q: Queue, i: int) -> Job:
    return q.create_job("bench", {"i": i, "t": 1795474947.069})


def _drain(cg: Callgrind, url: str, n: int, conc: int) -> dict[str, float | str]:
    """Save ``n`` jobs in bulk, then count a worker process draining them with ``conc``
    slots."""
    q = Queue(url, prefix="bench")
    q.client.flushall()
    for start in range(0, n, 500):
        q.save_many([_job(q, i) for i in range(start, min(n, start + 500))])
    left, done, lock = [n], threading.Event(), threading.Lock()

    def handler(_: Job) -> None:
        with lock:
            left[0] -= 1
            if left[0] == 0:
                done.set()

    def drain() -> None:
        q.process("bench", conc, handler)
        done.wait(3600)
        while q.count("complete", "bench") < n:  # the last reports
            time.sleep(0.01)

    try:
        return _phase(cg, n, drain)
    finally:
        q.shutdown()
        q.close()


def _kue(cg: Callgrind, n: int, concs: list[int]) -> None:
    url = f"redis://127.0.0.1:{cg.port}"
    # Every script the phases use loaded (compiled), outside the count: a drain at each
    # concurrency, as the loop runtime's batches (claim_batch, complete_batch) come only with
    # several slots (a FUNCTION LOAD costs Redis about 10 million instructions).
    for conc in sorted({2, *concs}):
        _drain(cg, url, 4 * conc + 20, conc)
    q = Queue(url, prefix="bench")
    q.client.flushall()

    def enqueue() -> None:
        for i in range(n):
            _job(q, i).save()

    print(json.dumps({"system": "kue_core", "phase": "enqueue", **_phase(cg, n, enqueue)}))
    q.close()
    for conc in concs:
        figures = _drain(cg, url, n, conc)
        print(json.dumps({"system": "kue_core", "phase": f"drain_c{conc}", **figures}))


def _save_many(cg: Callgrind, n: int, sizes: list[int]) -> None:
    """Instructions per job of ``save_many`` in calls of each size, without and with a
    subscriber to the events."""
    q = Queue(f"redis://127.0.0.1:{cg.port}", prefix="bench")
    q.save_many([_job(q, i) for i in range(8)])  # the script loaded, outside the count
    for listening in (False, True):
        pubsub = q.client.pubsub()  # type: ignore[no-untyped-call]
        if listening:
            pubsub.subscribe(q.keys.events)
            pubsub.get_message(timeout=5)  # the subscription's confirmation
        for k in sizes:
            q.client.flushall()

            def save(k: int = k) -> None:
                for start in range(0, n, k):
                    q.save_many([_job(q, i) for i in range(start, min(n, start + k))])

            row = {"system": "kue_core", "phase": f"save_many_{k}", "listening": listening}
            print(json.dumps({**row, **_phase(cg, n, save)}))
        pubsub.close()
    q.close()


def _bullmq(cg: Callgrind, n: int, concs: list[int], home: str) -> None:
    script = os.path.join(HERE, "bullmq_instructions.js")
    for phase in ["enqueue", *(f"drain_c{c}" for c in concs)]:
        argv = ["node", script, home, str(cg.port), str(cg.proc.pid), str(n), phase]
        done = subprocess.run(argv, check=True, capture_output=True, text=True)
        commands = float(done.stdout.split()[-1])
        row: dict[str, float | str] = {
            "instructions_per_job": round(cg.dumped() / n),
            "commands_per_job": commands,
        }
        if cg.keep:
            row["callgrind"] = cg.last
        print(json.dumps({"system": "bullmq", "phase": phase, **row}))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--redis-server", default=shutil.which("redis-server") or "redis-server")
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--conc", default="1,16")
    ap.add_argument("--bullmq", help="the shared harness's directory (its node_bullmq)")
    ap.add_argument("--save-many", help="also save_many in calls of these sizes: 1,4,16,96")
    ap.add_argument("--keep", help="keep callgrind's files in this directory")
    args = ap.parse_args()
    concs = [int(c) for c in args.conc.split(",") if c]  # "": no drain
    if args.keep:
        os.makedirs(args.keep, exist_ok=True)
    with tempfile.TemporaryDirectory() as scratch:
        cg = Callgrind(args.redis_server, os.path.abspath(args.keep or scratch), bool(args.keep))
        try:
            _kue(cg, args.n, concs)
            if args.save_many:
                _save_many(cg, args.n, [int(k) for k in args.save_many.split(",")])
            if args.bullmq:
                _bullmq(cg, args.n, concs, args.bullmq)
        finally:
            cg.close()


if __name__ == "__main__":
    main()
