"""The transition scripts run as Redis functions where Redis has them (7 and later), loaded
when missing, and as scripts (EVALSHA) where it has none or the user may not use them; kue
doctor finds the libraries of other versions and deletes them."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis

from kue_core import Queue, doctor
from kue_core.doctor.functions import _libraries
from kue_core.store import calls
from kue_core.store.calls import PAUSED
from kue_core.store.lua_source import SCRIPT_NAMES, function_library

#: A library named as ours that no version of the save script is.
OLD = "kue_save_0000000000000000"


def _has_functions(r: redis.Redis) -> bool:
    return int(str(r.info("server")["redis_version"]).split(".")[0]) >= 7


@pytest.fixture
def functions(r: redis.Redis) -> None:
    if not _has_functions(r):
        pytest.skip("Redis functions came with Redis 7")


def _loaded(r: redis.Redis) -> set[str]:
    return set(_libraries(r))


def _fcalls(r: redis.Redis) -> int:
    return int(r.info("commandstats").get("cmdstat_fcall", {}).get("calls", 0))


def test_scripts_run_as_functions_where_redis_has_them(queue: Queue, r: redis.Redis) -> None:
    before = _fcalls(r)
    job = queue.create_job("t").save()
    assert queue.get_job(job.id).state == "inactive"
    assert queue.scripts.functions is _has_functions(r)
    if _has_functions(r):
        assert function_library("save").name in _loaded(r)
        assert _fcalls(r) >= before + 1  # the save
    else:
        assert _fcalls(r) == 0


@pytest.mark.usefixtures("functions")
def test_a_lost_library_is_loaded_again(
    queue: Queue, r: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kue_core import defaults

    monkeypatch.setattr(defaults, "SAVE_CHUNK", 2)
    save = function_library("save").name
    queue.create_job("t").save()
    r.execute_command("FUNCTION", "DELETE", save)
    jobs = queue.save_many([queue.create_job("t") for _ in range(5)])  # pipelined chunks
    assert [j.id for j in jobs] == [2, 3, 4, 5, 6]
    r.execute_command("FUNCTION", "DELETE", save)
    assert queue.create_job("t").save().id == 7
    assert queue.count("inactive", "t") == 7 and queue.scripts.functions


@pytest.mark.usefixtures("functions")
def test_every_script_loads_as_a_function(r: redis.Redis) -> None:
    """Each library compiles (a function's body may use at most 60 helpers of the library,
    where a script's has no such limit)."""
    for name in SCRIPT_NAMES:
        library = function_library(name)
        try:
            r.execute_command("FUNCTION", "LOAD", library.code)
        except redis.ResponseError as e:
            assert "already exists" in str(e), (name, str(e))
    assert {function_library(n).name for n in SCRIPT_NAMES} <= _loaded(r)


@pytest.fixture
def limited_url(redis_url: str, r: redis.Redis, prefix: str) -> Iterator[str]:
    """The test Redis's URL for a user who may run scripts but not functions."""
    user = "nofn" + prefix.strip("{}")
    r.execute_command(
        "ACL", "SETUSER", user, "on", ">secret", "~*", "&*", "+@all", "-fcall", "-function"
    )
    yield redis_url.replace("redis://", f"redis://{user}:secret@", 1)
    r.execute_command("ACL", "DELUSER", user)


@pytest.mark.single_node
@pytest.mark.usefixtures("functions")
def test_a_user_who_may_not_use_functions_runs_scripts(limited_url: str, prefix: str) -> None:
    q = Queue(limited_url, prefix=prefix)
    try:
        job = q.create_job("t", {"n": 1}).save()
        assert q.scripts.functions is False
        claimed = q.scripts.call(calls.claim(q.keys, "t", "w1", 5_000))
        assert isinstance(claimed, tuple) and claimed[0] == job.id
        assert q.save_many([q.create_job("t") for _ in range(3)])[-1].id == job.id + 3
    finally:
        q.close()


def test_no_state_of_one_call_reaches_the_next(queue: Queue, redis_url: str, prefix: str) -> None:
    """What a call reads of a type's rules is its own: a type paused in one queue is not
    paused in another queue of the same Redis, whichever runs first (a function's library
    outlives its calls)."""
    other = Queue(redis_url, prefix=prefix + "b")
    try:
        queue.pause("t")
        job = other.create_job("t").save()
        assert queue.scripts.call(calls.claim(queue.keys, "t", "w1", 5_000)) == PAUSED
        claimed = other.scripts.call(calls.claim(other.keys, "t", "w1", 5_000))
        assert isinstance(claimed, tuple) and claimed[0] == job.id
    finally:
        other.close()


@pytest.mark.usefixtures("functions")
def test_doctor_deletes_the_libraries_of_other_versions(queue: Queue, r: redis.Redis) -> None:
    queue.create_job("t").save()
    code = f"#!lua name={OLD}\nredis.register_function('{OLD}', function() return 1 end)"
    r.execute_command("FUNCTION", "LOAD", "REPLACE", code)
    report = doctor.check(queue)
    assert [(f.kind, f.key) for f in report.findings] == [("old-function", OLD)]
    [outcome] = doctor.repair(queue, report.findings)
    assert outcome.status == "repaired"
    assert OLD not in _loaded(r) and function_library("save").name in _loaded(r)
    assert doctor.check(queue).healthy
    assert queue.create_job("t").save().id == 2


@pytest.mark.usefixtures("functions")
def test_calls_of_several_lost_libraries_at_once_load_each(queue: Queue, r: redis.Redis) -> None:
    """On the asyncio transport, calls of five scripts sent at once, none loaded: each
    library is loaded (the load of one is not taken for another's) and every call runs."""
    import asyncio

    from kue_core import connection, defaults
    from kue_core.store.aio_transport import AsyncTransport

    keys = queue.keys

    async def run() -> list[object]:
        twin = connection.async_twin(queue.client, queue.prefix)
        assert twin is not None
        transport = AsyncTransport(twin, keys)
        try:
            out: list[object] = []
            for _ in range(3):
                r.execute_command("FUNCTION", "FLUSH")
                out += await asyncio.gather(
                    transport.call(calls.promote(keys, defaults.SWEEP_LIMIT)),
                    transport.call(calls.recover(keys, 1, defaults.SWEEP_LIMIT)),
                    transport.call(calls.retain(keys, defaults.SWEEP_LIMIT)),
                    transport.call(calls.unblock(keys, defaults.SWEEP_LIMIT)),
                    transport.call(calls.heartbeat(keys, "w", 1000, "{}", [], instance="i")),
                )
            return out
        finally:
            await transport.close()
            await twin.aclose()

    assert len(asyncio.run(run())) == 15
