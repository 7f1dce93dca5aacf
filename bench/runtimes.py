#!/usr/bin/env python
"""The worker beside BullMQ, interleaved: each round runs every system once, in an order
rotated every round, on the shared harness's Redis (``../shared/bench``, installed in
``--home``), and the medians of the rounds are printed as a table with ratios to BullMQ.

Systems: BullMQ (Node), and kue_core's worker with a ``def`` and with an ``async def``
handler; workloads: the drain with 1 and 16 slots in
one process (with the Redis CPU per job), enqueue-to-start latency, delayed-job lag, and the
drain by 4 processes of 16 slots (``kue worker --processes 4``, ``bench/bullmq_processes.js``).

usage: python bench/runtimes.py [--home /tmp/kue-bench] [--rounds 3] [--n 10000]
       [--systems bullmq,kue_core,kue_core_async]
       [--processes 4] [--out FILE]

Run it with the interpreter of the checkout to measure (its ``kue_core`` is imported by the
harness's drivers through ``PYTHONPATH``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
#: system -> (environment, handler kind) of kue_core's driver; BullMQ is apart.
KUE = {
    "kue_core": {},
    "kue_core_async": {"KUE_BENCH_HANDLER": "async"},
}
WORKLOADS = "w2_drain,w3_latency,w4_delayed"


def _env(system: str) -> dict[str, str]:
    """The environment of a kue_core system; ``kue_core@NAME=VALUE`` is a variant of it with
    one more variable, reported under that name (``kue_core@NAME=VALUE``)."""
    base, _, extra = system.partition("@")
    env = dict(KUE[base])
    if extra:
        name, _, value = extra.partition("=")
        env[name] = value
        env["KUE_BENCH_VARIANT"] = "@" + extra
    return env


def _run(argv: list[str], env: dict[str, str], home: str, out: str, round_: int) -> None:
    full = {**os.environ, **env, "BENCH_OUT": out, "BENCH_ROUND": str(round_)}
    full["PYTHONPATH"] = ROOT
    subprocess.run(argv, cwd=home, env=full, check=False, stdout=subprocess.DEVNULL)


def _flush(home: str) -> None:
    code = "import common; common.flushall('redis://127.0.0.1:6392/0')"
    subprocess.run([os.path.join(home, "venv_base/bin/python"), "-c", code], cwd=home, check=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--home", default="/tmp/kue-bench")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--n", type=int, default=10_000)
    ap.add_argument("--systems", default=",".join(["bullmq", *KUE]))
    ap.add_argument("--processes", type=int, default=4, help="0: no drain by several processes")
    ap.add_argument("--workloads", default=WORKLOADS, help=f"of one process (default {WORKLOADS})")
    ap.add_argument("--out", help="the JSON lines (default: a temporary file)")
    args = ap.parse_args()
    home, systems = args.home, args.systems.split(",")
    out = args.out or tempfile.mktemp(suffix=".jsonl")
    # The project's driver, next to the harness's common.py it imports.
    subprocess.run(["cp", os.path.join(HERE, "bench_kue_core.py"), home], check=True)
    subprocess.run(["./redis_ctl.sh", "start"], cwd=home, check=True, stdout=subprocess.DEVNULL)
    try:
        for r in range(1, args.rounds + 1):
            turn = systems[r % len(systems) :] + systems[: r % len(systems)]
            for system in turn:
                common = ["--n", str(args.n), "--min-seconds", "2"]
                if system == "bullmq":
                    argv = ["node", "bench_bullmq.js", "--workloads", args.workloads, *common]
                    env: dict[str, str] = {}
                else:
                    py = os.path.join(home, "venv_kue_core/bin/python")
                    argv = [py, "bench_kue_core.py", "--workloads", args.workloads, *common]
                    env = _env(system)
                print(f"round {r}: {system}", file=sys.stderr, flush=True)
                _flush(home)
                _run(argv, env, home, out, r)
                if not args.processes:
                    continue
                p = str(args.processes)
                _flush(home)
                many = ["--workloads", "w2_drain", "--conc", "16", "--n", str(args.n)]
                if system == "bullmq":
                    js = os.path.join(HERE, "bullmq_processes.js")
                    _run(["node", js, *many], {"BULLMQ_PROCESSES": p}, home, out, r)
                else:
                    py = os.path.join(home, "venv_kue_core/bin/python")
                    env = {**_env(system), "KUE_BENCH_PROCESSES": p}
                    _run([py, "bench_kue_core.py", *many], env, home, out, r)
    finally:
        subprocess.run(["./redis_ctl.sh", "stop"], cwd=home, check=False, stdout=subprocess.DEVNULL)
    summarize(out)


def summarize(path: str) -> None:
    rows: dict[tuple[str, str], dict[str, list[float]]] = {}
    with open(path) as f:
        for line in f:
            rec = json.loads(line)
            system, at, variant = rec["system"].partition("@")
            many = system.rsplit("_p", 1)
            base = many[0] if len(many) == 2 and many[1].isdigit() else system
            workload = rec["workload"] + (f" ({many[1]} processes)" if base != system else "")
            base += at + variant
            base = "bullmq" if base.startswith("bullmq") else base
            figures = rows.setdefault((workload, base), {})
            for name in ("jobs_per_s", "p50_ms", "p99_ms", "redis_cpu_us_per_job"):
                if rec.get(name) is not None:
                    figures.setdefault(name, []).append(float(rec[name]))
    workloads = sorted({w for w, _ in rows})
    systems = sorted({s for _, s in rows}, key=lambda s: (s != "bullmq", s))
    print("| workload | figure | " + " | ".join(systems) + " |")
    print("|---|---|" + "---:|" * len(systems))
    for w in workloads:
        names = sorted({n for (ww, _), fig in rows.items() if ww == w for n in fig})
        for name in names:
            med = {
                s: statistics.median(rows[w, s][name])
                for s in systems
                if name in rows.get((w, s), {})
            }
            base = med.get("bullmq")
            cells = []
            for s in systems:
                if s not in med:
                    cells.append("")
                    continue
                times = "\N{MULTIPLICATION SIGN}"
                ratio = f" ({med[s] / base:.2f}{times})" if base and s != "bullmq" else ""
                cells.append(f"{med[s]:,.1f}{ratio}" if med[s] < 100 else f"{med[s]:,.0f}{ratio}")
            print(f"| {w} | {name} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--summarize":
        summarize(sys.argv[2])
    else:
        main()
