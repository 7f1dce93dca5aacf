"""kue_rules.fetch against a real local web service: retries of what may pass, none of what
cannot, and a stop between tries."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from kue_rules.fetch import FetchFailed, Stopping, get_json
from tests.rules.helpers import WebService

pytestmark = pytest.mark.timeout(30)


@pytest.fixture
def service() -> Iterator[WebService]:
    s = WebService()
    yield s
    s.close()


def url(service: WebService, pid: str) -> str:
    return f"http://{service.host}/products/{pid}/direct-children"


def test_an_answer_is_its_json(service: WebService) -> None:
    service.children["a"] = [{"processId": 1, "productId": "b"}]
    got = get_json(url(service, "a"), 5, 3, 10, threading.Event())
    assert got == [{"processId": 1, "productId": "b"}]
    assert service.requests == {"a": 1}


def test_a_5xx_is_tried_again_then_fails_with_the_count(service: WebService) -> None:
    service.status = 503
    with pytest.raises(FetchFailed, match=r"GET http://.*/a/direct-children: 503 .*\(3 tries\)"):
        get_json(url(service, "a"), 5, 2, 10, threading.Event())
    assert service.requests == {"a": 3}


def test_a_404_is_final_at_once(service: WebService) -> None:
    with pytest.raises(FetchFailed, match="404"):
        get_json(f"http://{service.host}/nothing/here", 5, 5, 10, threading.Event())
    with pytest.raises(FetchFailed, match="not an http"):
        get_json("ftp://example.org/x", 5, 5, 10, threading.Event())


def test_a_stop_between_tries_raises_stopping(service: WebService) -> None:
    service.status = 500
    stop = threading.Event()
    stop.set()
    with pytest.raises(Stopping):
        get_json(url(service, "a"), 5, 5, 60_000, stop)
    assert service.requests == {"a": 1}  # no second try, no minute's wait


def test_a_refused_connection_is_retried(service: WebService) -> None:
    host = service.host
    service.close()  # nothing listens there now
    with pytest.raises(FetchFailed, match=r"\(2 tries\)"):
        get_json(f"http://{host}/products/a/direct-children", 2, 1, 10, threading.Event())
