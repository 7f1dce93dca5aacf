"""Typed tasks (``@queue.task``): calls checked before anything is written, enqueued as plain
Kue jobs whose data is the arguments by name, run by workers with ``current_job()``, their
results typed."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import re
import threading
import warnings
from collections.abc import Callable, Iterator
from typing import Any, Optional

import pydantic
import pytest
import redis
from typing_extensions import TypedDict  # pydantic reads typing's only from Python 3.12

from kue_core import (
    InvalidJob,
    InvalidSchedule,
    Job,
    NoCurrentJob,
    Queue,
    Task,
    current_job,
)
from tests.conftest import never, snapshot, wait_for, written_since
from tests.integration import task_functions


@dataclasses.dataclass
class Address:
    street: str
    zip: str


class Order(pydantic.BaseModel):
    sku: str
    qty: int = 1


class Options(TypedDict):
    retries: int
    verbose: bool


@dataclasses.dataclass
class Charge:
    account: int
    label: str
    cents: int


class ChargeModel(pydantic.BaseModel):
    account: int
    label: str
    cents: int


class ChargeDict(TypedDict):
    account: int
    label: str
    cents: int


def _received(order: Any) -> str:
    """What a charge task was called with: its argument's type, and the type of its cents."""
    cents = order["cents"] if isinstance(order, dict) else order.cents
    return f"{type(order).__name__} {type(cents).__name__} {cents}"


def charge_dataclass(order: Charge) -> str:
    return _received(order)


def charge_model(order: ChargeModel) -> str:
    return _received(order)


def charge_typeddict(order: ChargeDict) -> str:
    return _received(order)


#: (the task's function, an instance of its argument's class made of these fields unchecked,
#: and the type the worker calls it with). A model checks its fields when made, so the
#: instances a caller may hold with a wrong field are made with ``model_construct`` (or
#: changed afterwards, which pydantic does not check either without ``validate_assignment``).
INSTANCES: list[tuple[Callable[..., str], Callable[..., Any], str]] = [
    (charge_dataclass, Charge, "Charge"),
    (charge_model, ChargeModel.model_construct, "ChargeModel"),
    (charge_typeddict, ChargeDict, "dict"),
]


@pytest.fixture
def wq(redis_url: str, prefix: str) -> Iterator[Queue]:
    # A lease no load outlasts: the tests count attempts, calls and log lines, none lets a
    # lease expire, and a process held up past a short one (two cores, under coverage)
    # rightly has its jobs run again.
    q = Queue(redis_url, prefix=prefix, lease_ms=30_000)
    yield q
    q.close()


def _state(queue: Queue, job_id: int, state: str) -> dict[str, Any]:
    return wait_for(  # type: ignore[no-any-return]
        lambda: (d := queue.get_job(job_id).to_dict())["state"] == state and d, timeout=20
    )


# -- defining and enqueueing ------------------------------------------------------------------
def test_a_call_is_a_job_whose_data_is_the_arguments_by_name(queue: Queue) -> None:
    @queue.task("email", attempts=5, priority="high", ttl=30_000)
    def send_email(to: str, subject: str, body: str = "") -> dict[str, bool]:
        return {"sent": True}

    job = send_email.enqueue("a@example.com", subject="hi")
    stored = queue.get_job(job.id)  # type: ignore[arg-type]
    assert (stored.type, stored.state) == ("email", "inactive")
    assert stored.data == {"to": "a@example.com", "subject": "hi", "body": ""}
    assert (stored.priority(), stored.attempts(), stored.ttl()) == (-10, 5, 30_000)
    # Still the function, called here.
    assert send_email("b@example.com", "direct") == {"sent": True}
    assert isinstance(send_email, Task) and send_email.__name__ == "send_email"


def test_the_type_is_the_qualified_name_when_not_given(queue: Queue) -> None:
    @queue.task
    def resize(width: int) -> None:
        return None

    assert resize.type == resize.fn.__qualname__
    assert resize.type.endswith("<locals>.resize")
    assert queue.get_job(resize.enqueue(3).id).type == resize.type  # type: ignore[arg-type]
    assert queue.tasks == {resize.type: resize}


def test_options_per_call_override_the_decorators(queue: Queue) -> None:
    @queue.task("report", priority="low", attempts=2)
    def report(day: str) -> None:
        return None

    later = report.options(delay=5_000, priority="critical")
    job = later.enqueue("2026-11-28")
    stored = queue.get_job(job.id)  # type: ignore[arg-type]
    assert stored.state == "delayed"
    assert (stored.priority(), stored.attempts()) == (-15, 2)
    tagged = report.options(tags=["tenant-7"], group="g1").enqueue("x")
    assert queue.get_job(tagged.id).tags() == ["tenant-7"]  # type: ignore[arg-type]
    assert queue.get_job(tagged.id).group() == "g1"  # type: ignore[arg-type]
    # The task's own options are unchanged.
    assert queue.get_job(report.enqueue("y").id).priority() == 10  # type: ignore[arg-type]


def test_bad_options_are_refused_when_given(queue: Queue) -> None:
    with pytest.raises(InvalidJob, match="unknown job option 'retries'"):

        @queue.task("t1", retries=3)
        def t1() -> None: ...

    with pytest.raises(InvalidJob, match="priority"):

        @queue.task("t2", priority="urgent-ish")
        def t2() -> None: ...

    @queue.task("t3")
    def t3() -> None: ...

    with pytest.raises(InvalidJob, match="attempts"):
        t3.options(attempts=0)
    with pytest.raises(InvalidJob, match="concurrency"):
        queue.task("t4", concurrency=0)(lambda: None)
    with pytest.raises(InvalidJob, match="isolation"):
        queue.task("t5", isolation="fork")(lambda: None)


def test_a_call_that_does_not_fit_raises_and_writes_nothing(queue: Queue, r: redis.Redis) -> None:
    @queue.task("ship")
    def ship(
        order: Order,
        to: Address,
        count: int,
        note: Optional[str] = None,  # noqa: UP045 (the spelling users write)
        sizes: list[int] | None = None,
    ) -> None:
        return None

    order, to = Order(sku="a"), Address("Main St", "1000")
    before = snapshot(r, queue.prefix)
    cases = [
        ((order, to), {}, "missing a required argument: 'count'"),
        ((order, to, 1), {"colour": "red"}, "unexpected keyword argument 'colour'"),
        ((order, to, "many"), {}, "argument 'count': Input should be a valid integer"),
        ((order, {"street": "x"}, 1), {}, "argument 'to': Field required"),
        ((order, to, 1), {"sizes": [1, "big"]}, "argument 'sizes': .*valid integer"),
        (({"sku": 5}, to, 1), {}, "argument 'order': Input should be a valid string"),
    ]
    for args, kwargs, message in cases:
        with pytest.raises(InvalidJob, match=message):
            ship.enqueue(*args, **kwargs)
    assert written_since(r, queue.prefix, before) == {}
    # A good call is coerced as pydantic validates, and written as JSON.
    job = ship.enqueue({"sku": "b", "qty": "2"}, to, "3", sizes=("4",))  # type: ignore[arg-type]
    assert queue.get_job(job.id).data == {  # type: ignore[arg-type]
        "order": {"sku": "b", "qty": 2},
        "to": {"street": "Main St", "zip": "1000"},
        "count": 3,
        "note": None,
        "sizes": [4],
    }


def test_args_and_kwargs_cannot_be_a_jobs_data(queue: Queue) -> None:
    with pytest.raises(InvalidJob, match=r"\*args \(rest\)"):

        @queue.task("t")
        def t(a: int, *rest: int) -> None: ...

    with pytest.raises(InvalidJob, match=r"\*\*kwargs \(more\)"):

        @queue.task("u")
        def u(**more: int) -> None: ...


def test_one_type_is_one_function(queue: Queue) -> None:
    @queue.task("same")
    def first() -> None: ...

    with pytest.raises(InvalidJob, match="defined on this queue already"):

        @queue.task("same")
        def second() -> None: ...


def test_enqueue_many_checks_every_call_then_saves_them_in_one_round_trip(
    queue: Queue, r: redis.Redis
) -> None:
    @queue.task("sum")
    def add(a: int, b: int = 0) -> int:
        return a + b

    before = snapshot(r, queue.prefix)
    with pytest.raises(InvalidJob, match="argument 'a'"):
        add.enqueue_many([(1, 2), {"a": "x"}])
    with pytest.raises(InvalidJob, match="call 1 is a tuple of arguments or a mapping"):
        add.enqueue_many([(1,), [2]])  # type: ignore[list-item]
    assert written_since(r, queue.prefix, before) == {}
    jobs = add.options(priority="high").enqueue_many([(1, 2), {"a": 3}, (5,)])
    got = [queue.get_job(j.id) for j in jobs]  # type: ignore[arg-type]
    assert [j.data for j in got] == [{"a": 1, "b": 2}, {"a": 3, "b": 0}, {"a": 5, "b": 0}]
    assert {j.priority() for j in got} == {-10}


# -- running ----------------------------------------------------------------------------------
def test_a_worker_runs_the_function_with_the_jobs_data_and_types_its_result(wq: Queue) -> None:
    seen: list[Any] = []

    @wq.task("ship", concurrency=2)
    def ship(order: Order, to: Address, count: int = 1) -> Address:
        seen.append((order, to, count))
        job = current_job()
        job.log("shipping %s", order.sku)
        job.progress(1, 2)
        return Address(to.street.upper(), to.zip)

    job = ship.enqueue(Order(sku="a", qty=2), Address("main st", "1000"))
    wq.process_tasks()
    assert job.wait(20) == {"street": "MAIN ST", "zip": "1000"}
    assert ship.result(job, 5) == Address("MAIN ST", "1000")
    assert seen == [(Order(sku="a", qty=2), Address("main st", "1000"), 1)]
    assert wq.get_log(job.id) == ["shipping a"]  # type: ignore[arg-type]
    assert wq.workers()[0]["types"] == {"ship": 2}  # its concurrency


def test_a_return_value_is_checked_and_coerced_by_the_annotation_without_a_warning(
    wq: Queue,
) -> None:
    @wq.task("bill", attempts=3)
    def bill(cents: str) -> Charge:
        return Charge(1, "a", cents)  # type: ignore[arg-type]  # what a bug in a handler does

    good, bad = bill.enqueue("7"), bill.enqueue("lots")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # pydantic's serialisation warning would fail here
        wq.process_tasks()
        assert good.wait(20) == {"account": 1, "label": "a", "cents": 7}  # coerced
        error = _state(wq, bad.id, "failed")  # type: ignore[arg-type]
    assert error["attempts"]["made"] == 1  # not retried: the function has run
    first = error["error"].splitlines()[0]
    assert "NoRetry: task bill: the return value does not fit" in first
    assert "valid integer" in first and "cents" in first


def test_a_job_whose_data_does_not_fit_fails_at_once_naming_the_field(wq: Queue) -> None:
    ran = threading.Event()

    @wq.task("charge", attempts=5)
    def charge(account: str, cents: int) -> None:
        ran.set()

    # Saved by another client (the REST API, Node Kue, an older version of this code).
    bad = [
        wq.create_job("charge", {"account": "a", "cents": "lots"}).save(),
        wq.create_job("charge", {"account": "a"}).save(),
        wq.create_job("charge", {"account": "a", "cents": 1, "currency": "EUR"}).save(),
        wq.create_job("charge", ["a", 1]).save(),
    ]
    good = wq.create_job("charge", {"account": "a", "cents": "12"}).save()
    wq.process_tasks()
    _state(wq, good.id, "complete")  # type: ignore[arg-type]
    errors = [_state(wq, j.id, "failed") for j in bad]  # type: ignore[arg-type]
    assert [e["attempts"]["made"] for e in errors] == [1, 1, 1, 1]  # no retry
    firsts = [e["error"].splitlines()[0] for e in errors]
    assert "NoRetry: task charge: argument 'cents': Input should be a valid integer" in firsts[0]
    assert "the job's data has no field 'cents'" in firsts[1]
    assert "unknown field 'currency'" in firsts[2]
    assert "must be an object of its arguments by name, got list" in firsts[3]
    assert all("TypeError" not in e["error"] for e in errors)
    assert ran.is_set()


def test_current_job_outside_a_task_raises(queue: Queue) -> None:
    with pytest.raises(NoCurrentJob, match="not inside a task"):
        current_job()

    @queue.task("direct")
    def direct() -> Job:
        return current_job()  # type: ignore[no-any-return]

    with pytest.raises(NoCurrentJob):
        direct()


def test_an_async_task_runs_on_the_workers_loop(wq: Queue) -> None:
    @wq.task("fetch")
    async def fetch(url: str, options: Options) -> dict[str, Any]:
        await asyncio.sleep(0)
        current_job().log("fetching %s", url)
        return {"url": url, "loop": threading.current_thread().name, **options}

    job = fetch.enqueue("https://example.com", {"retries": "2", "verbose": True})  # type: ignore[typeddict-item]
    assert wq.get_job(job.id).data["options"] == {"retries": 2, "verbose": True}  # type: ignore[arg-type]
    wq.process_tasks()
    result = job.wait(20)
    assert result == {
        "url": "https://example.com",
        "loop": "kue-async",
        "retries": 2,
        "verbose": True,
    }
    assert wq.get_log(job.id) == ["fetching https://example.com"]  # type: ignore[arg-type]
    with pytest.raises(NoCurrentJob):  # called directly, it is the coroutine function
        asyncio.run(fetch("u", {"retries": 0, "verbose": False}))


def test_a_task_runs_in_a_child_process_with_its_job(wq: Queue) -> None:
    shift = task_functions.shift
    job = shift.on(wq).enqueue(task_functions.Point(1, 2), by=3)
    wq.process(shift.type, 1, shift.handle, isolation=shift.isolation)
    assert job.wait(30) == {"x": 4, "y": 5}
    child = int(wq.get_log(job.id)[0].split()[1])  # type: ignore[arg-type]
    assert child != os.getpid()


def test_a_task_a_child_cannot_find_is_refused_with_isolation(wq: Queue) -> None:
    @wq.task("local", isolation="process")
    def local() -> None:
        return None

    with pytest.raises(InvalidJob, match="define it at the top level of an importable module"):
        wq.process_tasks()


def test_a_tasks_concurrency_is_its_slots(wq: Queue) -> None:
    started: list[int] = []
    release = threading.Event()

    @wq.task("slow", concurrency=3)
    def slow(n: int) -> int:
        started.append(n)
        release.wait(20)
        return n

    jobs = slow.enqueue_many([(n,) for n in range(4)])
    wq.process_tasks()
    wait_for(lambda: len(started) == 3)
    assert never(lambda: len(started) > 3, 0.3)  # the fourth waits for a slot
    release.set()
    assert sorted(j.wait(20) for j in jobs) == [0, 1, 2, 3]


def test_process_tasks_serves_those_asked_for(wq: Queue) -> None:
    @wq.task("a")
    def a() -> str:
        return "a"

    @wq.task("b")
    def b() -> str:
        return "b"

    with pytest.raises(InvalidJob, match="no task of type 'c'"):
        wq.process_tasks(["c"])
    wq.process_tasks(["a"])
    job_a, job_b = a.enqueue(), b.enqueue()
    assert job_a.wait(20) == "a"
    assert wq.get_job(job_b.id).state == "inactive"  # type: ignore[arg-type]


def test_no_tasks_to_serve_is_an_error(wq: Queue) -> None:
    with pytest.raises(InvalidJob, match="no task is defined on this queue"):
        wq.process_tasks()


# -- schedules --------------------------------------------------------------------------------
def test_a_task_with_a_schedule_makes_it_when_served(wq: Queue) -> None:
    @wq.task("digest", cron="0 * * * *", tz="Europe/Paris", priority="low")
    def digest(kind: str = "hourly") -> None:
        return None

    assert wq.schedules() == []  # nothing written at definition
    wq.process_tasks()
    (made,) = wq.schedules()
    assert (made["key"], made["type"], made["cron"], made["tz"]) == (
        "digest",
        "digest",
        "0 * * * *",
        "Europe/Paris",
    )
    assert made["data"] == {"kind": "hourly"}
    assert made["options"]["priority"] == "low"


def test_every_and_cron_of_a_call(queue: Queue) -> None:
    @queue.task("ping")
    def ping(host: str, port: int = 80) -> None:
        return None

    made = ping.every(60_000, "example.com", port="8080")  # type: ignore[arg-type]
    assert (made["key"], made["every"], made["data"]) == (
        "ping",
        60_000,
        {"host": "example.com", "port": 8080},
    )
    with pytest.raises(InvalidJob, match="argument 'port'"):
        ping.cron("*/5 * * * *", "example.com", port="http")  # type: ignore[arg-type]


def test_a_scheduled_task_takes_no_argument_without_default(queue: Queue) -> None:
    with pytest.raises(InvalidJob, match="missing a required argument: 'who'"):

        @queue.task("hello", every=60_000)
        def hello(who: str) -> None: ...

    with pytest.raises(InvalidSchedule):

        @queue.task("bad", cron="not cron")
        def bad() -> None: ...


# -- the asyncio client -----------------------------------------------------------------------
def test_a_task_of_the_async_client_is_awaited_and_served_by_a_worker(
    redis_url: str, prefix: str, wq: Queue
) -> None:
    from kue_core.aio import AsyncQueue

    async def produce() -> tuple[int, Any, list[int]]:
        async with AsyncQueue(redis_url, prefix=prefix) as aq:

            @aq.task("square", priority="high")
            def square(n: int) -> int:
                return n * n

            with pytest.raises(InvalidJob, match="argument 'n'"):
                await square.enqueue("x")  # type: ignore[arg-type]
            job = await square.enqueue("7")  # type: ignore[arg-type]
            many = await square.options(priority="low").enqueue_many([(2,), {"n": 3}])
            # The same task enqueued on the blocking client, and served there.
            wq.process(square.type, 2, square.handle)
            blocking = square.on(wq).enqueue(4)
            assert blocking.wait(20) == 16
            typed = await square.result(job, 20)
            got = [await aq.get_job(j.id) for j in many]  # type: ignore[arg-type]
            return typed, (await aq.get_job(job.id)).priority(), [j.priority() for j in got]  # type: ignore[arg-type]

    typed, priority, others = asyncio.run(produce())
    assert (typed, priority, others) == (49, -10, [10, 10])


def test_a_task_of_the_blocking_client_enqueued_on_the_async_one(
    redis_url: str, prefix: str, queue: Queue
) -> None:
    from kue_core.aio import AsyncQueue

    @queue.task("greet", attempts=3)
    def greet(name: str) -> str:
        return f"hello {name}"

    async def produce() -> Any:
        async with AsyncQueue(redis_url, prefix=prefix) as aq:
            job = await greet.on(aq).enqueue("ada")
            return (await aq.get_job(job.id)).to_dict()  # type: ignore[arg-type]

    stored = asyncio.run(produce())
    assert (stored["type"], stored["data"], stored["attempts"]["max"]) == (
        "greet",
        {"name": "ada"},
        3,
    )


def test_flow_and_record_options_of_a_call(wq: Queue) -> None:
    @wq.task("step")
    def step(name: str) -> str:
        return name

    first = step.options(unique="daily-step").enqueue("first")
    again = step.options(unique="daily-step").enqueue("again")
    assert again.deduplicated and again.id == first.id
    after = step.options(depends_on=[first], tags=["flow-1"], search_keys=["name"]).enqueue("b")
    assert wq.get_job(after.id).state == "blocked"  # type: ignore[arg-type]
    assert wq.tagged("flow-1") == [after.id] and wq.search("b") == [after.id]
    wq.process_tasks()
    assert after.wait(20) == "b"
    assert wq.get_job(first.id).result == "first"  # type: ignore[arg-type]


# -- dataclass, model and TypedDict instances -------------------------------------------------
@pytest.mark.parametrize(("fn", "make", "received"), INSTANCES, ids=["dataclass", "model", "td"])
@pytest.mark.parametrize("client", ["Queue", "AsyncQueue"])
def test_an_instance_argument_is_checked_and_coerced_as_its_fields(
    client: str,
    fn: Callable[..., str],
    make: Callable[..., Any],
    received: str,
    wq: Queue,
    r: redis.Redis,
    redis_url: str,
    prefix: str,
    capfd: pytest.CaptureFixture[str],
) -> None:
    """An instance is checked as its dict form would be: a field that does not fit is refused
    before anything is written, one pydantic can coerce is stored coerced, and the worker
    calls the function with the argument's type, its field of the annotated type."""
    bad, good = make(account=1, label="a", cents="lots"), make(account="2", label="b", cents="7")
    as_dict = {"account": 3, "label": "c", "cents": "8"}
    refused = r"^task charge: argument 'order': Input should be a valid integer.* \(at cents\)$"
    before = snapshot(r, prefix)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # pydantic's serialisation warnings among them
        if client == "Queue":
            task = wq.task("charge")(fn)
            with pytest.raises(InvalidJob, match=refused):
                task.enqueue(bad)
            with pytest.raises(InvalidJob, match=refused):
                task.enqueue_many([(good,), (bad,)])
            assert written_since(r, prefix, before) == {}
            ids = [task.enqueue(good).id, task.enqueue(as_dict).id]
        else:
            from kue_core.aio import AsyncQueue

            async def produce() -> tuple[Any, list[Any]]:
                async with AsyncQueue(redis_url, prefix=prefix) as aq:
                    made = aq.task("charge")(fn)
                    with pytest.raises(InvalidJob, match=refused):
                        await made.enqueue(bad)
                    with pytest.raises(InvalidJob, match=refused):
                        await made.enqueue_many([(good,), (bad,)])
                    assert written_since(r, prefix, before) == {}
                    return made, [(await made.enqueue(good)).id, (await made.enqueue(as_dict)).id]

            task, ids = asyncio.run(produce())
    assert capfd.readouterr().err == ""
    stored = [wq.get_job(i).data for i in ids]
    assert stored == [
        {"order": {"account": 2, "label": "b", "cents": 7}},
        {"order": {"account": 3, "label": "c", "cents": 8}},
    ]
    wq.process(task.type, 1, task.handle)
    results = [wq.get_job(i).wait(20) for i in ids]
    assert results == [f"{received} int 7", f"{received} int 8"]
    assert capfd.readouterr().err == ""


def test_an_instance_inside_a_list_or_changed_after_it_was_made_is_checked(
    queue: Queue, r: redis.Redis
) -> None:
    @queue.task("batch")
    def batch(orders: list[Charge], first: ChargeModel | None = None) -> None: ...

    changed = ChargeModel(account=1, label="a", cents=1)
    changed.cents = "lots"  # type: ignore[assignment] # pydantic does not check assignments
    looped: list[Any] = []
    looped.append(looped)
    before = snapshot(r, queue.prefix)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(
            InvalidJob, match=r"argument 'orders': .*valid integer.*\(at 1\.cents\)"
        ):
            batch.enqueue([Charge(1, "a", 1), Charge(2, "b", "x")])  # type: ignore[arg-type]
        with pytest.raises(InvalidJob, match=r"argument 'first': .*valid integer.*\(at cents\)"):
            batch.enqueue([], changed)
        with pytest.raises(InvalidJob, match="argument 'orders': it contains itself"):
            batch.enqueue(looped)
        assert written_since(r, queue.prefix, before) == {}
        job = batch.enqueue(
            (Charge(1, "a", "5"),), ChargeModel.model_construct(account=2, label="b", cents="6")
        )  # type: ignore[arg-type]
    assert queue.get_job(job.id).data == {  # type: ignore[arg-type]
        "orders": [{"account": 1, "label": "a", "cents": 5}],
        "first": {"account": 2, "label": "b", "cents": 6},
    }


# -- depends_on -------------------------------------------------------------------------------
DEPENDS_ON_FORMS = (
    "a saved job, a job id (an integer or a string of digits), or a non-empty list or tuple of them"
)


def test_depends_on_of_a_task_takes_a_job_an_id_or_a_list_of_either(
    wq: Queue, r: redis.Redis
) -> None:
    @wq.task("fetch")
    def fetch(n: int) -> int:
        return n

    first, second = fetch.enqueue(1), fetch.enqueue(2)

    @wq.task("report", depends_on=first)  # at the decorator: each call's job waits for it
    def report(name: str) -> str:
        return name

    given = [first, first.id, str(first.id), [first, second.id], (str(first.id), second)]
    jobs = [report.options(depends_on=d).enqueue(f"r{i}") for i, d in enumerate(given)]
    jobs.append(report.enqueue("plain"))
    got = [[d["id"] for d in j.dependencies()] for j in jobs]
    both = [first.id, second.id]
    assert got == [[first.id]] * 3 + [both, both, [first.id]]
    assert {wq.get_job(j.id).state for j in jobs} == {"blocked"}  # type: ignore[arg-type]
    before = snapshot(r, wq.prefix)
    for bad, says in [
        (1.5, f"takes {DEPENDS_ON_FORMS}; got 1.5"),
        ({"id": first.id}, f"got {{'id': {first.id}}}"),
        (wq.create_job("draft"), "<Job None 'draft' None> is not saved yet"),
        ([], "got an empty list (to depend on no job, leave depends_on out)"),
    ]:
        with pytest.raises(InvalidJob) as refused:
            report.options(depends_on=bad)
        assert says in str(refused.value)
        with pytest.raises(InvalidJob) as refused:
            wq.task("other", depends_on=bad)(lambda: None)
        assert says in str(refused.value)
    assert written_since(r, wq.prefix, before) == {}
    wq.process_tasks()
    assert [j.wait(20) for j in jobs] == ["r0", "r1", "r2", "r3", "r4", "plain"]


def test_depends_on_of_a_task_of_the_async_client(
    redis_url: str, prefix: str, r: redis.Redis, queue: Queue
) -> None:
    from kue_core.aio import AsyncQueue

    async def produce() -> tuple[list[int], list[list[int]]]:
        async with AsyncQueue(redis_url, prefix=prefix) as aq:

            @aq.task("fetch")
            def fetch(n: int) -> int:
                return n

            first, second = await fetch.enqueue(1), await fetch.enqueue(2)

            @aq.task("report", depends_on=[first])
            def report(name: str) -> str:
                return name

            given = [first, first.id, str(first.id), [first, second.id], (first, second)]
            jobs = [await report.options(depends_on=d).enqueue("r") for d in given]
            jobs.append(await report.enqueue("plain"))
            before = snapshot(r, prefix)
            for bad in (1.5, {"id": 1}, aq.create_job("draft"), []):
                with pytest.raises(InvalidJob, match=re.escape(DEPENDS_ON_FORMS) + "|not saved"):
                    await report.options(depends_on=bad).enqueue("x")
            assert written_since(r, prefix, before) == {}
            ids = [first.id, second.id]
            return ids, [[d["id"] for d in await j.dependencies()] for j in jobs]

    both, got = asyncio.run(produce())
    one = both[:1]
    assert got == [one, one, one, both, both, one]
    assert queue.counts("report")["blocked"] == 6
