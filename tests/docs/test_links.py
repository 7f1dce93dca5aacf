"""Every relative link of the README and of docs/*.md leads somewhere: the file or folder
exists, and an anchor (``page.md#a-heading``, ``#a-heading``) is a heading of that page, slugged
as GitHub and MyST (``myst_heading_anchors = 3`` in docs/conf.py) slug it. Links inside code
are not links; links to other sites are not checked (the suite runs offline)."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
#: Headings up to this level have anchors (docs/conf.py's myst_heading_anchors).
ANCHOR_LEVELS = 3

FENCE = re.compile(r"^(\s*)(```+|~~~+)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
INLINE_CODE = re.compile(r"(`+)(.+?)\1")
#: ``[text](target)`` and ``![alt](target)``, the target up to a space or the closing paren.
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
#: ``[label]: target`` (a reference definition).
REFERENCE = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s.*)?$")
SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


def prose(text: str) -> list[tuple[int, str]]:
    """The lines of a Markdown page outside fenced code, numbered from 1."""
    out, fence = [], None
    for n, line in enumerate(text.splitlines(), 1):
        m = FENCE.match(line)
        if fence is None and m:
            fence = m.group(2)[0] * len(m.group(2))
            continue
        if fence is not None:
            if line.strip().startswith(fence) and set(line.strip()) <= {fence[0]}:
                fence = None
            continue
        out.append((n, line))
    return out


def slug(title: str) -> str:
    """A heading's anchor, as GitHub (and MyST's ``github`` slugs) make it from its text:
    lower case, spaces to hyphens, everything but word characters and hyphens dropped."""
    text = INLINE_CODE.sub(lambda m: m.group(2), title)
    text = re.sub(r"!?\[((?:[^\[\]]|\[[^\]]*\])*)\]\([^)]*\)", r"\1", text)  # a link's text
    text = re.sub(r"<[^>]+>", "", text)  # inline HTML
    text = re.sub(r"(\*\*|__|\*|_)(\S.*?\S|\S)\1", r"\2", text)  # emphasis
    return re.sub(r"[^\w\- ]", "", text.lower().replace(" ", "-"))


@cache
def anchors(page: Path) -> frozenset[str]:
    """The anchors of a page's headings (a repeated one gets -1, -2...), and the targets it
    names itself (``(name)=`` in MyST, ``<a id="name">``)."""
    found: list[str] = []
    for _, line in prose(page.read_text("utf-8")):
        m = HEADING.match(line)
        if m and len(m.group(1)) <= ANCHOR_LEVELS:
            base = slug(m.group(2))
            if not base:
                continue
            each, i = base, 1
            while each in found:
                each, i = f"{base}-{i}", i + 1
            found.append(each)
        found += re.findall(r"^\(([\w-]+)\)=\s*$", line)
        found += re.findall(r"<a\s+(?:id|name)=\"([^\"]+)\"", line)
    return frozenset(found)


def links(page: Path) -> list[tuple[int, str]]:
    """The relative links of a page (line, target), outside code."""
    out = []
    for n, line in prose(page.read_text("utf-8")):
        bare = INLINE_CODE.sub("", line)
        targets = [m.group(1) for m in LINK.finditer(bare)]
        ref = REFERENCE.match(bare)
        if ref:
            targets.append(ref.group(1))
        out += [(n, t) for t in targets if not SCHEME.match(t) and not t.startswith("//")]
    return out


def broken(page: Path, target: str) -> str | None:
    """Why ``target`` (a link of ``page``) leads nowhere, or None."""
    path, _, anchor = target.partition("#")
    dest = page if not path else (page.parent / path).resolve()
    if not dest.exists():
        return f"{path} does not exist"
    if path and ROOT in page.parents and ROOT not in dest.parents and dest != ROOT:
        return f"{path} is outside the repository"  # GitHub shows nothing there
    if anchor and dest.suffix == ".md" and anchor not in anchors(dest):
        return f"{dest.name} has no heading with the anchor #{anchor}"
    return None


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_leads_somewhere(page: Path) -> None:
    bad = [
        f"{page.relative_to(ROOT)}:{n}: ({target}) {why}"
        for n, target in links(page)
        if (why := broken(page, target)) is not None
    ]
    assert bad == []


def test_the_checker_sees_a_broken_anchor_and_a_missing_file(tmp_path: Path) -> None:
    """The rules above, on a page of our own: a check that finds nothing must be able to."""
    page = tmp_path / "page.md"
    page.write_text(
        "# Title\n\n## The `kue worker` command: options!\n\n### Again\n\n### Again\n\n"
        "```text\n[inside](code.md)\n```\n\n"
        "[ok](#the-kue-worker-command-options) [ok](#again-1) [bad](#nowhere) "
        "[bad](missing.md) `[code](x.md)` [site](https://example.com/x)\n",
        "utf-8",
    )
    assert anchors(page) == {"title", "the-kue-worker-command-options", "again", "again-1"}
    targets = [t for _, t in links(page)]
    assert targets == [
        "#the-kue-worker-command-options", "#again-1", "#nowhere", "missing.md",
    ]  # fmt: skip
    assert broken(page, "#nowhere") is not None and broken(page, "missing.md") is not None
    assert broken(page, "#again-1") is None
