"""A whole flow as a tree (``queue.flow_tree``, ``kue_core.jobs.flow_tree``): found from any job
of it, breadth first from the root, in pages, on both clients."""

from __future__ import annotations

from typing import Any

import pytest

from kue_core import InvalidJob, JobNotFound, Queue


@pytest.fixture
def queue(client: Any) -> Any:
    return client


def _tree(queue: Any) -> dict[str, int]:
    """report <- (fetch-a, fetch-b <- (page-1, page-2), fetch-c): the report waits for three
    fetches, the second of which waits for two pages."""
    report = queue.create_job("report", {"title": "q4"})
    a, b, c = (queue.create_job("fetch", {"n": n}) for n in "abc")
    p1, p2 = queue.create_job("page", {"n": 1}), queue.create_job("page", {"n": 2})
    queue.flow(report, [a, (b, [p1, p2]), c])
    return {"report": report.id, "a": a.id, "b": b.id, "c": c.id, "p1": p1.id, "p2": p2.id}


def test_the_tree_from_any_job_of_the_flow(queue: Any) -> None:
    ids = _tree(queue)
    for where in ids.values():
        tree = queue.flow_tree(where)
        assert (tree["job"], tree["root"], tree["start"], tree["complete"]) == (
            where,
            ids["report"],
            ids["report"],
            True,
        )
    nodes = {n["id"]: n for n in tree["nodes"]}
    order = [n["id"] for n in tree["nodes"]]
    assert order == [ids[k] for k in ("report", "a", "b", "c", "p1", "p2")]  # breadth first
    report, b, p1 = nodes[ids["report"]], nodes[ids["b"]], nodes[ids["p1"]]
    assert (report["parent"], report["depth"], report["type"], report["state"]) == (
        None,
        0,
        "report",
        "blocked",
    )
    assert report["children"] == [ids["a"], ids["b"], ids["c"]]
    assert report["children_total"] == 3
    assert (b["parent"], b["depth"], b["state"], b["children"]) == (
        ids["report"],
        1,
        "blocked",
        [ids["p1"], ids["p2"]],
    )
    assert (p1["parent"], p1["depth"], p1["state"], p1["children"], p1["type"]) == (
        ids["b"],
        2,
        "inactive",
        [],
        "page",
    )
    assert p1["created_at"] > 0 and p1["progress"] == 0 and p1["duration"] is None


def test_a_big_flow_comes_in_pages(queue: Any) -> None:
    parent = queue.create_job("batch")
    kids = [queue.create_job("item", {"i": i}) for i in range(7)]
    queue.flow(parent, kids)
    ids = [k.id for k in kids]
    page = queue.flow_tree(parent.id, limit=4)
    assert [n["id"] for n in page["nodes"]] == [parent.id, *ids[:3]]
    assert page["complete"] is False
    assert page["nodes"][0]["children"] == ids and page["nodes"][0]["children_total"] == 7
    listed = queue.flow_tree(parent.id, children=3)
    assert listed["nodes"][0]["children"] == ids[:3] and listed["complete"] is False
    assert [n["id"] for n in listed["nodes"]] == [parent.id, *ids[:3]]
    rest = queue.flow_tree(ids[0], start=parent.id, offset=3, children=3)
    assert rest["nodes"][0]["children"] == ids[3:6]
    assert [n["id"] for n in rest["nodes"]] == [parent.id, *ids[3:6]]
    sub = queue.flow_tree(parent.id, start=ids[5])
    assert [n["id"] for n in sub["nodes"]] == [ids[5]] and sub["complete"] is True


def test_a_job_two_jobs_depend_on_is_one_node(queue: Any) -> None:
    shared = queue.create_job("config").save()
    left = queue.create_job("left").depends_on(shared).save()
    right = queue.create_job("right").depends_on(shared).save()
    top = queue.create_job("top").depends_on(left, right).save()
    tree = queue.flow_tree(shared.id)
    assert tree["root"] == top.id
    order = [n["id"] for n in tree["nodes"]]
    assert order == [top.id, left.id, right.id, shared.id]
    nodes = {n["id"]: n for n in tree["nodes"]}
    assert nodes[left.id]["children"] == [shared.id] == nodes[right.id]["children"]
    assert nodes[shared.id]["parent"] == left.id


def test_a_removed_job_is_a_node_without_type_or_state(queue: Any, sync_queue: Queue) -> None:
    parent = queue.create_job("p")
    kid = queue.create_job("k")
    queue.flow(parent, [kid])
    sync_queue.client.delete(sync_queue.keys.job(kid.id))  # as a Node Kue client's remove
    nodes = queue.flow_tree(parent.id)["nodes"]
    assert (nodes[1]["id"], nodes[1]["type"], nodes[1]["state"]) == (kid.id, None, None)


def test_a_job_alone_is_a_tree_of_one(queue: Any) -> None:
    job = queue.create_job("solo").save()
    tree = queue.flow_tree(job.id)
    assert [n["id"] for n in tree["nodes"]] == [job.id] and tree["root"] == job.id


def test_bad_arguments_are_refused(queue: Any) -> None:
    job = queue.create_job("solo").save()
    with pytest.raises(JobNotFound):
        queue.flow_tree(10**12)
    for kwargs in ({"limit": 0}, {"limit": 10**6}, {"children": 0}, {"offset": -1}):
        with pytest.raises(InvalidJob):
            queue.flow_tree(job.id, **kwargs)
    with pytest.raises(InvalidJob):
        queue.flow_tree("x")
