"""Pure policy code: backoff, priorities, states, zid, validation. No Redis."""

from __future__ import annotations

from datetime import timedelta

import pytest

from kue_core import InvalidJob, JobState
from kue_core.base.keys import Keys, job_id_from_zid, zid
from kue_core.jobs.backoff import normalize, retry_delay
from kue_core.jobs.job import parse_priority, parse_state, to_json, validate_type


def test_zid_is_kues_fifo_member() -> None:
    assert zid(7) == "01|7"
    assert zid(17) == "02|17"
    assert zid(123) == "03|123"
    assert job_id_from_zid("03|123") == 123
    # Equal scores sort by member: the zid keeps numeric order.
    assert sorted([zid(100), zid(9), zid(10)]) == [zid(9), zid(10), zid(100)]


def test_keys_follow_kue_layout() -> None:
    k = Keys("q")
    assert (k.ids, k.jobs, k.types, k.work_time, k.events) == (
        "q:ids",
        "q:jobs",
        "q:job:types",
        "q:stats:work-time",
        "q:events",
    )
    assert k.job(5) == "q:job:5" and k.log(5) == "q:job:5:log"
    assert k.state("inactive") == "q:jobs:inactive"
    assert k.type_state("email", "failed") == "q:jobs:email:failed"
    assert k.tokens("email") == "q:email:jobs"


@pytest.mark.parametrize(
    ("level", "value"),
    [
        ("low", 10),
        ("normal", 0),
        ("medium", -5),
        ("high", -10),
        ("critical", -15),
        (7, 7),
        (-99, -99),
    ],
)
def test_priorities(level: str | int, value: int) -> None:
    assert parse_priority(level) == value


@pytest.mark.parametrize("bad", ["urgent", "HIGH", "", True, 1.5, None, 2**40])
def test_bad_priority_names_the_field(bad: object) -> None:
    with pytest.raises(InvalidJob, match="priority"):
        parse_priority(bad)


def test_states() -> None:
    assert parse_state(JobState.FAILED) == "failed"
    assert parse_state("delayed") == "delayed"
    with pytest.raises(InvalidJob, match="state"):
        parse_state("bogus")


@pytest.mark.parametrize(
    "bad", [None, 5, "", "   ", "a\x00b", "a\nb", "x" * 300, "\ud800", "unique"]
)
def test_bad_types(bad: object) -> None:
    with pytest.raises(InvalidJob, match="type"):
        validate_type(bad)


def test_unicode_type_is_fine() -> None:
    assert validate_type("письмо:✉") == "письмо:✉"


@pytest.mark.parametrize("bad", [{1, 2}, object(), float("nan"), {"x": float("inf")}])
def test_data_must_be_json(bad: object) -> None:
    with pytest.raises(InvalidJob, match="data"):
        to_json(bad, "data")


def test_backoff_normalize() -> None:
    assert normalize(None) is None and normalize(False) is None
    assert normalize(True) is True
    assert normalize({"type": "fixed", "delay": 500}) == {"type": "fixed", "delay": 500}
    assert normalize({"type": "exponential", "delay": 100, "max_delay": 900, "jitter": 0.5}) == {
        "type": "exponential",
        "delay": 100,
        "maxDelay": 900,
        "jitter": 0.5,
    }
    for bad in (
        "0; require('fs')",
        {"type": "linear"},
        {"type": "fixed", "delay": -1},
        {"type": "fixed", "jitter": 2},
        {"type": "fixed", "extra": 1},
        {"type": "fixed", "maxDelay": 5, "max_delay": 9},  # the name and its former one
        5,
    ):
        with pytest.raises(InvalidJob, match="backoff"):
            normalize(bad)


def test_retry_delay_follows_kue() -> None:
    exp = {"type": "exponential", "delay": 50}
    # Kue, observed: delay 50 gives retry delays 25, 75, then 175, 375.
    assert [retry_delay(exp, n) for n in (1, 2, 3, 4)] == [25, 75, 175, 375]
    assert retry_delay({"type": "exponential", "delay": 50, "maxDelay": 100}, 4) == 75
    assert retry_delay({"type": "fixed", "delay": 300}, 3) == 300
    assert retry_delay({"type": "fixed"}, 1, job_delay=200) == 200
    assert retry_delay(True, 2, job_delay=1000) == 1000
    assert retry_delay(None, 1) is None
    jittered = {"type": "fixed", "delay": 1000, "jitter": 0.5}
    assert retry_delay(jittered, 1, rand=lambda: 0.0) == 500
    assert retry_delay(jittered, 1, rand=lambda: 1.0) == 1000


def test_delay_accepts_timedelta(queue) -> None:  # type: ignore[no-untyped-def]
    job = queue.create_job("t").delay(timedelta(seconds=2))
    assert job.delay() == 2000
    with pytest.raises(InvalidJob, match="delay"):
        job.delay(-1)
    with pytest.raises(InvalidJob, match="attempts"):
        job.attempts(0)
    with pytest.raises(InvalidJob, match="ttl"):
        job.ttl(0)


def test_any_python_string_is_stored_as_ascii_json() -> None:
    assert to_json({"s": "é\x00\udc00"}, "data") == '{"s":"\\u00e9\\u0000\\udc00"}'


def test_delays_stay_below_what_lua_counts_exactly(queue) -> None:  # type: ignore[no-untyped-def]
    from kue_core import defaults

    job = queue.create_job("t")
    for setter in (job.delay, job.ttl):
        setter(defaults.MAX_MS)
        with pytest.raises(InvalidJob, match="ms"):
            setter(defaults.MAX_MS + 1)
    with pytest.raises(InvalidJob, match=r"backoff\.delay"):
        normalize({"type": "fixed", "delay": 1e19})
    # Exponential backoff without maxDelay, after very many attempts.
    assert retry_delay({"type": "exponential", "delay": 10**12}, 500) == defaults.MAX_MS
