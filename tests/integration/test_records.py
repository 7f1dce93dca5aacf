"""Tags and tracking (``kue_core.features.records``): kept by the saving, tagging and removing
scripts,
so that the tag sets, their counts and the jobs always agree. On both clients (``client``)."""

from __future__ import annotations

from typing import Any

import pytest
import redis

from kue_core import InvalidJob, JobNotFound, Queue, defaults
from kue_core.aio import AsyncQueue
from tests.clients import run
from tests.conftest import keys_under


def test_tags_at_save_show_in_the_json_the_tag_sets_and_the_counts(client: Any) -> None:
    queue = client
    a = queue.create_job("email", {"to": "a"}).tags("customer:42", "vip", "vip").save()
    b = queue.create_job("email").tags("vip").save()
    c = queue.create_job("video").save()
    assert a.tags() == ["customer:42", "vip"]  # repeats dropped, order kept
    assert queue.get_job(a.id).to_dict()["tags"] == ["customer:42", "vip"]  # type: ignore[arg-type]
    assert "tags" not in queue.get_job(c.id).to_dict()  # type: ignore[arg-type]
    assert queue.tagged("vip") == [b.id, a.id]  # most recently tagged first
    assert queue.tagged("vip").total == 2
    assert queue.tagged("vip", offset=1, count=5) == [a.id]
    assert queue.tagged("customer:42") == [a.id]
    assert queue.tagged("nobody") == [] and queue.tagged("nobody").total == 0
    assert queue.tagged("vip", count=0) == [] and queue.tagged("vip", count=0).total == 2
    assert queue.tags() == {"vip": 2, "customer:42": 1}  # most used first


def test_tag_and_untag_a_saved_job(client: Any, r: redis.Redis) -> None:
    queue = client
    job = queue.create_job("email").tags("a").save()
    assert queue.tag(job.id, "b", "a", "c").tags() == ["a", "b", "c"]
    assert queue.get_job(job.id).tags() == ["a", "b", "c"]  # type: ignore[arg-type]
    assert queue.untag(job.id, "a", "never-had").tags() == ["b", "c"]  # type: ignore[arg-type]
    assert queue.tags() == {"b": 1, "c": 1}
    assert queue.tagged("a") == []
    job = queue.untag(job.id, "b", "c")
    assert job.tags() == [] and queue.tags() == {}
    assert not r.exists(queue.keys.tag("b"), queue.keys.tag("c"), queue.keys.tags)
    assert "tags" not in queue.get_job(job.id).to_dict()  # type: ignore[arg-type]


def test_an_unsaved_job_gathers_its_tags(client: Any) -> None:
    queue = client
    job = queue.create_job("email").tag("x").tag("y", "x").untag("x")
    assert job.tags() == ["y"]
    job.save()
    assert queue.tagged("y") == [job.id] and queue.tagged("x") == []
    with pytest.raises(InvalidJob, match="tag\\(\\) and untag\\(\\)"):
        job.tags("z")


@pytest.mark.parametrize(
    "bad",
    [("",), ("  ",), ("a\nb",), (7,), (None,), ("x" * (defaults.MAX_TAG + 1),), ("\ud800",)],
)
def test_bad_tags_are_refused_and_change_nothing(client: Any, r: redis.Redis, bad: tuple) -> None:
    queue = client
    job = queue.create_job("email").tags("kept").save()
    before = keys_under(r, queue.prefix)
    with pytest.raises(InvalidJob):
        queue.create_job("email").tags(*bad)
    with pytest.raises(InvalidJob):
        queue.tag(job.id, *bad)
    with pytest.raises(InvalidJob):
        queue.untag(job.id, *bad)
    with pytest.raises(InvalidJob):
        queue.tag(job.id)
    assert keys_under(r, queue.prefix) == before
    assert queue.get_job(job.id).tags() == ["kept"]  # type: ignore[arg-type]


def test_at_most_max_tags_per_job_checked_in_the_script_too(client: Any) -> None:
    queue = client
    many = [f"t{i}" for i in range(defaults.MAX_TAGS)]
    job = queue.create_job("email").tags(*many).save()
    with pytest.raises(InvalidJob, match="at most"):
        queue.create_job("email").tags(*many, "one-more")
    with pytest.raises(InvalidJob, match="at most"):
        queue.tag(job.id, "one-more")  # the script counts the tags the job has: nothing is written
    assert queue.get_job(job.id).tags() == many  # type: ignore[arg-type]
    assert queue.tagged("one-more") == [] and "one-more" not in queue.tags()


def test_tagging_an_unknown_job_is_not_found(client: Any) -> None:
    queue = client
    with pytest.raises(JobNotFound):
        queue.tag(999, "x")
    job = queue.create_job("email").save()
    job.remove()
    with pytest.raises(JobNotFound):
        queue.tag(job.id, "x")
    with pytest.raises(JobNotFound):
        queue.track(job.id)
    assert queue.tags() == {} and queue.tracked() == []


def test_track_and_untrack(client: Any, r: redis.Redis) -> None:
    queue = client
    a = queue.create_job("email").track().save()
    b = queue.create_job("email").save()
    assert a.tracked and not b.tracked
    queue.track(b.id)  # type: ignore[arg-type]
    assert [j.id for j in queue.tracked()] == [b.id, a.id]  # most recently tracked first
    assert queue.get_job(b.id).to_dict()["tracked"] is True  # type: ignore[arg-type]
    queue.track(a.id, on=False)  # type: ignore[arg-type]
    assert [j.id for j in queue.tracked()] == [b.id]
    assert "tracked" not in queue.get_job(a.id).to_dict()  # type: ignore[arg-type]
    queue.track(b.id, on=False)
    assert queue.tracked() == [] and not r.exists(queue.keys.tracked)


def test_removing_a_job_removes_its_records(client: Any, r: redis.Redis) -> None:
    queue = client
    before = keys_under(r, queue.prefix)
    job = (
        queue.create_job("email", {"title": "Quarterly report", "to": "ada@example.com"})
        .tags("customer:42", "vip")
        .search_keys("to")
        .track()
        .save()
    )
    other = queue.create_job("email", {"title": "Quarterly"}).tags("vip").save()
    job.remove()
    assert queue.tags() == {"vip": 1}
    assert queue.tracked() == []
    assert queue.search("report") == [] and queue.search("quarterly") == [other.id]
    other.remove()
    left = keys_under(r, queue.prefix) - before
    # Kue's own keys stay as Kue leaves them (the id counter, types, wake-up list).
    assert left == {queue.keys.ids, queue.keys.types, queue.keys.tokens("email")}


def test_save_many_and_unique_jobs_keep_their_records(client: Any) -> None:
    queue = client
    jobs = queue.save_many(
        [queue.create_job("email", {"title": f"note {i}"}).tags("batch") for i in range(3)]
    )
    ids = [j.id for j in jobs]
    assert queue.tagged("batch") == ids[::-1]
    assert queue.search("note") == ids[::-1]
    u = queue.create_job("email", {"title": "one only"}).unique("k").tags("u").track().save()
    again = queue.create_job("email", {"title": "one only"}).unique("k").tags("u2").save()
    assert again.deduplicated and again.id == u.id
    assert queue.tags() == {"batch": 3, "u": 1}  # the duplicate saved nothing
    assert [j.id for j in queue.tracked()] == [u.id]


def test_a_job_kue_wrote_can_be_tagged(client: Any, r: redis.Redis) -> None:
    queue = client
    r.hset(queue.keys.job(77), mapping={"type": "email", "data": "{}", "state": "inactive"})
    r.hset(queue.keys.job(78), mapping={"type": "email", "state": "inactive", "tags": "junk"})
    assert queue.tag(77, "from-node").tags() == ["from-node"]
    assert queue.tag(78, "x").tags() == ["x"]  # a field another client wrote is replaced
    assert queue.tagged("from-node") == [77]


def test_a_saved_jobs_own_tag_methods_write_at_once_on_a_queue_job(sync_queue: Queue) -> None:
    job = sync_queue.create_job("email").tags("a").save()
    assert job.tag("b", "a").tags() == ["a", "b"]
    assert job.untag("a").tags() == ["b"]
    assert job.track().tracked
    assert sync_queue.get_job(job.id).to_dict()["tags"] == ["b"]  # type: ignore[arg-type]
    assert [j.id for j in sync_queue.tracked()] == [job.id]
    job.untrack()
    assert sync_queue.tracked() == []


async def _saved_async_job(url: str, prefix: str) -> list[str]:
    async with AsyncQueue(url, prefix) as queue:
        job = await queue.create_job("email").tags("a").save()
        refused = []
        for change in (lambda: job.tag("b"), lambda: job.untag("a"), job.track, job.untrack):
            try:
                change()
            except InvalidJob as e:
                refused.append(str(e))
        assert (await queue.get_job(job.id)).tags() == ["a"]  # type: ignore[arg-type]
        return refused


def test_a_saved_async_job_says_its_tags_change_through_the_queue(
    redis_url: str, prefix: str
) -> None:
    refused = run(_saved_async_job(redis_url, prefix))
    assert len(refused) == 4
    assert all("await queue." in e for e in refused)
