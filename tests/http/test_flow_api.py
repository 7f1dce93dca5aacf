"""A whole flow as a tree over HTTP: ``GET /api/flow/<id>`` (paged, bad arguments a 400, an
unknown job a 404) and the dashboard's flow page (``/flow/<id>``), every name escaped."""

from __future__ import annotations

from flask.testing import FlaskClient

from kue_core import Queue

XSS = "<script>alert('flow')</script>"


def _flow(queue: Queue) -> tuple[int, list[int]]:
    parent = queue.create_job("batch", {"title": XSS})
    kids = [queue.create_job(XSS if i == 0 else "item", {"i": i}) for i in range(4)]
    queue.flow(parent, kids)
    return parent.id, [k.id for k in kids]  # type: ignore[return-value]


def test_the_tree_over_the_api(client: FlaskClient, queue: Queue) -> None:
    root, kids = _flow(queue)
    res = client.get(f"/api/flow/{kids[2]}")
    assert res.status_code == 200
    body = res.json
    assert body is not None
    assert (body["job"], body["root"], body["start"], body["complete"]) == (
        kids[2],
        root,
        root,
        True,
    )
    assert [n["id"] for n in body["nodes"]] == [root, *kids]
    assert body["nodes"][1]["type"] == XSS and body["nodes"][0]["children_total"] == 4
    paged = client.get(f"/api/flow/{root}?limit=2&children=3").json
    assert paged is not None and [n["id"] for n in paged["nodes"]] == [root, kids[0]]
    assert paged["complete"] is False and paged["nodes"][0]["children"] == kids[:3]
    rest = client.get(f"/api/flow/{root}?start={root}&offset=3").json
    assert rest is not None and rest["nodes"][0]["children"] == kids[3:]


def test_bad_arguments_and_unknown_jobs(client: FlaskClient, queue: Queue) -> None:
    root, _ = _flow(queue)
    assert client.get("/api/flow/999999999").status_code == 404
    for query in ("limit=0", "limit=x", "limit=100000", "children=0", "offset=-1", "start=abc"):
        res = client.get(f"/api/flow/{root}?{query}")
        assert res.status_code == 400, query
        assert res.json is not None and res.json["error"]
    assert client.get("/api/flow/abc").status_code in (400, 404)


def test_the_flow_page_escapes_and_links(client: FlaskClient, queue: Queue) -> None:
    root, kids = _flow(queue)
    page = client.get(f"/flow/{kids[0]}")
    assert page.status_code == 200
    html = page.get_data(as_text=True)
    assert XSS not in html and "&lt;script&gt;alert(" in html
    assert f'href="/job/{root}"' in html and f'data-id="{kids[3]}"' in html
    job_page = client.get(f"/job/{kids[0]}").get_data(as_text=True)
    assert f'href="/flow/{kids[0]}"' in job_page
    assert client.get("/flow/999999999").status_code == 404
    assert client.get("/flow/abc").status_code == 404
    assert client.get(f"/flow/{root}?start=abc").status_code == 400
