"""``kue doctor`` and the payload store (kue_core/doctor/payloads.py), and a save killed
part-way: a value no job holds is an orphan, deleted by repair; a job whose value the store
lost is reported for a person to look at; a producer SIGKILLed between writing a value and
saving its job leaves nothing the doctor cannot put right, and every job it saved reads whole."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import redis

from kue_core import Queue, doctor, payloads

from ..conftest import wait_for

LIMIT = 500
BIG = {"rows": ["x" * 100] * 10}


def kinds(report: doctor.Report) -> list[str]:
    return sorted(f.kind for f in report.findings)


def test_orphans_both_ways(redis_url: str, prefix: str, r: redis.Redis, tmp_path: Path) -> None:
    options = {"max_data_bytes": LIMIT, "payload_store": tmp_path.as_uri()}
    with Queue(redis_url, prefix=prefix, **options) as q:  # type: ignore[arg-type]
        kept = q.create_job("a", BIG).save()
        lost = q.create_job("a", BIG).save()
        assert doctor.check(q, grace_ms=0).healthy
        name = json.loads(str(r.hget(f"{prefix}:job:{lost.id}", "data")))[payloads.STORED]
        (tmp_path / name).unlink()  # the store lost it
        stray = tmp_path / prefix / "data" / "0123abcd"
        stray.write_text("{}")  # no job holds it
        report = doctor.check(q, grace_ms=0)
        assert kinds(report) == ["missing-payload", "orphan-payload"]
        assert doctor.check(q).findings == [f for f in report.findings if f.job_id]  # grace
        outcomes = doctor.repair(q, report.findings)
        assert sorted(o.status for o in outcomes) == ["manual", "repaired"]
        assert not stray.exists()
        assert kinds(doctor.check(q, grace_ms=0)) == ["missing-payload"]
        assert q.get_job(kept.id).data == BIG
        q.remove(lost.id)  # what a person does
        assert q.sweep_payloads() == 1
        assert doctor.check(q, grace_ms=0).healthy
    with Queue(redis_url, prefix=prefix) as blind:  # given no store: says so
        assert kinds(doctor.check(blind, grace_ms=0)) == ["payload-store"]


PRODUCER = """
import os, sys, time
from kue_core import Queue
from kue_core.payloads import FileStore

class Stalling(FileStore):
    def put(self, name, value):
        super().put(name, value)
        self.puts = getattr(self, "puts", 0) + 1
        if self.puts == 5:  # the fifth value is written: its job is not saved yet
            open(sys.argv[2], "w").close()
            time.sleep(600)

q = Queue(os.environ["KUE_REDIS_URL"], prefix=os.environ["KUE_PREFIX"],
          max_data_bytes=500, payload_store=Stalling(sys.argv[1]))
while True:
    q.create_job("big", {"rows": ["x" * 100] * 10}).save()
"""


def test_a_save_killed_between_the_store_and_redis(
    redis_url: str, prefix: str, r: redis.Redis, tmp_path: Path
) -> None:
    store = tmp_path / "store"
    store.mkdir()
    script = tmp_path / "producer.py"
    script.write_text(textwrap.dedent(PRODUCER))
    marker = tmp_path / "stalled"
    env = {**os.environ, "KUE_REDIS_URL": redis_url, "KUE_PREFIX": prefix}
    proc = subprocess.Popen([sys.executable, str(script), str(store), str(marker)], env=env)
    try:
        wait_for(marker.exists, timeout=30)
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    finally:
        proc.kill()
    with Queue(redis_url, prefix=prefix, max_data_bytes=LIMIT, payload_store=store.as_uri()) as q:
        ids = [int(str(k).rsplit(":", 1)[1]) for k in r.scan_iter(f"{prefix}:job:[0-9]*")]
        assert len(ids) == 4  # saved before the kill
        assert all(q.get_job(i).data == BIG for i in ids)
        report = doctor.check(q, grace_ms=0)
        assert kinds(report) == ["orphan-payload"]  # the fifth value, no job holds it
        assert [o.status for o in doctor.repair(q, report.findings)] == ["repaired"]
        assert doctor.check(q, grace_ms=0).healthy
        assert len([p for p in store.rglob("*") if p.is_file()]) == 4
