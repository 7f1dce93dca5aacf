"""The API of a queue with payload limits (``KUE_MAX_DATA_BYTES``, ``KUE_PAYLOAD_STORE``,
docs/payloads.md): a job's data above the limit goes to the store and is shown whole; above the
limit without a store, or above ``KUE_MAX_PAYLOAD_BYTES``, ``POST /job`` answers 413 with both
numbers and writes nothing; a body above ``KUE_MAX_BODY`` says both numbers too; settings that
cannot be used stop the app."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import redis

from kue_core import payloads
from kue_http import ConfigError, create_app

BIG = {"title": "a big one", "rows": ["x" * 100] * 30}
SIZE = len(json.dumps(BIG, separators=(",", ":")))


def client_with(redis_url: str, prefix: str, **settings: Any) -> Any:
    return create_app({"KUE_REDIS_URL": redis_url, "KUE_PREFIX": prefix, **settings}).test_client()


def test_large_data_goes_to_the_store_and_is_shown_whole(
    redis_url: str, prefix: str, r: redis.Redis, tmp_path: Path
) -> None:
    client = client_with(
        redis_url, prefix, KUE_MAX_DATA_BYTES="1000", KUE_PAYLOAD_STORE=tmp_path.as_uri()
    )
    made = client.post("/api/job", json={"type": "report", "data": BIG})
    assert made.status_code == 200
    job_id = made.json["id"]
    ref = json.loads(str(r.hget(f"{prefix}:job:{job_id}", "data")))
    assert ref["bytes"] == SIZE and (tmp_path / ref[payloads.STORED]).is_file()
    assert client.get(f"/api/job/{job_id}").json["data"] == BIG
    page = client.get(f"/job/{job_id}")
    assert page.status_code == 200 and b"a big one" in page.data


def test_too_large_is_413_with_both_numbers(redis_url: str, prefix: str, r: redis.Redis) -> None:
    client = client_with(redis_url, prefix, KUE_MAX_DATA_BYTES="1000")  # no store
    refused = client.post("/api/job", json={"type": "report", "data": BIG})
    assert refused.status_code == 413
    assert refused.json["size"] == SIZE and refused.json["limit"] == 1000
    assert f"{SIZE:,} bytes" in refused.json["error"]
    many = client.post("/api/job", json=[{"type": "a"}, {"type": "report", "data": BIG}])
    assert many.status_code == 400 and "error" in many.json[1]  # Kue's array: one by one
    saved = [str(r.hget(k, "type")) for k in r.scan_iter(f"{prefix}:job:[0-9]*")]
    assert saved == ["a"] and many.json[0]["id"] > 0  # the valid one saved, alone
    body = client_with(redis_url, prefix, KUE_MAX_BODY=500)
    over = body.post("/api/job", json={"type": "report", "data": BIG})
    assert over.status_code == 413 and over.json["limit"] == 500
    assert over.json["size"] > 500 and "KUE_MAX_BODY" in over.json["error"]


@pytest.mark.parametrize(
    ("settings", "says"),
    [
        ({"KUE_MAX_DATA_BYTES": "lots"}, "number of bytes"),
        ({"KUE_PAYLOAD_STORE": "ftp://x/y"}, "file:///path or s3://"),
        ({"KUE_MAX_DATA_BYTES": "5000", "KUE_MAX_PAYLOAD_BYTES": "100"}, "above max_payload"),
    ],
)
def test_settings_that_cannot_be_used_stop_the_app(
    redis_url: str, prefix: str, settings: dict[str, str], says: str
) -> None:
    with pytest.raises(ConfigError, match=says):
        client_with(redis_url, prefix, **settings)
