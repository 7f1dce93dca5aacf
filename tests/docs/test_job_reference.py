"""docs/job-reference.md, the handler-facing reference of ``Job``, cannot drift: every public
name of the job a handler gets (``kue_core.Job``: its methods, properties and fields, and the
``queue`` it holds) is named on the page, in code, and every ``job.NAME`` the page names
exists."""

from __future__ import annotations

import re
from pathlib import Path

from kue_core import Job, Queue

PAGE = Path(__file__).resolve().parents[2] / "docs" / "job-reference.md"
CODE = re.compile(r"`([^`]+)`")


def public_names() -> set[str]:
    """The public names of ``Job``: its class's (methods, properties, fields with defaults)
    and those only its instances hold (set in ``__init__``, as ``queue``)."""
    names = {n for n in dir(Job) if not n.startswith("_")}
    names |= {n for n in Job.__annotations__ if not n.startswith("_")}
    return names


def named_in_code(text: str) -> set[str]:
    """The identifiers written inside code spans (`job.log(fmt)` names job, log and fmt)."""
    return {word for span in CODE.findall(text) for word in re.findall(r"\w+", span)}


def test_every_public_name_of_job_is_on_the_page() -> None:
    missing = sorted(public_names() - named_in_code(PAGE.read_text("utf-8")))
    assert missing == [], f"docs/job-reference.md does not mention Job.{missing}"


def test_every_job_attribute_the_page_names_exists(queue: Queue) -> None:
    job = queue.create_job("email", {"to": "ada@example.com"}).save()
    named = set(re.findall(r"`(?:job|Job)\.(\w+)", PAGE.read_text("utf-8")))
    assert len(named) > 40  # the page's tables were read
    assert sorted(n for n in named if not hasattr(job, n)) == []


def test_the_check_sees_a_name_left_out() -> None:
    text = PAGE.read_text("utf-8").replace("`job.stopping`", "`job.???`")
    assert "stopping" in public_names() - named_in_code(text)
