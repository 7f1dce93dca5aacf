"""The API of a queue with encryption keys (``KUE_ENCRYPTION_KEYS``, docs/security.md): jobs
it creates are stored encrypted, jobs are shown decrypted, one under a key the server lacks is
shown as stored with ``unopened`` naming the key, and bad keys stop the app at start-up."""

from __future__ import annotations

import base64

import pytest
import redis

from kue_core import Queue, sealing
from kue_http import ConfigError, create_app
from tests.http.streams import listening

# Fixed keys: the parameters of a test must be the same in every xdist worker.
K1 = f"k1:{base64.b64encode(bytes(range(32))).decode()}"
K2 = f"k2:{base64.b64encode(bytes(range(32, 64))).decode()}"


def app_with(redis_url: str, prefix: str, keys: str) -> object:
    return create_app(
        {"KUE_REDIS_URL": redis_url, "KUE_PREFIX": prefix, "KUE_ENCRYPTION_KEYS": keys}
    )


def test_created_sealed_and_shown_in_clear(redis_url: str, prefix: str, r: redis.Redis) -> None:
    client = app_with(redis_url, prefix, K1).test_client()  # type: ignore[attr-defined]
    made = client.post("/api/job", json={"type": "email", "data": {"to": "ada@example.com"}})
    assert made.status_code == 200
    job_id = made.json["id"]
    stored = r.hget(f"{prefix}:job:{job_id}", "data")
    assert isinstance(stored, str) and sealing.key_id_of(stored) == "k1"
    assert "ada@example.com" not in stored
    shown = client.get(f"/api/job/{job_id}").json
    assert shown["data"] == {"to": "ada@example.com"} and "unopened" not in shown
    edited = client.put(f"/api/job/{job_id}/data", json={"to": "bob@example.com"})
    assert edited.status_code == 200
    assert r.xlen(f"{prefix}:audit") >= 2  # both writes are in the audit log, and no payload:
    for key in r.scan_iter(f"{prefix}:*"):
        dumped = r.dump(key) or b""
        assert b"ada@example.com" not in dumped and b"bob@example.com" not in dumped, key


def test_a_job_under_a_key_the_server_lacks(redis_url: str, prefix: str) -> None:
    with Queue(redis_url, prefix=prefix, encryption_keys=K1) as q:
        job = q.create_job("email", {"to": "ada@example.com"}).save()
    client = app_with(redis_url, prefix, K2).test_client()  # type: ignore[attr-defined]
    shown = client.get(f"/api/job/{job.id}").json
    assert shown["unopened"] == {"key": "k1", "missing": True}
    assert list(shown["data"]) == [sealing.SEALED]
    page = client.get(f"/job/{job.id}")
    assert page.status_code == 200 and b"ada@example.com" not in page.data


@pytest.mark.parametrize("keys", ["k1", "k1:short", f"{K1},{K1}"])
def test_bad_keys_stop_the_app_without_showing_them(redis_url: str, prefix: str, keys: str) -> None:
    with pytest.raises(ConfigError) as e:
        app_with(redis_url, prefix, keys)
    assert "KUE_ENCRYPTION_KEYS" in str(e.value) and K1.split(":")[1] not in str(e.value)


def test_the_event_stream_opens_what_the_queue_sealed(redis_url: str, prefix: str) -> None:
    """On Redis's channel a sealed result; on the stream, the result the job page shows (and
    left sealed by a server without the key)."""
    streams = {
        "with": (app_with(redis_url, prefix, K1), "/api/events", {}),
        "without": (app_with(redis_url, prefix, K2), "/api/events", {}),
    }
    with (
        Queue(redis_url, prefix=prefix, encryption_keys=K1) as q,
        listening(streams) as seen,  # type: ignore[arg-type]
    ):
        q.process("signup", 1, lambda job: {"sent": job.data["to"]})  # seals its result
        q.create_job("signup", {"to": "ada@example.com"}).save()
    ended = {n: next(e for e in events if e["event"] == "complete") for n, events in seen.items()}
    assert ended["with"]["args"] == ["complete", {"sent": "ada@example.com"}]
    assert list(ended["without"]["args"][1]) == [sealing.SEALED]
