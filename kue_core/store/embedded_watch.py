"""The embedded server's watchdog: shuts down a server that no process uses any more.

:mod:`kue_core.store.embedded` starts one beside each server it starts, as a script of the
standard library alone (``python -S embedded_watch.py FOLDER SOCKET PID IDLE``), so that it
costs a few milliseconds and no import of kue. It forks into a session of its own, keeps one
connection to the server (named :data:`NAME`, which the others leave out of their counts),
and looks at the server's clients a few times a second. The processes that use a server hold
connections to it; when none has been connected for ``IDLE`` seconds (they were SIGKILLed, or
crashed, and never shut it down), it shuts the server down with ``SHUTDOWN SAVE`` under the
folder's lock, as the last process out would, and exits once the server has. A server whose
folder was removed meanwhile is shut down without saving. It exits too when its connection
breaks: the server is gone, and whoever starts the next one starts its watchdog.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
import sys
import time

#: The name of its connection, which the count of a server's users leaves out.
NAME = "kue-watchdog"
#: Files of the server's folder (kue_core.store.embedded names them from here).
LOCK_FILE = "start.lock"
PID_FILE = "server.pid"
#: Seconds between two looks at the server's clients.
POLL = 0.25
#: Seconds a shutdown may take to save the data before the watchdog stops waiting for it.
SAVE_WAIT = 600.0


class Link:
    """One connection to the server, speaking just enough RESP for three commands."""

    def __init__(self, path: str) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(30)
        self.sock.connect(path)
        self.file = self.sock.makefile("rb")

    def call(self, *args: str) -> bytes | int | None:
        """Send a command and read its reply (``OSError`` if the server is gone)."""
        parts = [f"*{len(args)}\r\n".encode()]
        for arg in args:
            data = arg.encode()
            parts.append(b"$%d\r\n%s\r\n" % (len(data), data))
        self.sock.sendall(b"".join(parts))
        line = self.file.readline()
        if not line.endswith(b"\r\n"):
            raise ConnectionError("the server closed the connection")
        kind, rest = line[:1], line[1:-2]
        if kind == b"$":
            size = int(rest)
            return None if size < 0 else self.file.read(size + 2)[:-2]
        if kind == b":":
            return int(rest)
        if kind == b"-":
            raise ConnectionError(rest.decode(errors="replace"))
        return rest

    def others(self) -> int:
        """How many connections the server has besides this one (and other watchdogs)."""
        listed = self.call("CLIENT", "LIST")
        lines = listed.decode(errors="replace").splitlines() if isinstance(listed, bytes) else []
        return sum(1 for line in lines if f" name={NAME} " not in f" {line} ")


def alive(pid: int) -> bool:
    """Whether the process runs: a zombie does not (a daemon that died is reaped by the
    system's first process, which in a container may never do it)."""
    with contextlib.suppress(OSError), open(f"/proc/{pid}/stat") as stat:  # Linux
        return stat.read().rpartition(")")[2].split()[0] != "Z"  # the state after the name
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _identity(folder: str) -> tuple[int, int] | None:
    """The folder's device and inode, or None once it is gone."""
    try:
        st = os.stat(folder)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def watch(link: Link, folder: str, pid: int, idle: float) -> None:
    """Watch the server with ``pid`` through ``link`` until it is gone."""
    ident = _identity(folder)
    alone_since: float | None = None
    while True:
        time.sleep(POLL)
        if link.others():
            alone_since = None
            continue
        now = time.monotonic()
        if alone_since is None:
            alone_since = now
        if now - alone_since < idle:
            continue
        if _identity(folder) != ident:
            # Its folder was removed (rm -rf .kue), or made anew by another server: no
            # process can find this one any more, and its data went with the folder. Shut it
            # down without saving (a save into a removed folder fails, and the server would
            # refuse to stop), and without the lock, which is another server's now.
            with contextlib.suppress(OSError):
                link.call("SHUTDOWN", "NOSAVE")
            deadline = time.monotonic() + SAVE_WAIT
            while alive(pid) and time.monotonic() < deadline:
                time.sleep(0.01)
            return
        # As the last process out would, under the folder's lock: nobody starts a new server
        # on files this one is still writing, and nobody connects unseen meanwhile.
        with open(os.path.join(folder, LOCK_FILE), "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if link.others():
                alone_since = None
                continue
            with contextlib.suppress(OSError):  # its answer to a shutdown: the line closes
                link.call("SHUTDOWN", "SAVE")
            deadline = time.monotonic() + SAVE_WAIT
            pidfile = os.path.join(folder, PID_FILE)
            while alive(pid) and os.path.exists(pidfile) and time.monotonic() < deadline:
                time.sleep(0.01)
            return


def main(argv: list[str]) -> None:
    folder, path, pid, idle = argv[0], argv[1], int(argv[2]), float(argv[3])
    try:
        # Connected and named before the starter goes on: a process that looks for the
        # watchdog from then on finds it.
        link = Link(path)
        link.call("CLIENT", "SETNAME", NAME)
        if os.fork():  # the starter waits for this first process only: it returns at once
            os._exit(0)
        os.setsid()
        watch(link, folder, pid, idle)
    except (OSError, ValueError):
        pass  # the server is gone (killed, or shut down by its last user): so is its watchdog


if __name__ == "__main__":
    main(sys.argv[1:])
