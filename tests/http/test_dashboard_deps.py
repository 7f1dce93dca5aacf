"""The dashboard's dependencies and flows, as served HTML: the Blocked tab and counts, a job's
dependencies and dependents with links and states, "blocked by failed job N", the failure
policy, the children's results, a cut list for a parent of many, and markup shown as text."""

from __future__ import annotations

import re

from flask.testing import FlaskClient

from kue_core import Queue
from kue_core.store import calls
from kue_http.dashboard.flows import SHOWN
from tests.http.test_dashboard import page, rows

MARKUP = "<b>x</b>"


def _complete(queue: Queue, job_id: int, result: str = '{"ok":true}') -> None:
    """Complete job ``job_id`` as a worker would (the next job of its type must be it)."""
    claimed = queue.scripts.call(
        calls.claim(queue.keys, queue.get_job(job_id).type, "kue:test:1", 10_000)
    )
    assert claimed and claimed != "paused" and claimed[0] == job_id, claimed
    ended = queue.scripts.call(
        calls.complete(queue.keys, job_id, claimed[1]["lease"], result, None)
    )
    assert ended.outcome == "complete"


def _fail_for_good(queue: Queue, job_id: int) -> None:
    claimed = queue.scripts.call(
        calls.claim(queue.keys, queue.get_job(job_id).type, "kue:test:1", 10_000)
    )
    assert claimed and claimed != "paused" and claimed[0] == job_id, claimed
    queue.scripts.call(
        calls.fail(queue.keys, job_id, claimed[1]["lease"], "boom", "boom", -1, None)
    )


def _items(html: str, list_id: str) -> dict[str, str]:
    """``{id: state}`` of the jobs listed in ``<ul id=list_id>``."""
    found = re.search(rf'<ul class="linked" id="{list_id}">(.*?)</ul>', html, re.S)
    assert found, list_id
    return dict(re.findall(r'data-id="(\d+)" data-state="(\w+)"', found.group(1)))


def test_the_blocked_tab_lists_blocked_jobs_and_counts_them(
    client: FlaskClient, queue: Queue
) -> None:
    a = queue.create_job("a").save()
    b = queue.create_job("report").depends_on(a).save()
    html = page(client, "/jobs/blocked")
    assert "<title>Blocked · kue</title>" in html
    assert list(rows(html)) == [str(b.id)]
    assert 'id="bulk-remove"' in html and "Retry all" not in html
    assert re.search(r'nav.*?data-count="blocked"[^>]*>1<', html, re.S)
    overview = page(client, "/")
    assert 'class="card state-blocked"' in overview
    assert re.search(r'class="big" data-count="blocked">1<', overview)
    assert rows(overview)["report"]["Blocked"] == "1"
    assert rows(overview)["a"]["Blocked"] == "0"
    assert list(rows(page(client, "/jobs/blocked?type=a"))) == []


def test_the_job_page_links_dependencies_and_dependents(client: FlaskClient, queue: Queue) -> None:
    a = queue.create_job("fetch", {"title": "first"}).save()
    b = queue.create_job("fetch").save()
    c = queue.create_job("merge").depends_on(a, b).on_dependency_failure("ignore").save()
    d = queue.create_job("send").depends_on(c).save()
    _complete(queue, a.id, '{"rows": 3}')  # type: ignore[arg-type]
    html = page(client, f"/job/{c.id}")
    assert _items(html, "dependencies") == {str(a.id): "complete", str(b.id): "inactive"}
    assert _items(html, "dependents") == {str(d.id): "blocked"}
    for other in (a, b, d):
        assert f'href="/job/{other.id}">#{other.id}</a>' in html
    assert '<span class="badge state-complete">Complete</span>' in html
    assert '<span class="chip done">done</span>' in html
    assert re.search(r'id="deps-done">1 of 2 done<', html)
    assert "If a dependency fails for good: <strong" in html and ">ignore<" in html
    assert "counts the failed job as done" in html
    assert f'data-watch="{c.id} {a.id} {b.id} {d.id}"' in html
    assert 'data-events="/api/events"' in html  # every event: kue.js keeps those it lists
    results = html[html.index('id="children-results"') :]
    assert "<details" in html and "&#34;rows&#34;: 3" in results.split("</details>")[0]
    # A dependency sees only its dependent; a plain job shows no flow.
    html = page(client, f"/job/{a.id}")
    assert _items(html, "dependents") == {str(c.id): "blocked"}
    assert 'id="dependencies"' not in html and 'id="dep-policy"' not in html
    plain = queue.create_job("fetch").save()
    html = page(client, f"/job/{plain.id}")
    assert 'id="flow"' not in html and f'data-watch="{plain.id}"' in html
    assert f'data-events="/api/events?id={plain.id}"' in html


def test_blocked_by_a_failed_job_offers_its_retry(client: FlaskClient, queue: Queue) -> None:
    a = queue.create_job("fetch").attempts(1).save()
    b = queue.create_job("merge").depends_on(a).save()
    _fail_for_good(queue, a.id)  # type: ignore[arg-type]
    html = page(client, f"/job/{b.id}")
    notice = html[html.index('<p class="notice blocked" id="blocked-by">') :].split("</p>")[0]
    text = " ".join(re.sub(r"<[^>]+>", " ", notice).split())
    assert text.startswith(f"Blocked by failed job #{a.id} . Retry job #{a.id} ")
    assert f'href="/job/{a.id}"' in notice
    assert f'data-url="/api/job/{a.id}/retry"' in notice and 'id="retry-blocker"' in notice
    assert _items(html, "dependencies") == {str(a.id): "failed"}
    assert "by failed job <a" in html  # the timeline's entry
    assert ">wait<" in html and "stays blocked until the failed job is retried" in html
    queue.get_job(a.id).set_state("inactive")  # type: ignore[arg-type]  # retried
    html = page(client, f"/job/{b.id}")
    assert 'id="retry-blocker"' not in html  # nothing left to retry
    _complete(queue, a.id)  # type: ignore[arg-type]
    html = page(client, f"/job/{b.id}")
    assert 'id="blocked-by"' not in html
    assert _items(html, "dependencies") == {str(a.id): "complete"}
    assert "<strong>Unblocked</strong>" in html and "now queued" in html


def test_a_removed_dependency_is_listed_without_a_link(client: FlaskClient, queue: Queue) -> None:
    a = queue.create_job("fetch").save()
    b = queue.create_job("merge").depends_on(a).save()
    _complete(queue, a.id)  # type: ignore[arg-type]
    queue.remove(a.id)  # type: ignore[arg-type]  # b no longer waits for it
    html = page(client, f"/job/{b.id}")
    assert _items(html, "dependencies") == {str(a.id): "removed"}
    assert f'href="/job/{a.id}"' not in html and "1 removed" in html
    assert re.search(r'id="deps-done">1 of 1 done<', html)


def test_a_parent_of_many_lists_the_first_and_counts_the_rest(
    client: FlaskClient, queue: Queue
) -> None:
    many = SHOWN * 3
    children = [queue.create_job("part") for _ in range(many)]
    parent = queue.flow(queue.create_job("whole"), children)
    for child in children[:5]:
        _complete(queue, child.id, str(child.id))  # type: ignore[arg-type]
    html = page(client, f"/job/{parent.id}")
    listed = _items(html, "dependencies")
    assert list(listed) == [str(c.id) for c in children[:SHOWN]]
    assert html.count('<li data-id="') == SHOWN
    assert f"The first {SHOWN} of {many}, by id; {many - SHOWN} more not listed." in html
    counts = html[html.index('id="dependencies-counts"') :].split("</p>")[0]
    assert f'data-count="inactive">{many - 5} queued<' in counts
    assert 'data-count="complete">5 complete<' in counts and f"5 of {many} done" in counts
    assert 'data-watch="*"' in html  # a cut list: any event may change the counts
    assert "5 results, by job id." in html
    first = page(client, f"/job/{children[0].id}")
    assert _items(first, "dependents") == {str(parent.id): "blocked"}


def test_markup_in_types_titles_and_results_is_shown_as_text(
    client: FlaskClient, queue: Queue
) -> None:
    a = queue.create_job(f"t{MARKUP}", {"title": MARKUP}).save()
    b = queue.create_job(f"u{MARKUP}", {"title": MARKUP}).depends_on(a).save()
    _complete(queue, a.id, '{"html": "<script>alert(1)</script>"}')  # type: ignore[arg-type]
    for job_id in (a.id, b.id):
        html = page(client, f"/job/{job_id}")
        assert MARKUP not in html and "<script>alert" not in html
        assert "&lt;b&gt;x&lt;/b&gt;" in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
