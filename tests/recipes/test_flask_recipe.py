"""The Flask recipe (kue_example/flask_app.py): the dashboard and its API under /admin/queue,
open to the application's signed-in admins only."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from flask import Flask
from flask.testing import FlaskClient
from werkzeug.security import generate_password_hash

from kue_core import Queue
from kue_example.flask_app import create_app


@pytest.fixture
def app(redis_url: str, prefix: str) -> Iterator[Flask]:
    users = {
        "ada": (generate_password_hash("analytical"), True),
        "bob": (generate_password_hash("builder"), False),
    }
    application = create_app(users, {"KUE_REDIS_URL": redis_url, "KUE_PREFIX": prefix})
    application.config["TESTING"] = True
    yield application


def _sign_in(web: FlaskClient, user: str, password: str, target: str = "/") -> int:
    form = web.get(f"/login?next={target}").get_data(as_text=True)
    token = re.search(r'name="csrf" value="([^"]+)"', form)
    assert token is not None
    reply = web.post(
        "/login", data={"csrf": token.group(1), "next": target, "user": user, "password": password}
    )
    return reply.status_code


def test_strangers_are_sent_to_the_login_and_the_api_says_401(app: Flask) -> None:
    web = app.test_client()
    page = web.get("/admin/queue/")
    assert page.status_code == 302
    assert page.headers["Location"] == "/login?next=/admin/queue/"
    assert web.get("/admin/queue/?state=failed").headers["Location"] == (
        "/login?next=/admin/queue/%3Fstate%3Dfailed"
    )
    api = web.get("/admin/queue/api/stats")
    assert api.status_code == 401 and api.get_json() == {"error": "sign in first"}
    # A write is turned away before anything else looks at it.
    assert web.post("/admin/queue/api/job", json={"type": "x"}).status_code == 401


def test_an_admin_gets_the_dashboard_and_its_api(app: Flask, redis_url: str, prefix: str) -> None:
    with Queue(redis_url, prefix=prefix) as queue:
        job = queue.create_job("email", {"to": "ada"}).save()
    web = app.test_client()
    assert _sign_in(web, "ada", "wrong") == 401
    assert web.get("/admin/queue/api/stats").status_code == 401
    assert _sign_in(web, "ada", "analytical", "/admin/queue/") == 302
    page = web.get("/admin/queue/")
    assert page.status_code == 200 and "/admin/queue/" in page.get_data(as_text=True)
    got = web.get(f"/admin/queue/api/job/{job.id}")
    assert got.status_code == 200 and got.get_json()["data"] == {"to": "ada"}
    # The dashboard's own checks still hold: a write must be JSON.
    assert web.post("/admin/queue/api/job", data="type=x").status_code == 415
    assert web.get("/").get_data(as_text=True).startswith("<p>Signed in as ada.")


def test_a_user_who_is_not_an_admin_gets_403_and_signing_out_locks_it_again(
    app: Flask,
) -> None:
    web = app.test_client()
    assert _sign_in(web, "bob", "builder") == 302
    denied = web.get("/admin/queue/api/stats")
    assert denied.status_code == 403 and denied.get_json() == {"error": "admins only"}
    assert web.get("/admin/queue/").status_code == 403
    web2 = app.test_client()
    assert _sign_in(web2, "ada", "analytical") == 302
    assert web2.get("/admin/queue/api/stats").status_code == 200
    token = re.search(r'name="csrf" value="([^"]+)"', web2.get("/").get_data(as_text=True))
    assert token is not None
    assert web2.post("/logout", data={"csrf": "forged"}).status_code == 400
    assert web2.post("/logout", data={"csrf": token.group(1)}).status_code == 302
    assert web2.get("/admin/queue/api/stats").status_code == 401


def test_the_login_form_needs_its_token_and_sends_only_to_this_site(app: Flask) -> None:
    web = app.test_client()
    web.get("/login")
    bad = web.post("/login", data={"csrf": "forged", "user": "ada", "password": "analytical"})
    assert bad.status_code == 400
    assert web.get("/admin/queue/api/stats").status_code == 401
    assert _sign_in(web, "ada", "analytical", "//evil.example/") == 302
    for away in ("/\\evil.example/", "https://evil.example/", "/\tx", "/ok\r\nSet-Cookie: x"):
        other = app.test_client()
        form = other.get("/login").get_data(as_text=True)
        found = re.search(r'name="csrf" value="([^"]+)"', form)
        assert found is not None
        data = {"csrf": found.group(1), "next": away, "user": "ada", "password": "analytical"}
        assert other.post("/login", data=data).headers["Location"] == "/", away
    web3 = app.test_client()
    form = web3.get("/login").get_data(as_text=True)
    token = re.search(r'name="csrf" value="([^"]+)"', form)
    assert token is not None
    away = web3.post(
        "/login",
        data={
            "csrf": token.group(1),
            "next": "//evil.example/",
            "user": "ada",
            "password": "analytical",
        },
    )
    assert away.headers["Location"] == "/"
