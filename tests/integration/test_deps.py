"""Dependencies and flows (``kue_core.features.flows``): blocked jobs, released exactly once by the
script that completes their last dependency, the failure policies, cascade removal, flows."""

from __future__ import annotations

import re
import threading
from typing import Any

import pytest
import redis

from kue_core import HasDependents, InvalidJob, InvalidTransition, Job, Queue
from kue_core.store import calls
from tests.conftest import finish, keys_under, wait_for


def _state(queue: Queue, job: Job | int) -> str:
    jid = job if isinstance(job, int) else job.id
    return queue.get_job(jid).state  # type: ignore[arg-type,return-value]


def _complete(queue: Queue, job_id: int, result: str = '{"ok":true}') -> None:
    """Complete job ``job_id`` as a worker would: claim jobs of its type until it is ours."""
    job_type = queue.get_job(job_id).type
    claimed = queue.scripts.call(calls.claim(queue.keys, job_type, "kue:test:1", 10_000))
    assert claimed and claimed != "paused" and claimed[0] == job_id, claimed
    outcome = queue.scripts.call(
        calls.complete(queue.keys, job_id, claimed[1]["lease"], result, None)
    ).outcome
    assert outcome == "complete"


def _fail_for_good(queue: Queue, job_id: int) -> None:
    job_type = queue.get_job(job_id).type
    claimed = queue.scripts.call(calls.claim(queue.keys, job_type, "kue:test:1", 10_000))
    assert claimed and claimed != "paused" and claimed[0] == job_id, claimed
    outcome = queue.scripts.call(
        calls.fail(queue.keys, job_id, claimed[1]["lease"], "boom", "boom", -1, None)
    ).outcome
    assert outcome == "failed"


def test_a_job_waits_blocked_until_its_last_dependency_completes(queue: Queue) -> None:
    a = queue.create_job("a").save()
    b = queue.create_job("b").save()
    c = queue.create_job("c", {"n": 1}).depends_on(a, b.id).save()
    assert c.state == "blocked" and _state(queue, c) == "blocked"
    assert queue.counts()["blocked"] == 1 and queue.counts("c")["blocked"] == 1
    assert queue.ids("blocked", "c") == [c.id]
    assert c.dependencies() == [
        {"id": a.id, "state": "inactive", "done": False},
        {"id": b.id, "state": "inactive", "done": False},
    ]
    assert a.dependents() == [{"id": c.id, "state": "blocked"}]
    # not claimable
    assert queue.scripts.call(calls.claim(queue.keys, "c", "kue:test:1", 10_000)) is None
    _complete(queue, a.id, '{"from":"a"}')  # type: ignore[arg-type]
    assert _state(queue, c) == "blocked"
    _complete(queue, b.id, "7")  # type: ignore[arg-type]
    loaded = queue.get_job(c.id)  # type: ignore[arg-type]
    assert loaded.state == "inactive" and queue.counts()["blocked"] == 0
    assert loaded.to_dict()["depends"] == 2
    entries = loaded.history()
    assert [e["state"] for e in entries] == ["blocked", "inactive"]
    assert entries[-1]["unblocked"] is True and entries[-1]["from"] == "blocked"
    assert loaded.children_results() == {a.id: {"from": "a"}, b.id: 7}
    assert [d["done"] for d in loaded.dependencies()] == [True, True]
    assert finish(queue, "c", True) == c.id


def test_both_clients_read_what_a_job_depends_on_alike(client: Any, sync_queue: Queue) -> None:
    a = sync_queue.create_job("a").save()
    b = sync_queue.create_job("b").save()
    c = sync_queue.create_job("c").depends_on(a, b).save()
    _complete(sync_queue, a.id, '{"from":"a"}')  # type: ignore[arg-type]
    job = client.get_job(c.id)
    assert job.dependencies() == [
        {"id": a.id, "state": "complete", "done": True},
        {"id": b.id, "state": "inactive", "done": False},
    ]
    assert client.dependents(a.id) == [{"id": c.id, "state": "blocked"}]
    assert job.children_results() == {a.id: {"from": "a"}}
    assert client.dependencies(a.id) == [] and client.children_results(999) == {}
    with pytest.raises(InvalidJob):
        client.dependents("x")


def test_depending_only_on_complete_jobs_saves_it_inactive(queue: Queue) -> None:
    a = queue.create_job("a").save()
    _complete(queue, a.id)  # type: ignore[arg-type]
    b = queue.create_job("b").depends_on(a).save()
    assert b.state == "inactive" and _state(queue, b) == "inactive"
    assert b.children_results() == {a.id: {"ok": True}}


def test_a_delayed_dependent_is_delayed_from_its_release(queue: Queue) -> None:
    a = queue.create_job("a").save()
    b = queue.create_job("b").delay(60_000).depends_on(a).save()
    assert _state(queue, b) == "blocked"
    _complete(queue, a.id)  # type: ignore[arg-type]
    loaded = queue.get_job(b.id)  # type: ignore[arg-type]
    assert loaded.state == "delayed"
    assert loaded.promote_at >= loaded.updated_at + 60_000  # type: ignore[operator]


def test_bad_dependencies_are_refused_and_write_nothing(
    queue: Queue, r: redis.Redis, prefix: str
) -> None:
    a = queue.create_job("a").save()
    before = keys_under(r, prefix)
    ids = r.get(queue.keys.ids)
    missing = r"^the b job depends on job 999999, which does not exist$"
    with pytest.raises(InvalidJob, match=missing):
        queue.create_job("b").depends_on(a.id, 999_999).save()  # type: ignore[arg-type]
    parent = queue.create_job("report").depends_on(999_998)
    with pytest.raises(InvalidJob, match=r"^job 2 of the flow \(report\) depends on job 999998"):
        queue.flow(parent, [queue.create_job("figures")])
    for bad in (0, -1, "x", None, 1.5, queue.create_job("unsaved")):
        with pytest.raises(InvalidJob):
            queue.create_job("b").depends_on(bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidJob):
        queue.create_job("b").depends_on()
    with pytest.raises(InvalidJob):
        queue.create_job("b").on_dependency_failure("retry")
    with pytest.raises(InvalidJob):
        a.depends_on(a)  # saved: too late, and no cycle can be made
    with pytest.raises(InvalidJob, match="unique"):
        queue.create_job("b").unique("k").depends_on(a).save()
    assert keys_under(r, prefix) == before and r.get(queue.keys.ids) == ids
    with pytest.raises(InvalidTransition):
        a.set_state("blocked")


FORMS = re.escape(
    "a saved job, a job id (an integer or a string of digits), or a non-empty list or tuple of them"
)


def test_depends_on_takes_a_job_an_id_or_a_list_or_tuple_of_either(client: Any) -> None:
    a = client.create_job("a").save()
    b = client.create_job("b").save()
    both = [a.id, b.id]
    forms = [
        ((a,), [a.id]),
        ((a.id,), [a.id]),
        ((str(b.id),), [b.id]),
        (([a, b],), both),
        (((a, str(b.id)),), both),
        (([a.id, str(b.id)],), both),
        ((a, [b]), both),
        ((a, b.id, a), both),  # each once
    ]
    for given, ids in forms:
        c = client.create_job("c").depends_on(*given).save()
        assert c.state == "blocked", given
        assert [d["id"] for d in c.dependencies()] == ids, given


def test_a_wrong_depends_on_names_what_was_given_and_writes_nothing(
    client: Any, r: redis.Redis, prefix: str
) -> None:
    a = client.create_job("a").save()
    before = keys_under(r, prefix)
    ids = r.get(client.keys.ids)
    unsaved = client.create_job("draft")
    cases: list[tuple[tuple[Any, ...], str]] = [
        ((1.5,), f"takes {FORMS}; got 1.5$"),
        (({"id": 1},), f"takes {FORMS}; got {{'id': 1}}$"),
        ((True,), "got True$"),
        ((0,), "got 0$"),
        (("x",), "got 'x'$"),
        (([a, 2.5],), r"got 2\.5 \(in \[<Job \d+ 'a' inactive>, 2\.5\]\)$"),
        (([[a.id]],), r"got \[\d+\] \(in \[\[\d+\]\]\)$"),
        (([],), rf"takes {FORMS}; got an empty list \(to depend on no job, leave depends_on out\)"),
        (((),), "got an empty tuple"),
        ((), "got nothing$"),
        ((unsaved,), r"^depends_on: <Job None 'draft' None> is not saved yet: save it first"),
        (([a, unsaved],), "'draft' None> is not saved yet"),
    ]
    for given, message in cases:
        with pytest.raises(InvalidJob, match=message):
            client.create_job("c").depends_on(*given)
        with pytest.raises(InvalidJob, match=message):  # nothing half-set on the way
            client.create_job("c").depends_on(*given).save()
    assert keys_under(r, prefix) == before and r.get(client.keys.ids) == ids


def test_wait_policy_stays_blocked_until_the_failed_job_is_retried(queue: Queue) -> None:
    a = queue.create_job("a").save()
    b = queue.create_job("b").depends_on(a).save()
    _fail_for_good(queue, a.id)  # type: ignore[arg-type]
    loaded = queue.get_job(b.id)  # type: ignore[arg-type]
    assert loaded.state == "blocked" and loaded.blocked_by == a.id
    assert loaded.to_dict()["blockedBy"] == a.id
    assert loaded.history()[-1] == {
        "state": "blocked",
        "at": loaded.history()[-1]["at"],
        "blocked_by": a.id,
    }
    queue.get_job(a.id).set_state("inactive")  # type: ignore[arg-type]  # retry by hand
    _complete(queue, a.id)  # type: ignore[arg-type]
    loaded = queue.get_job(b.id)  # type: ignore[arg-type]
    assert loaded.state == "inactive" and loaded.blocked_by is None


def test_fail_policy_fails_at_once_and_its_dependents_follow_theirs(queue: Queue) -> None:
    a = queue.create_job("a").save()
    b = queue.create_job("b").depends_on(a).on_dependency_failure("fail").save()
    c = queue.create_job("c").depends_on(b).on_dependency_failure("fail").save()
    d = queue.create_job("d").depends_on(b).save()  # waits
    e = queue.create_job("e").depends_on(b).on_dependency_failure("ignore").save()
    _fail_for_good(queue, a.id)  # type: ignore[arg-type]
    fb, fc = queue.get_job(b.id), queue.get_job(c.id)  # type: ignore[arg-type]
    assert fb.state == "failed" and fb.error == f"dependency {a.id} failed"
    assert fc.state == "failed" and fc.error == f"dependency {b.id} failed"
    assert queue.get_job(d.id).blocked_by == b.id  # type: ignore[arg-type]
    assert _state(queue, e) == "inactive"
    assert queue.totals()["failed"].get("b") == 1


def test_ignore_policy_counts_the_failed_job_as_done(queue: Queue) -> None:
    a = queue.create_job("a").save()
    ok = queue.create_job("ok").save()
    b = queue.create_job("b").depends_on(a, ok).on_dependency_failure("ignore").save()
    _fail_for_good(queue, a.id)  # type: ignore[arg-type]
    assert _state(queue, b) == "blocked"  # still waits for ok
    _complete(queue, ok.id)  # type: ignore[arg-type]
    assert _state(queue, b) == "inactive"
    assert b.children_results() == {ok.id: {"ok": True}}


def test_a_failed_dependency_at_save_applies_the_policy_at_once(queue: Queue) -> None:
    a = queue.create_job("a").save()
    _fail_for_good(queue, a.id)  # type: ignore[arg-type]
    assert queue.create_job("x").depends_on(a).on_dependency_failure("fail").save().state == (
        "failed"
    )
    assert queue.create_job("x").depends_on(a).on_dependency_failure("ignore").save().state == (
        "inactive"
    )
    waiting = queue.create_job("x").depends_on(a).save()
    assert waiting.state == "blocked" and queue.get_job(waiting.id).blocked_by == a.id  # type: ignore[arg-type]


def test_cancel_and_failing_by_hand_are_failures_for_dependents(queue: Queue) -> None:
    a = queue.create_job("a").save()
    b = queue.create_job("b").save()
    da = queue.create_job("x").depends_on(a).on_dependency_failure("fail").save()
    db = queue.create_job("x").depends_on(b).on_dependency_failure("fail").save()
    a.cancel("no longer needed")
    queue.get_job(b.id).set_state("failed")  # type: ignore[arg-type]
    assert _state(queue, da) == "failed" and _state(queue, db) == "failed"


def test_completing_by_hand_releases_dependents(queue: Queue) -> None:
    a = queue.create_job("a").save()
    b = queue.create_job("b").depends_on(a).save()
    queue.get_job(a.id).set_state("complete")  # type: ignore[arg-type]
    assert _state(queue, b) == "inactive"


def test_removing_a_job_others_wait_for_is_refused_unless_cascade(
    queue: Queue, r: redis.Redis, prefix: str
) -> None:
    a = queue.create_job("a").save()
    b = queue.create_job("b").depends_on(a).save()
    c = queue.create_job("c").depends_on(b).save()
    other = queue.create_job("other").save()
    with pytest.raises(HasDependents) as refused:
        a.remove()
    assert refused.value.dependents == [b.id] and str(b.id) in str(refused.value)
    assert _state(queue, a) == "inactive"
    assert sorted(a.remove(cascade=True)) == sorted([a.id, b.id, c.id])
    left = keys_under(r, prefix)
    for gone in (a.id, b.id, c.id):
        assert not any(f":job:{gone}" in k and not k.endswith(f":job:{gone}0") for k in left)
    assert queue.counts()["blocked"] == 0 and _state(queue, other) == "inactive"
    # A completed dependency is no longer waited for: it goes, and the dependent keeps its id.
    d = queue.create_job("d").save()
    e = queue.create_job("e").depends_on(d).save()
    _complete(queue, d.id)  # type: ignore[arg-type]
    assert d.remove() == [d.id]
    assert e.dependencies() == [{"id": d.id, "state": None, "done": True}]
    assert e.children_results() == {d.id: {"ok": True}}
    # Removing a blocked job: its dependency forgets it.
    f = queue.create_job("f").save()
    g = queue.create_job("g").depends_on(f).save()
    g.remove()
    assert f.dependents() == [] and f.remove() == [f.id]


def test_a_flow_of_three_levels_across_three_types_runs_bottom_up(queue: Queue) -> None:
    order: list[int] = []
    lock = threading.Lock()

    def handler(job: Job) -> Any:
        with lock:
            order.append(job.id)  # type: ignore[arg-type]
        if job.type == "assemble":
            return {"parts": sorted(r["part"] for r in job.children_results().values())}
        if job.type == "render":
            return {"part": job.data["n"], "from": sorted(job.children_results())}
        return {"part": job.data["n"]}

    leaves = [queue.create_job("fetch", {"n": n}) for n in range(4)]
    mids = [queue.create_job("render", {"n": 10 + n}) for n in range(2)]
    top = queue.create_job("assemble", {"title": "report"})
    parent = queue.flow(top, [(mids[0], leaves[:2]), (mids[1], leaves[2:])])
    assert parent is top and top.state == "blocked"
    assert all(j.state == "inactive" for j in leaves)
    assert all(j.state == "blocked" for j in mids)
    assert [d["id"] for d in top.dependencies()] == [m.id for m in mids]
    for t in ("fetch", "render", "assemble"):
        queue.process(t, 2, handler)
    wait_for(lambda: _state(queue, top) == "complete", timeout=10)
    assert queue.get_job(top.id).result == {"parts": [10, 11]}  # type: ignore[arg-type]
    assert queue.get_job(mids[0].id).result == {  # type: ignore[arg-type]
        "part": 10,
        "from": [leaves[0].id, leaves[1].id],
    }
    pos = {jid: i for i, jid in enumerate(order)}
    for mid, kids in ((mids[0], leaves[:2]), (mids[1], leaves[2:])):
        assert all(pos[k.id] < pos[mid.id] for k in kids)  # type: ignore[index]
        assert pos[mid.id] < pos[top.id]  # type: ignore[index]
    queue.shutdown()


def test_a_flow_is_all_or_nothing(queue: Queue, r: redis.Redis, prefix: str) -> None:
    a = queue.create_job("a").save()
    before = keys_under(r, prefix)
    bad_child = queue.create_job("kid").depends_on(999_999)
    with pytest.raises(InvalidJob):
        queue.flow(queue.create_job("p"), [queue.create_job("ok"), bad_child])
    twice = queue.create_job("kid")
    for children in ([twice, twice], [a], [(queue.create_job("k"), "x")], "x", [42]):
        with pytest.raises(InvalidJob):
            queue.flow(queue.create_job("p"), children)  # type: ignore[arg-type]
    assert keys_under(r, prefix) == before


@pytest.mark.slow
def test_a_chain_of_1000_completes_in_order(queue: Queue) -> None:
    prev = queue.create_job("link", {"n": 0}).save()
    ids = [prev.id]
    for n in range(1, 1000):
        prev = queue.create_job("link", {"n": n}).depends_on(prev).save()
        ids.append(prev.id)
    assert queue.counts("link") == {**queue.counts("link"), "inactive": 1, "blocked": 999}
    done = [finish(queue, "link", True) for _ in ids]
    assert done == ids
    assert queue.counts("link")["complete"] == 1000 and queue.counts("link")["blocked"] == 0
    for jid in ids[1:]:
        states = [e["state"] for e in queue.history(jid)]
        assert states.count("inactive") == 1  # released once


@pytest.mark.slow
def test_a_fan_in_of_10000_children_releases_the_parent_once(queue: Queue) -> None:
    kids = [queue.create_job("kid", {"n": n}) for n in range(10_000)]
    parent = queue.flow(queue.create_job("sum"), kids)
    assert queue.counts("kid")["inactive"] == 10_000 and parent.state == "blocked"
    for _ in range(9_999):
        finish(queue, "kid", True)
    assert _state(queue, parent) == "blocked"
    finish(queue, "kid", True)
    loaded = queue.get_job(parent.id)  # type: ignore[arg-type]
    assert loaded.state == "inactive"
    assert [e["state"] for e in loaded.history()] == ["blocked", "inactive"]
    assert len(loaded.children_results()) == 10_000
    claimed = queue.scripts.call(calls.claim(queue.keys, "sum", "kue:test:1", 10_000))
    assert claimed not in (None, "paused")
    assert queue.scripts.call(calls.claim(queue.keys, "sum", "kue:test:1", 10_000)) is None  # once


def test_the_sweep_releases_dependents_of_jobs_ended_without_our_scripts(
    queue: Queue, r: redis.Redis
) -> None:
    """What a Node Kue worker does to complete or fail a job (its own commands), then the
    sweep every worker process runs."""
    k = queue.keys
    a = queue.create_job("a").save()
    b = queue.create_job("b").save()
    da = queue.create_job("x").depends_on(a).save()
    db = queue.create_job("x").depends_on(b).on_dependency_failure("fail").save()
    assert r.zcard(k.awaited) == 2
    for job, state in ((a, "complete"), (b, "failed")):
        member = f"{len(str(job.id)):02d}|{job.id}"
        r.zrem(k.state("inactive"), member)
        r.zrem(k.type_state(job.type, "inactive"), member)
        r.zadd(k.state(state), {member: 0})
        r.zadd(k.type_state(job.type, state), {member: 0})
        r.hset(k.job(job.id), mapping={"state": state, "result": '"node"'})  # type: ignore[arg-type]
    assert _state(queue, da) == "blocked"
    assert queue.scripts.call(calls.unblock(queue.keys, 100)) == 2
    assert _state(queue, da) == "inactive" and _state(queue, db) == "failed"
    assert da.children_results() == {a.id: "node"}
    assert r.zcard(k.awaited) == 0 and queue.scripts.call(calls.unblock(queue.keys, 100)) == 0


def test_a_worker_process_sweeps_every_second(queue: Queue, r: redis.Redis) -> None:
    a = queue.create_job("a").save()
    b = queue.create_job("b").depends_on(a).save()
    member = f"{len(str(a.id)):02d}|{a.id}"
    r.zrem(queue.keys.state("inactive"), member)
    r.zrem(queue.keys.type_state("a", "inactive"), member)
    r.hset(queue.keys.job(a.id), "state", "complete")  # type: ignore[arg-type]
    queue.process("unrelated", 1, lambda job: None)
    wait_for(lambda: _state(queue, b) == "inactive", timeout=3)
    queue.shutdown()


def test_a_failed_dependency_retried_by_hand_is_awaited_again(queue: Queue, r: redis.Redis) -> None:
    """Retried, it may be completed by a Node Kue worker: the sweep must look for it again."""
    a = queue.create_job("a").save()
    b = queue.create_job("b").depends_on(a).save()
    _fail_for_good(queue, a.id)  # type: ignore[arg-type]
    assert r.zcard(queue.keys.awaited) == 0
    queue.get_job(a.id).set_state("inactive")  # type: ignore[arg-type]
    assert r.zcard(queue.keys.awaited) == 1
    r.hset(queue.keys.job(a.id), "state", "complete")  # type: ignore[arg-type]  # as Node Kue
    assert (
        queue.scripts.call(calls.unblock(queue.keys, 100)) == 1 and _state(queue, b) == "inactive"
    )


def test_a_bulk_remove_is_a_failure_for_the_jobs_waiting(queue: Queue) -> None:
    a = queue.create_job("a").save()
    b = queue.create_job("a").save()
    fails = queue.create_job("x").depends_on(a).on_dependency_failure("fail").save()
    waits = queue.create_job("x").depends_on(b).save()
    assert queue.remove_all("inactive", "a") == 2
    assert _state(queue, fails) == "failed"
    assert queue.get_job(waits.id).blocked_by == b.id  # type: ignore[arg-type]
    assert b.dependents() == []  # its set went with it


def test_updating_a_blocked_job_keeps_its_delay_for_its_release(queue: Queue) -> None:
    a = queue.create_job("a").save()
    b = queue.create_job("b").depends_on(a).save()
    b.data = {"changed": True}
    b.delay(60_000).update()
    assert _state(queue, b) == "blocked"
    _complete(queue, a.id)  # type: ignore[arg-type]
    loaded = queue.get_job(b.id)  # type: ignore[arg-type]
    assert loaded.state == "delayed" and loaded.data == {"changed": True}
    assert loaded.promote_at >= loaded.updated_at + 60_000  # type: ignore[operator]
