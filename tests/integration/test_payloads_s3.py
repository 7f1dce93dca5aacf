"""The payload store in S3 (``s3://bucket/prefix``, kue_core/base/s3_payloads.py), against
moto's S3 in server mode: a real HTTP server this module starts, reached through boto3 as a
deployment would reach MinIO or AWS (``AWS_ENDPOINT_URL``). A large value is an object under
the prefix; a worker reads it whole and writes its large result there; a removed job's objects
are deleted by the worker's sweep; ``kue doctor`` finds an object no job holds, and its repair
deletes it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import urllib.request
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
import redis

from kue_core import Queue, doctor, payloads
from kue_core.aio import AsyncQueue

from ..clients import Loop
from ..conftest import free_port, wait_for

#: The store is the same whatever the Redis: one server is enough.
pytestmark = pytest.mark.single_node

BUCKET = "kue-jobs"
BIG = {"rows": ["x" * 100] * 30}


@pytest.fixture(scope="module")
def s3_endpoint() -> Iterator[str]:
    """moto's S3 server, in a process of its own, for the module."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"

    def up() -> bool:
        try:
            with urllib.request.urlopen(url + "/moto-api/", timeout=1):
                return True
        except OSError:
            return False

    try:
        wait_for(up, timeout=30)
        yield url
    finally:
        proc.kill()
        proc.wait(10)


@pytest.fixture
def s3(s3_endpoint: str, monkeypatch: pytest.MonkeyPatch, prefix: str) -> Any:
    """boto3's S3 client on the server, the environment set as a deployment sets it, and a
    bucket of its own."""
    for name, value in (
        ("AWS_ENDPOINT_URL", s3_endpoint),
        ("AWS_ACCESS_KEY_ID", "testing"),
        ("AWS_SECRET_ACCESS_KEY", "testing"),
        ("AWS_DEFAULT_REGION", "us-east-1"),
    ):
        monkeypatch.setenv(name, value)
    client = boto3.client("s3")
    client.create_bucket(Bucket=BUCKET)
    return client


def objects(s3: Any, under: str) -> list[str]:
    found = s3.list_objects_v2(Bucket=BUCKET, Prefix=under)
    return sorted(item["Key"] for item in found.get("Contents", ()))


@pytest.mark.parametrize("kind", ["def", "async"])
def test_values_go_to_s3_and_come_back(
    kind: str, s3: Any, redis_url: str, prefix: str, r: redis.Redis
) -> None:
    store = f"s3://{BUCKET}/kue"
    with Queue(redis_url, prefix=prefix, max_data_bytes=1000, payload_store=store) as q:
        job = q.create_job("report", BIG).save()
        name = json.loads(str(r.hget(f"{prefix}:job:{job.id}", "data")))[payloads.STORED]
        assert objects(s3, f"kue/{prefix}/") == [f"kue/{name}"]
        body = s3.get_object(Bucket=BUCKET, Key=f"kue/{name}")["Body"].read()
        assert json.loads(body) == BIG
        seen: list[Any] = []

        def handler(job: Any) -> Any:
            seen.append(job.data)
            return {"report": "y" * 2000}

        async def ahandler(job: Any) -> Any:
            return handler(job)

        q.process("report", 1, handler if kind == "def" else ahandler)
        assert job.wait(30) == {"report": "y" * 2000}
        assert seen == [BIG]
        assert len(objects(s3, f"kue/{prefix}/result/")) == 1
        q.remove(job.id)
        wait_for(lambda: objects(s3, f"kue/{prefix}/") == [], timeout=20)  # the worker's sweep


def test_the_doctor_finds_an_object_no_job_holds(s3: Any, redis_url: str, prefix: str) -> None:
    store = f"s3://{BUCKET}/kue"
    with Queue(redis_url, prefix=prefix, max_data_bytes=1000, payload_store=store) as q:
        kept = q.create_job("a", BIG).save()
        s3.put_object(Bucket=BUCKET, Key=f"kue/{prefix}/data/0123abcd", Body=b"{}")
        report = doctor.check(q, grace_ms=0)
        assert [f.kind for f in report.findings] == ["orphan-payload"]
        assert [o.status for o in doctor.repair(q, report.findings)] == ["repaired"]
        assert doctor.check(q, grace_ms=0).healthy
        assert q.get_job(kept.id).data == BIG
        assert len(objects(s3, f"kue/{prefix}/")) == 1


def test_without_boto3_the_error_says_what_to_install(
    redis_url: str, prefix: str, tmp_path: Any
) -> None:
    """A process whose Python has no boto3 (run with the module hidden)."""
    code = (
        "import sys; sys.modules['boto3'] = None\n"
        "from kue_core import Queue, InvalidJob\n"
        "try:\n"
        f"    Queue({redis_url!r}, prefix={prefix!r}, payload_store='s3://b/p')\n"
        "except InvalidJob as e:\n"
        "    print(e)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": os.getcwd()},
    )
    assert "pip install 'kue[s3]'" in out.stdout, out.stderr


def test_the_asyncio_client_reads_s3_off_its_loop(s3: Any, redis_url: str, prefix: str) -> None:
    """An ``AsyncQueue`` with an S3 store reads its jobs' stored values in threads, once the
    operation that read the jobs is done: the loop's thread makes no request to the store."""
    store = f"s3://{BUCKET}/kue"

    async def scenario() -> tuple[list[Any], str, set[str]]:
        threads: set[str] = set()
        async with AsyncQueue(
            redis_url, prefix=prefix, max_data_bytes=1000, payload_store=store
        ) as aq:
            assert aq.offload is not None
            real_get = aq.offload.store.get

            def watched_get(name: str) -> bytes:
                threads.add(threading.current_thread().name)
                return real_get(name)

            aq.offload.store.get = watched_get  # type: ignore[method-assign]  # a spy: S3 is real
            job = await aq.create_job("report", BIG).save()
            read = await aq.get_job(job.id)
            listed = await aq.range_by_type("report", "inactive", 0, -1)
            return [read.data, *(j.data for j in listed)], threading.current_thread().name, threads

    loop = Loop()  # a loop of its own thread (a test process may run another: Playwright's)
    try:
        seen, loop_thread, readers = loop.run(scenario())
    finally:
        loop.close()
    assert seen == [BIG, BIG]
    assert readers and loop_thread not in readers


def test_a_value_s3_refused_to_delete_goes_back_to_the_trash(
    s3: Any, redis_url: str, prefix: str, r: redis.Redis
) -> None:
    """DeleteObjects answers a key it could not delete in its reply (``Errors``), without
    raising: the sweep puts the names back in the trash rather than lose them. The refusal is
    injected into the real server's reply (S3 refuses so under a bucket policy or an object
    lock, which moto does not enforce)."""
    store = f"s3://{BUCKET}/kue"
    with Queue(redis_url, prefix=prefix, max_data_bytes=1000, payload_store=store) as q:
        job = q.create_job("report", BIG).save()
        q.remove(job.id)  # type: ignore[arg-type]
        trash = f"{prefix}:payloads:trash"
        assert r.llen(trash) == 1
        client = q.offload.store._s3  # type: ignore[union-attr]

        def refuse(parsed: dict[str, Any], **_: Any) -> None:
            parsed["Errors"] = [{"Key": "kue/x", "Code": "AccessDenied", "Message": "denied"}]

        client.meta.events.register("after-call.s3.DeleteObjects", refuse)
        with pytest.raises(OSError, match="AccessDenied"):
            q.sweep_payloads()
        assert r.llen(trash) == 1  # back, to be deleted again
        client.meta.events.unregister("after-call.s3.DeleteObjects", refuse)
        assert q.sweep_payloads() == 1 and r.llen(trash) == 0
        assert objects(s3, f"kue/{prefix}/") == []
