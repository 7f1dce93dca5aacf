"""Search through the index (``kue_core.features.search``): words of types, titles, search keys and
tags; every word must match, the last may be a prefix; filters, pages, and re-indexing when
data changes."""

from __future__ import annotations

from typing import Any

import pytest
import redis

from kue_core import InvalidJob, Queue, defaults


@pytest.fixture
def queue(client: Any) -> Any:
    """Every test here runs on both clients: ``Queue`` and ``AsyncQueue`` (see
    ``client`` in tests/conftest.py)."""
    return client


@pytest.fixture
def jobs(queue: Queue) -> dict[str, int]:
    made = {
        "ada": queue.create_job("send-email", {"title": "Welcome Ada", "to": "ada@example.com"})
        .search_keys("to")
        .save(),
        "bob": queue.create_job("send-email", {"title": "Invoice 2024-07 for Bob"}).save(),
        "vid": queue.create_job("video", {"title": "Welcome video"}).tags("Customer:42").save(),
        "raw": queue.create_job("video", {"to": "ada@example.com"}).save(),  # no search keys
    }
    return {name: job.id for name, job in made.items()}  # type: ignore[misc]


def test_words_of_titles_search_keys_tags_and_types(queue: Queue, jobs: dict[str, int]) -> None:
    assert queue.search("welcome") == [jobs["vid"], jobs["ada"]]  # newest first
    assert queue.search("WELCOME").total == 2  # case does not matter
    assert queue.search("ada@example.com") == [jobs["ada"]]  # a search key; raw has none
    assert queue.search("customer:42") == [jobs["vid"]]  # a tag's words
    assert queue.search("email") == [jobs["bob"], jobs["ada"]]  # a word of the type
    assert queue.search("video welcome") == [jobs["vid"]]  # every word must match
    assert queue.search("2024 07") == [jobs["bob"]]
    assert queue.search("nothing") == [] and queue.search("nothing").total == 0


def test_the_last_word_may_be_a_prefix(queue: Queue, jobs: dict[str, int]) -> None:
    assert queue.search("wel") == [jobs["vid"], jobs["ada"]]
    assert queue.search("inv") == [jobs["bob"]]
    assert queue.search("vid") == [jobs["raw"], jobs["vid"]]  # type "video" and word "video"
    assert queue.search("welcome ad") == [jobs["ada"]]
    assert queue.search("welcome vid") == [jobs["vid"]]
    assert queue.search("wel ada") == []  # only the last word is a prefix


def test_filters_and_pages(queue: Queue, jobs: dict[str, int]) -> None:
    queue.get_job(jobs["ada"]).set_state("failed")
    assert queue.search("welcome", state="failed") == [jobs["ada"]]
    assert queue.search("welcome", state="inactive") == [jobs["vid"]]
    assert queue.search("welcome", job_type="video") == [jobs["vid"]]
    assert queue.search("welcome", job_type="video", state="failed") == []
    assert queue.search("welcome", job_type="send-email", state="failed") == [jobs["ada"]]
    page = queue.search("welcome", offset=1, count=1)
    assert page == [jobs["ada"]] and page.total == 2 and page.exact
    assert queue.search("welcome", count=0) == [] and queue.search("welcome", count=0).total == 2
    vid = queue.search("vid", offset=1, count=1)  # a type's jobs and a word's, together
    assert vid == [jobs["vid"]] and vid.total == 2
    for bad in ({"state": "gone"}, {"offset": -1}, {"count": 1001}, {"count": "5"}):
        with pytest.raises(InvalidJob):
            queue.search("welcome", **bad)  # type: ignore[arg-type]
    for text in ("", "  ", "--", None, 5):
        with pytest.raises(InvalidJob):
            queue.search(text)  # type: ignore[arg-type]


def test_an_id_typed_comes_first(queue: Queue, jobs: dict[str, int]) -> None:
    assert queue.search(str(jobs["raw"]))[0] == jobs["raw"]  # then what its words find
    assert queue.search(f"#{jobs['bob']}") == [jobs["bob"]]
    assert queue.search("999999") == []


def test_changed_data_is_indexed_again(queue: Queue, r: redis.Redis, jobs: dict[str, int]) -> None:
    queue.update_data(jobs["bob"], {"title": "Receipt for Bob"})
    assert queue.search("invoice") == [] and queue.search("receipt") == [jobs["bob"]]
    job = queue.get_job(jobs["ada"])
    job.data = {"title": "Goodbye", "to": "ada@example.org"}
    job.update()
    assert queue.search("ada@example.org") == [jobs["ada"]]  # its search keys still apply
    assert queue.search("welcome") == [jobs["vid"]]
    vid = queue.get_job(jobs["vid"])
    vid.data = {}
    vid.update()
    assert queue.search("customer") == [jobs["vid"]]  # its tags' words stay
    assert queue.search("welcome") == []
    assert r.zcard(queue.keys.word("welcome")) == 0
    assert r.zscore(queue.keys.words, "welcome") is None  # the word went


def test_debounce_indexes_the_latest_data(queue: Queue) -> None:
    first = queue.create_job("t", {"title": "draft one"}).unique("d", "debounce").delay(60_000)
    first.save()
    second = queue.create_job("t", {"title": "draft two"}).unique("d", "debounce").delay(60_000)
    second.save()
    assert second.deduplicated and second.id == first.id
    assert queue.search("two") == [first.id] and queue.search("one") == []


def test_a_type_name_alone_finds_its_jobs_newest_first(queue: Queue) -> None:
    # Its jobs are in the type's sets, scored by priority: the page still goes by id.
    first = queue.create_job("zebra").save().id
    second = queue.create_job("zebra").priority("high").save().id
    found = queue.search("zebra")
    assert found == [second, first] and found.total == 2


def test_a_word_checked_job_by_job_past_the_scan_bound_is_a_lower_bound(
    queue: Queue, monkeypatch: pytest.MonkeyPatch
) -> None:
    ids = [
        j.id for j in queue.save_many([queue.create_job("video", {"title": "x"}) for _ in range(6)])
    ]
    monkeypatch.setattr(defaults, "SEARCH_SCAN", 4)
    found = queue.search("x vid")  # "vid" is a type's word: each candidate is checked
    assert found == ids[::-1][:4] and found.total == 4 and not found.exact
    monkeypatch.setattr(defaults, "SEARCH_SCAN", 100)
    found = queue.search("x vid")
    assert found.total == 6 and found.exact


@pytest.mark.slow
@pytest.mark.timeout(180)  # 100,000 saves: 10-30 s alone, more under coverage and load
def test_a_job_older_than_the_newest_100000_is_still_found(
    sync_queue: Queue, r: redis.Redis
) -> None:
    old = sync_queue.create_job("report", {"title": "needle in the haystack"}).save()
    batch = 5000
    for _ in range(100_000 // batch):
        sync_queue.save_many([sync_queue.create_job("report", {"n": i}) for i in range(batch)])
    _find_the_needle(sync_queue, r, old.id)  # type: ignore[arg-type]


def _find_the_needle(queue: Queue, r: redis.Redis, old: int) -> None:
    assert r.zcard(queue.keys.jobs) == 100_001
    found = queue.search("needle")
    assert found == [old] and found.total == 1
    assert queue.search("haystack", state="inactive", job_type="report") == [old]
    with r.monitor() as monitor:  # the query touched the rarest word's set, not the jobs
        queue.search("needle")
        queue.client.get(f"{queue.prefix}:end")
        commands = []
        while not commands or f"{queue.prefix}:end" not in commands[-1]:
            command = monitor.next_command()["command"]
            if queue.prefix in command and not command.startswith(("EVALSHA", "FCALL")):
                commands.append(command)
    assert len(commands) < 20
    assert not any(c.startswith(("HGET", "ZUNIONSTORE")) for c in commands), commands


def test_search_keys_as_one_list_as_kues_searchkeys(queue: Queue) -> None:
    job = queue.create_job("mail", {"to": "zed@example.com", "city": "Lyon"})
    job = job.search_keys(["to", "city"])  # the job, for chaining
    assert job.search_keys() == ["to", "city"]
    job.save()
    assert queue.search("lyon") == [job.id] and queue.search("zed") == [job.id]
    with pytest.raises(InvalidJob, match="give at least one search key"):
        queue.create_job("mail", {}).search_keys([])
