"""Users with roles (``KUE_USERS``, ``KUE_USERS_FILE``, kue_http/users.py): who signs in, with
basic auth or a bearer token; a viewer reads and may not write (403, nothing written, no
button); an operator and an admin write; ``KUE_AUTH`` keeps working beside them; the audit
log names the user; settings that cannot be read stop the app, never showing a password."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest
from flask import Flask, session

from kue_core import Queue
from kue_http import ConfigError, User, create_app, mount

USERS = "ada:s3cret:admin,olga:op-pass:operator,vic:view:only:viewer"


def basic(name: str, password: str) -> dict[str, str]:
    token = base64.b64encode(f"{name}:{password}".encode()).decode()
    return {"Authorization": f"Basic {token}"}


def client_with(redis_url: str, prefix: str, **settings: Any) -> Any:
    return create_app({"KUE_REDIS_URL": redis_url, "KUE_PREFIX": prefix, **settings}).test_client()


def test_each_role_may_do_what_it_is_allowed(redis_url: str, prefix: str) -> None:
    client = client_with(redis_url, prefix, KUE_USERS=USERS)
    new = {"type": "email", "data": {"to": "x"}}
    assert client.get("/api/stats").status_code == 401
    viewer = basic("vic", "view:only")  # a password may hold a colon
    assert client.get("/api/stats", headers=viewer).status_code == 200
    refused = client.post("/api/job", json=new, headers=viewer)
    assert refused.status_code == 403 and refused.json == {"error": "the viewer role may only read"}
    with Queue(redis_url, prefix=prefix) as q:
        assert q.count("inactive") == 0  # nothing written
    for who in (basic("olga", "op-pass"), basic("ada", "s3cret")):
        assert client.post("/api/job", json=new, headers=who).status_code == 200
    assert client.get("/api/stats", headers=basic("ada", "wrong")).status_code == 401
    assert client.get("/api/stats", headers=basic("nobody", "s3cret")).status_code == 401
    bearer = {"Authorization": "Bearer op-pass"}  # a user's password as a token
    assert client.post("/api/job", json=new, headers=bearer).status_code == 200
    audit = client.get("/api/audit", headers=basic("ada", "s3cret")).json
    assert [e["who"] for e in audit["entries"]][:3] == ["olga", "ada", "olga"]


def test_kue_auth_is_one_admin_beside_the_users(redis_url: str, prefix: str) -> None:
    client = client_with(redis_url, prefix, KUE_USERS=USERS, KUE_AUTH="bearer:root-token")
    admin = {"Authorization": "Bearer root-token"}
    assert client.post("/api/job", json={"type": "a"}, headers=admin).status_code == 200
    assert client.get("/api/stats", headers=basic("vic", "view:only")).status_code == 200


def test_a_viewer_sees_no_button_that_writes(redis_url: str, prefix: str) -> None:
    with Queue(redis_url, prefix=prefix) as q:
        job = q.create_job("email", {"to": "x"}).save()
    client = client_with(redis_url, prefix, KUE_USERS=USERS)
    for who, shown in ((basic("vic", "view:only"), False), (basic("olga", "op-pass"), True)):
        page = client.get(f"/job/{job.id}", headers=who)
        assert page.status_code == 200
        assert (b'id="cancel-' in page.data) is shown


def test_users_from_a_file(redis_url: str, prefix: str, tmp_path: Path) -> None:
    path = tmp_path / "users"
    path.write_text("# the team\nada:a,b#c:admin\n\nvic:v:viewer  # read only\n", "utf-8")
    client = client_with(redis_url, prefix, KUE_USERS_FILE=str(path))
    assert (
        client.post("/api/job", json={"type": "a"}, headers=basic("ada", "a,b#c")).status_code
        == 200
    )
    assert client.post("/api/job", json={"type": "a"}, headers=basic("vic", "v")).status_code == 403


@pytest.mark.parametrize(
    ("users", "says"),
    [
        ("ada:pw", "no password"),  # one colon: the role is "pw", the password empty
        ("ada::admin", "no password"),
        ("a b:pw:admin", "a name of letters"),
        ("ada:pw:root", "the role must be one of"),
        ("ada:pw:admin,ada:pw2:viewer", "given twice"),
        ("ada:pw:admin,bob:pw:viewer", "the same password"),
    ],
)
def test_users_that_cannot_be_read_stop_the_app(
    redis_url: str, prefix: str, users: str, says: str
) -> None:
    with pytest.raises(ConfigError) as e:
        client_with(redis_url, prefix, KUE_USERS=users)
    assert says in str(e.value) and "pw2" not in str(e.value)
    with pytest.raises(ConfigError, match="cannot read"):
        client_with(redis_url, prefix, KUE_USERS_FILE="/nonexistent/users")


def test_a_user_in_both_the_variable_and_the_file_is_refused(
    redis_url: str, prefix: str, tmp_path: Path
) -> None:
    path = tmp_path / "users"
    path.write_text("ada:other:viewer\n", "utf-8")
    with pytest.raises(ConfigError, match="given twice"):
        client_with(redis_url, prefix, KUE_USERS=USERS, KUE_USERS_FILE=str(path))


def test_the_host_app_says_who_the_user_is(redis_url: str, prefix: str) -> None:
    """``KUE_AUTHENTICATE``: a function of the request, here reading the session of the app
    kue is mounted in; None falls back on kue's own users, then 401."""
    host = Flask("host")
    host.secret_key = "host-secret"
    roles = {"ada": "admin", "vic": "viewer"}

    @host.post("/login/<name>")
    def login(name: str) -> str:
        session["user"] = name
        return "signed in"

    def who(request: Any) -> User | None:
        found = host.session_interface.open_session(host, request)
        name = found.get("user") if found is not None else None
        return User(name, roles[name]) if name in roles else None

    settings = {"KUE_REDIS_URL": redis_url, "KUE_PREFIX": prefix, "KUE_AUTHENTICATE": who}
    mount(host, "/kue", {**settings, "KUE_USERS": "olga:o-pass:operator"})
    client = host.test_client()
    assert client.get("/kue/api/stats").status_code == 401  # nobody
    assert client.get("/kue/api/stats", headers=basic("olga", "o-pass")).status_code == 200
    client.post("/login/vic")
    assert client.get("/kue/api/stats").status_code == 200
    refused = client.post("/kue/api/job", json={"type": "a"})
    assert refused.status_code == 403 and refused.json == {"error": "the viewer role may only read"}
    client.post("/login/ada")
    assert client.post("/kue/api/job", json={"type": "a"}).status_code == 200
    audit = client.get("/kue/api/audit").json
    assert audit is not None and audit["entries"][0]["who"] == "ada"


def test_a_hook_named_by_its_module(redis_url: str, prefix: str) -> None:
    client = client_with(redis_url, prefix, KUE_AUTHENTICATE="tests.http.test_users:everyone_views")
    assert client.get("/api/stats").status_code == 200
    assert client.post("/api/job", json={"type": "a"}).status_code == 403
    for bad, says in (("nomodule", "module:function"), ("tests.nothing:x", "cannot load")):
        with pytest.raises(ConfigError, match=says):
            client_with(redis_url, prefix, KUE_AUTHENTICATE=bad)


def everyone_views(request: Any) -> User:
    """A hook that makes everyone a viewer (named by test_a_hook_named_by_its_module)."""
    return User("guest", "viewer")
