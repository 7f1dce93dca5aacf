"""Users with roles (``KUE_USERS``, ``KUE_USERS_FILE``): who may use the app, and what they
may do.

A user is written ``<name>:<password>:<role>``: in ``KUE_USERS`` several, comma-separated;
in the file ``KUE_USERS_FILE`` names, one a line (``#`` at a line's start or after a space
starts a comment), so that a password may hold a comma. A user signs in with HTTP basic auth
(name and password), or sends the password as a bearer token. ``KUE_AUTH`` keeps working
beside them, as one ``admin``.

The roles, each allowed what the one before it is:

- ``viewer``: reads (every page and ``GET`` route), payloads hidden; a write answers 403, and
  the dashboard shows no button that writes;
- ``operator``: the actions on jobs and queues too, payloads hidden;
- ``admin``: everything: payloads shown (kue_http/redaction.py), the queue's settings and a
  job's data changed (kue_http/security.py).

An app kue is mounted in may say who the user is itself: ``KUE_AUTHENTICATE``, a function of
the request returning a :class:`User` or None. Without ``KUE_AUTH``, users or such a function,
everyone is an ``admin``, as the app has always been.
"""

from __future__ import annotations

import hmac
import re
from dataclasses import dataclass

ROLES = ("viewer", "operator", "admin")
_NAME = re.compile(r"[A-Za-z0-9._@-]{1,64}")
#: A comment in the users' file: ``#`` at a line's start or after a space (a password may
#: hold a ``#`` elsewhere).
_COMMENT = re.compile(r"(?:^|\s)#")


class UsersError(ValueError):
    """Users that cannot be read: the message says which entry and why, never a password."""


@dataclass(frozen=True)
class User:
    """A user: its name and role (``token`` and ``admin`` for ``KUE_AUTH``'s)."""

    name: str
    role: str

    def may(self, role: str) -> bool:
        """Whether this user's role is ``role`` or one allowed more."""
        return ROLES.index(self.role) >= ROLES.index(role)


#: Who uses an app without authentication.
ANYONE = User("", "admin")


def parse(
    entries: list[str], where: str, known: dict[str, tuple[str, str]] | None = None
) -> dict[str, tuple[str, str]]:
    """``name -> (password, role)`` of ``known`` and ``entries`` (``name:password:role``
    each, blank ones skipped); ``where`` names their source in errors. A name, and a password
    (a bearer token names one user), is one user's."""
    users = dict(known or {})
    for n, entry in enumerate(entries, 1):
        entry = entry.strip()
        if not entry:
            continue
        name, _, rest = entry.partition(":")
        password, _, role = rest.rpartition(":")
        if not _NAME.fullmatch(name):
            raise UsersError(
                f"{where}, user {n}: a name of letters, digits and . _ @ - comes first "
                "(written name:password:role)"
            )
        if not password:
            raise UsersError(f"{where}, user {name!r}: no password (written name:password:role)")
        if role not in ROLES:
            raise UsersError(f"{where}, user {name!r}: the role must be one of {', '.join(ROLES)}")
        if name in users:
            raise UsersError(f"{where}: the user {name!r} is given twice")
        if any(password == other for other, _ in users.values()):
            raise UsersError(
                f"{where}, user {name!r}: another user has the same password (a bearer "
                "token is a password: it must name one user)"
            )
        users[name] = (password, role)
    return users


def from_settings(text: str | None, path: str | None) -> dict[str, tuple[str, str]]:
    """The users of ``KUE_USERS`` (``text``) and of the file ``KUE_USERS_FILE`` (``path``)."""
    users = parse((text or "").split(","), "KUE_USERS") if text else {}
    if path:
        try:
            with open(path, encoding="utf-8") as f:
                lines = [_COMMENT.split(line, maxsplit=1)[0] for line in f]
        except OSError as e:
            raise UsersError(f"KUE_USERS_FILE: cannot read {path}: {e.strerror}") from None
        users = parse(lines, f"KUE_USERS_FILE {path}", users)
    return users


def signed_in(
    users: dict[str, tuple[str, str]], scheme: str | None, name: str, secret: str
) -> User | None:
    """The user these credentials are (``scheme`` basic: a name and a password; bearer: a
    password as the token), or None. Every password is compared in constant time."""
    if scheme == "basic":
        found = users.get(name)
        if found is None:
            hmac.compare_digest(secret.encode(), secret.encode())  # as long as a wrong password
            return None
        return (
            User(name, found[1])
            if hmac.compare_digest(secret.encode(), found[0].encode())
            else None
        )
    if scheme == "bearer":
        match = None
        for who, (password, role) in users.items():
            if hmac.compare_digest(secret.encode(), password.encode()) and match is None:
                match = User(who, role)
        return match
    return None
