#!/usr/bin/env python
"""kue_core driver for the shared benchmark harness (../shared/bench, see its README).

Producer side: ``queue.create_job(type, data).save()`` (W1, one round trip per job) and
``queue.save_many(jobs)`` (W1 bulk, one round trip per chunk of 1000). Worker side:
``queue.process(type, c, handler)`` (W2 drain, W3 latency, W4 delayed jobs); a busy slot makes
one round trip per job (complete and claim the next in one script).

``KUE_BENCH_PROCESSES=P`` (P > 1) runs the worker side as ``kue worker --processes P`` instead,
reported as system ``kue_core_pP``: P processes, each with ``--conc`` slots.
``KUE_BENCH_HANDLER=async`` gives the workers an ``async def`` handler (``_async`` in the
system's name).
"""

import os
import signal
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common

from kue_core import Queue

TYPE = "bench"
PROCESSES = int(os.environ.get("KUE_BENCH_PROCESSES", "1"))
ASYNC = os.environ.get("KUE_BENCH_HANDLER", "def") == "async"
HERE = os.path.dirname(os.path.abspath(__file__))


def handler(job):
    common.record(job.data["t"])


async def async_handler(job):
    common.record(job.data["t"])


class KueCoreAdapter(common.Adapter):
    system = (
        "kue_core"
        + ("_async" if ASYNC else "")
        + (f"_p{PROCESSES}" if PROCESSES > 1 else "")
        + os.environ.get("KUE_BENCH_VARIANT", "")
    )

    def conc_model(self, conc):
        if PROCESSES > 1:
            return f"kue worker -n {conc} --processes {PROCESSES}"
        return f"queue.process(type, {conc}, handler) in 1 process"

    def worker_argv(self, conc, delayed=False):
        if PROCESSES == 1:
            return super().worker_argv(conc, delayed)
        kue = os.path.join(os.path.dirname(sys.executable), "kue")
        # The handler is this module's, imported by the worker processes from this directory.
        os.chdir(HERE)
        fn = "async_handler" if ASYNC else "handler"
        argv = [kue, "worker", f"bench_kue_core:{fn}", "--type", TYPE]
        argv += ["--concurrency", str(conc), "--processes", str(PROCESSES)]
        return [*argv, "--redis", self.args.redis]

    def setup(self, args):
        super().setup(args)
        self.queue = Queue(args.redis)

    def teardown(self):
        self.queue.close()

    def enqueue(self, i, t):
        self.queue.create_job(TYPE, {"i": i, "t": t}).save()

    def enqueue_bulk(self, items):
        create = self.queue.create_job
        self.queue.save_many([create(TYPE, {"i": i, "t": t}) for i, t in items])

    def enqueue_delayed(self, i, due, delay_s):
        self.queue.create_job(TYPE, {"i": i, "t": due}).delay(int(delay_s * 1000)).save()

    def run_worker(self, conc, delayed):
        stop = threading.Event()
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
        signal.signal(signal.SIGINT, lambda *_: stop.set())
        self.queue.process(TYPE, conc, async_handler if ASYNC else handler)
        stop.wait()
        self.queue.shutdown(timeout=5)


if __name__ == "__main__":
    common.main(KueCoreAdapter)
