"""The Django recipe (kue_example/django_shop): a job saved when its transaction commits and
never for one rolled back, the view that places orders, and ``django-admin kue_worker`` in a
process of its own confirming them through the ORM."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kue_core import InvalidJob, Queue
from tests.conftest import on_cluster, wait_for

pytest.importorskip("django")

ROOT = Path(__file__).resolve().parents[2]
SETTINGS = "kue_example.django_shop.settings"


@pytest.fixture(scope="module")
def site(redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """Django set up once for this module (it can be, once per process), on a database of its
    own and a queue prefix of its own; the environment a worker process needs too."""
    prefix = "dj" + uuid.uuid4().hex[:10]
    if on_cluster(redis_url):
        prefix = "{" + prefix + "}"
    env = {
        "DJANGO_SETTINGS_MODULE": SETTINGS,
        "DJANGO_SECRET_KEY": "the tests' key",
        # Django refuses database calls in a thread that runs an event loop; in the full suite
        # the browser tests' Playwright keeps one running in the main thread (not ours: no
        # coroutine of this module runs there), which Django's documented switch allows.
        "DJANGO_ALLOW_ASYNC_UNSAFE": "1",
        "SHOP_DB": str(tmp_path_factory.mktemp("shop") / "shop.sqlite3"),
        "KUE_REDIS_URL": redis_url,
        "KUE_PREFIX": prefix,
    }
    saved = {name: os.environ.get(name) for name in env}
    os.environ.update(env)
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)
    yield env
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


@pytest.fixture
def shop_queue(site: dict[str, str], redis_url: str) -> Iterator[Queue]:
    queue = Queue(redis_url, prefix=site["KUE_PREFIX"])
    queue.remove_all("inactive")
    yield queue
    queue.close()


def test_the_job_is_saved_when_the_transaction_commits(shop_queue: Queue) -> None:
    from django.db import transaction

    from kue_example.django_shop.jobs import enqueue_on_commit

    with transaction.atomic():
        enqueue_on_commit("confirm order", {"order": 1}, priority="high")
        assert shop_queue.count("inactive", "confirm order") == 0  # not before the commit
    (job,) = shop_queue.range_by_type("confirm order", "inactive", 0, -1)
    assert job.data == {"order": 1} and job.priority() == -10


def test_no_job_for_a_transaction_rolled_back(shop_queue: Queue) -> None:
    from django.db import transaction

    from kue_example.django_shop.models import Order
    from kue_example.django_shop.orders import place_order

    before = Order.objects.count()
    with pytest.raises(RuntimeError), transaction.atomic():
        place_order("ada@example.com")
        raise RuntimeError("the payment failed")
    assert Order.objects.count() == before
    assert shop_queue.count("inactive", "confirm order") == 0


def test_a_bad_job_fails_the_request_not_the_commit(shop_queue: Queue) -> None:
    from django.db import transaction

    from kue_example.django_shop.jobs import enqueue_on_commit

    with pytest.raises(InvalidJob, match="data"), transaction.atomic():
        enqueue_on_commit("confirm order", {"at": object()})
    assert shop_queue.count("inactive") == 0


def test_the_view_places_an_order_and_a_worker_process_confirms_it(
    site: dict[str, str], shop_queue: Queue
) -> None:
    from django.test import Client

    from kue_example.django_shop.models import Order

    web = Client(enforce_csrf_checks=True)  # as a browser's: JSON is what lets it through
    assert web.post("/orders", {"email": "ada@example.com"}).status_code == 415  # a form
    assert web.post("/orders", "not json", content_type="application/json").status_code == 400
    bad = web.post("/orders", {"email": "nope"}, content_type="application/json")
    assert bad.status_code == 400
    assert web.get("/orders").status_code == 405
    made = web.post("/orders", {"email": "ada@example.com"}, content_type="application/json")
    assert made.status_code == 201
    order_id = made.json()["id"]
    (job,) = shop_queue.range_by_type("confirm order", "inactive", 0, -1)
    assert job.data == {"order": order_id} and job.attempts() == 3
    env: dict[str, Any] = {**os.environ, **site, "PYTHONPATH": str(ROOT)}
    worker = subprocess.Popen(
        [sys.executable, "-m", "django", "kue_worker", "-n", "2", "--timeout", "5"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert worker.stdout is not None
        assert worker.stdout.readline().strip() == "working on confirm order"
        assert job.wait(20) == {"order": order_id, "email": "ada@example.com"}
        assert Order.objects.get(pk=order_id).status == "confirmed"
    finally:
        worker.send_signal(signal.SIGTERM)
        _, errors = worker.communicate(timeout=20)
    assert worker.returncode == 0, errors
    wait_for(lambda: not shop_queue.workers())  # it left the queue as it shut down


def test_the_worker_command_refuses_an_unknown_type(site: dict[str, str]) -> None:
    env: dict[str, Any] = {**os.environ, **site, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-m", "django", "kue_worker", "--type", "nope"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0 and "no handler for nope in KUE_HANDLERS" in done.stderr


def test_the_settings_want_a_secret_key_unless_debugging() -> None:
    code = "import kue_example.django_shop.settings"
    env = {k: v for k, v in os.environ.items() if not k.startswith("DJANGO_")}
    env["PYTHONPATH"] = str(ROOT)
    refused = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert refused.returncode == 1 and "set DJANGO_SECRET_KEY" in refused.stderr
    debugging = subprocess.run(
        [sys.executable, "-c", code], env={**env, "DJANGO_DEBUG": "1"}, capture_output=True
    )
    assert debugging.returncode == 0
