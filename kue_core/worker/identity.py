"""Worker ids: the id a process's workers go by, and one live process at a time with each.

A queue's workers register under ``queue.worker_id`` (``heartbeat.lua``): one given with
``Queue(worker_id=...)`` or ``kue worker --id``, which stays the same across restarts (jobs
can be pinned to it), or else one made up, ``host:pid:hex8``. Each
:class:`~kue_core.worker.workers.Workers` also has an ``instance`` (a uuid4), written with its
registration, which tells two processes with one id apart:

* at start (:func:`registering`), an id that another instance renewed within its lease is
  refused with :class:`WorkerIdTaken`, unless that process is dead for sure: on this host,
  with no process of its pid, or with this process's pid (an earlier run in a container)
  but none of this process's instances. Then the id is taken over.
* a process whose id was taken over while it was silent past its lease (SIGSTOP, a long GC, a
  network cut) learns so at its next heartbeat (:func:`taken_over`) and shuts down.
* shutdown (:func:`leaving`) removes the registration only while it is still this instance's.
"""

from __future__ import annotations

import functools
import importlib.metadata
import logging
import os
import re
import socket
import threading
import uuid

from ..base.errors import InvalidJob, WorkerIdTaken
from ..base.keys import Keys
from ..store import calls
from ..store.calls import Holder, Op

log = logging.getLogger(__name__)

#: The instances registered by this process, whatever their queue: the one thing that tells a
#: holder with this process's pid from an earlier process that had it (in a container).
_ours: set[str] = set()
_ours_lock = threading.Lock()


#: A version string: printable, without spaces, at most 100 characters.
_VERSION = re.compile(r"[!-~]{1,100}")


@functools.lru_cache(maxsize=32)
def installed_version(module: str = "kue_core") -> str:
    """The version of the installed distribution that provides ``module``'s top package
    (kue's own by default), or kue's when none does. Read once per process and module:
    looking through the installed distributions takes a tenth of a second."""
    top = module.partition(".")[0]
    names = [] if top == "kue_core" else importlib.metadata.packages_distributions().get(top, [])
    for name in [*names, "kue"]:
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return "unknown"


def check_version(version: object) -> str:
    """The version a worker process registers (deploy markers): ``version``, checked, or the
    installed kue's when None."""
    if version is None:
        return installed_version()
    if not isinstance(version, str) or not _VERSION.fullmatch(version):
        raise InvalidJob(
            f"a version must be 1 to 100 printable characters without spaces, got {version!r}"
        )
    return version


def generated_worker_id() -> str:
    """``host:pid:hex8``, unique among processes (not checked against the rule: a host
    name may hold other characters)."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def registering(keys: Keys, worker_id: str, instance: str, lease_ms: int, info: str) -> Op[None]:
    """Register ``instance`` under ``worker_id`` before its workers start (an operation
    either transport drives); ``WorkerIdTaken`` when a live process holds the id (see the
    module docstring)."""
    with _ours_lock:
        _ours.add(instance)
    start = calls.heartbeat(keys, worker_id, lease_ms, info, [], instance=instance, mode="start")
    holder = yield start
    if not isinstance(holder, Holder):
        return
    if not _dead(holder):
        with _ours_lock:
            _ours.discard(instance)
        raise WorkerIdTaken(
            worker_id, _name(holder), holder.now - holder.heartbeat, holder.lease_ms
        )
    log.warning(
        "worker id %r: its holder, %s (last heartbeat %.1f s ago), has no process any more; "
        "taking the id over",
        worker_id,
        _name(holder),
        (holder.now - holder.heartbeat) / 1000,
    )
    yield calls.heartbeat(keys, worker_id, lease_ms, info, [], instance=instance, mode="force")


def leaving(keys: Keys, worker_id: str, instance: str, lease_ms: int) -> Op[None]:
    """Remove the registration, unless another instance holds the id now (an operation
    either transport drives)."""
    yield calls.heartbeat(keys, worker_id, lease_ms, "", [], instance=instance, mode="leave")
    with _ours_lock:
        _ours.discard(instance)


def taken_over(worker_id: str, holder: Holder) -> str:
    """What a process whose id another took over logs before it shuts down."""
    return (
        f"worker id {worker_id!r} was taken over by {_name(holder)} while this process was "
        "silent past its lease; its running jobs are lost to it: shutting down"
    )


def _name(holder: Holder) -> str:
    return f"{holder.info.get('host', '?')}:{holder.info.get('pid', '?')}"


def _dead(holder: Holder) -> bool:
    """Whether the holder's process is gone for sure: it ran on this host, and its pid is no
    process's, or this process's while the instance is none of ours. On another host nothing
    can tell."""
    pid = holder.info.get("pid")
    if holder.info.get("host") != socket.gethostname() or not isinstance(pid, int) or pid <= 0:
        return False
    if pid == os.getpid():
        with _ours_lock:
            return holder.instance not in _ours
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:  # PermissionError: a process of another user has this pid
        return False
    return False
