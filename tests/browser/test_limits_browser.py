"""Limits in a real browser: the limits page sets a type's limits from its form (the PUT's body
as the API takes it; an empty field removes a limit), shows a type held back as it happens
(from the event stream, without a reload), keeps what is being typed while the page refreshes,
and removes a type's limits once confirmed; the groups page lists a type's groups live. Markup
in types and groups is shown as text."""

from __future__ import annotations

import json

from playwright.sync_api import Page, Request, expect

from kue_core import Queue
from kue_core.store import calls
from tests.browser.conftest import ARTIFACTS, Watched

XSS = "<img src=x onerror=\"window.__xss = 'limits'\">"  # no '/': a path segment
GROUP = "<img src=x onerror=\"window.__xss = 'group'\">"


def _edit(page: Page, job_type: str) -> None:
    page.get_by_text(f"Edit limits of {job_type}", exact=True).click()


def test_edit_limits_and_see_a_type_held_back(ui: Watched, queue: Queue) -> None:
    for _ in range(3):
        queue.create_job("email").save()
    queue.create_job(XSS).save()
    page = ui.goto("/")
    page.locator("#limits-link").click()
    expect(page.locator("h1")).to_contain_text("Limits")
    expect(page.locator("#live-status")).to_have_text("live")
    page.evaluate("window.__kept = true")  # a reload would lose it
    odd = page.locator("tr[data-type]").filter(has=page.locator("th.type", has_text="onerror"))
    expect(odd.locator("th.type")).to_have_text(XSS)  # as text
    row = page.locator('tr[data-type="email"]')
    expect(row.locator(".waiting")).to_have_text("3")
    expect(row.locator(".rate")).to_have_text("—")

    puts: list[Request] = []
    page.on("request", lambda r: puts.append(r) if r.method == "PUT" else None)
    _edit(page, "email")
    form = row.locator("form.limits")
    form.locator('input[name="rate-max"]').fill("2")
    form.locator('input[name="rate-per"]').fill("1.5")
    form.locator('select[name="rate-unit"]').select_option("s")
    form.get_by_label("Concurrency", exact=True).fill("1")
    form.get_by_role("button", name="Save limits of email").click()
    expect(row.locator(".rate")).to_have_text("2 per 1500 ms (0 started)")
    expect(row.locator(".concurrency")).to_have_text("1")
    expect(row.locator("details")).not_to_have_attribute("open", "")
    assert [json.loads(r.post_data or "") for r in puts] == [
        {
            "rate": {"max": 2, "perMs": 1500},
            "concurrency": 1,
            "groupRate": None,
            "groupConcurrency": None,
        }
    ]
    assert puts[0].url == ui.server.base + "/api/limits/email"
    limits = queue.limits()["email"]
    assert limits["rate"] == (2, 1500) and limits["concurrency"] == 1
    assert limits["group_rate"] is None and limits["group_concurrency"] is None

    # A worker elsewhere starts one: its event refreshes the page, the type is held back.
    assert queue.scripts.call(calls.claim(queue.keys, "email", "kue:test:1", 60_000))
    expect(row.locator(".held")).to_have_text("at its concurrency limit")
    expect(row.locator(".active")).to_have_text("1")
    expect(row.locator(".waiting")).to_have_text("2")
    assert page.evaluate("window.__kept") is True

    # What is typed stays while events refresh the page; closing the form lets them in.
    _edit(page, "email")
    form.get_by_label("Group concurrency", exact=True).fill("5")
    page.locator("h1").click()  # the field loses focus; the form is still open, typed in
    queue.create_job("email").save()
    expect(page.locator('[data-count="inactive"]')).to_have_text("4")  # the page refreshed
    expect(form.get_by_label("Group concurrency", exact=True)).to_have_value("5")
    expect(row.locator(".waiting")).to_have_text("2")  # its row waits for the form
    page.get_by_text("Edit limits of email", exact=True).click()  # closed: put back, let in
    expect(row.locator(".waiting")).to_have_text("3")
    assert queue.limits()["email"]["group_concurrency"] is None

    # An emptied field removes its limit, and keeps the others.
    _edit(page, "email")
    form.get_by_label("Concurrency", exact=True).fill("")
    form.get_by_label("Group concurrency", exact=True).fill("4")
    form.get_by_role("button", name="Save limits of email").click()
    expect(row.locator(".concurrency")).to_have_text("—")
    expect(row.locator(".group-concurrency")).to_have_text("4")
    expect(row.locator(".held")).to_have_text("no")
    assert queue.limits()["email"]["concurrency"] is None
    assert queue.limits()["email"]["rate"] == (2, 1500)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.locator("#limit-list").screenshot(path=str(ARTIFACTS / "limits.png"))

    row.get_by_role("button", name="Remove limits of email").click()
    expect(page.locator("#confirm")).to_contain_text("Remove every limit of email?")
    page.get_by_role("button", name="Keep them").click()
    expect(row.locator(".group-concurrency")).to_have_text("4")
    row.get_by_role("button", name="Remove limits of email").click()
    page.get_by_role("button", name="Remove limits", exact=True).click()
    expect(row.locator(".rate")).to_have_text("—")
    expect(row.get_by_role("button", name="Remove limits of email")).to_have_count(0)
    assert "email" not in queue.limits()
    assert page.evaluate("window.__kept") is True
    assert page.evaluate("window.__xss") is None


def test_the_groups_of_a_type(ui: Watched, queue: Queue) -> None:
    for group in ("acme", GROUP):
        queue.create_job("email").group(group).save()
    queue.limit("email", group_concurrency=2)
    page = ui.goto("/limits")
    page.get_by_role("link", name="Groups of email").click()
    expect(page.locator("h1")).to_contain_text("Groups of email")
    expect(page.locator("#live-status")).to_have_text("live")
    rows = page.locator("#group-list tbody tr")
    expect(rows.locator(".group")).to_have_text(["acme", GROUP])  # in turn, as text
    expect(page.locator(".group-limits")).to_contain_text("at most 2 active")

    queue.create_job("email").group("zeta").save()  # saved elsewhere: the page refreshes
    expect(rows.locator(".group")).to_have_text(["acme", GROUP, "zeta"])
    # a worker elsewhere
    claimed = queue.scripts.call(calls.claim(queue.keys, "email", "kue:test:1", 60_000))
    assert isinstance(claimed, tuple)
    served = rows.filter(has=page.get_by_text(claimed[1]["group"], exact=True))
    expect(served.locator(".active")).to_have_text("1")
    expect(served.locator(".waiting")).to_have_text("0")
    turns = [g["group"] for g in queue.groups("email")["groups"]]
    expect(rows.locator(".group")).to_have_text(turns)
    assert page.evaluate("window.__xss") is None
