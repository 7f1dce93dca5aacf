"""The docs' examples as text (quick: no process): every page's blocks and markers read, every
block that runs or is saved as a ``.py`` file is Python that compiles, and the reading and the
comparing of output themselves (tests/docs/test_docs_processes.py runs the blocks)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.docs.markdown import Block, Command, PageError, parse, transcript
from tests.docs.pages import PAGES, ROOT, blocks_of, params
from tests.docs.runner import matches


@pytest.mark.parametrize("page", params())
def test_the_page_reads_and_its_python_compiles(page: Path) -> None:
    for block in blocks_of(page):
        python_file = block.marker == "file" and block.value.endswith(".py")
        if block.is_python and (block.runs or python_file):
            try:
                compile(block.code, block.where, "exec")
            except SyntaxError as e:
                raise AssertionError(f"{block.where}: {e}") from None


def test_the_pages_are_found() -> None:
    names = {p.relative_to(ROOT).as_posix() for p in PAGES}
    assert {"README.md", "docs/tutorial.md", "docs/tasks.md"} <= names
    assert all(n == "README.md" or n.startswith("docs/") for n in names)


PAGE = """\
# A page

<!-- file: tasks.py -->
```python
def f() -> int:
    return 1
```

Then:

```python
from tasks import f
print(f())
```

<!-- output -->
```text
1
```

- In a list:

  <!-- run -->
  ```bash
  python -c 'print(2)'
  ```

```bash
kue dashboard   # not run: no marker
```

<!-- fragment -->
````py
queue.run()
````

```{toctree}
tutorial
```
"""


def test_blocks_and_markers_are_read() -> None:
    got = [(b.line, b.lang, b.marker, b.value, b.runs) for b in parse(PAGE, "p.md")]
    assert got == [
        (4, "python", "file", "tasks.py", False),
        (11, "python", "", "", True),
        (17, "text", "output", "", False),
        (24, "bash", "run", "", True),
        (28, "bash", "", "", False),
        (33, "py", "fragment", "", False),
        (37, "{toctree}", "", "", False),
    ]
    blocks = parse(PAGE, "p.md")
    assert blocks[0].code == "def f() -> int:\n    return 1\n"
    assert blocks[3].code == "python -c 'print(2)'\n"  # the list's indentation removed
    assert blocks[1].where == "p.md:11"


def test_a_marker_takes_its_value() -> None:
    page = "<!-- run-until: serving on port 3000 -->\n```bash\nkue dashboard\n```\n"
    (block,) = parse(page)
    assert (block.marker, block.value, block.runs) == ("run-until", "serving on port 3000", True)


@pytest.mark.parametrize(
    ("page", "error"),
    [
        ("```python\nprint(1)\n", "<page>:1: the block opened here is never closed"),
        ("<!-- fragmnet -->\n```python\nx\n```\n", "<page>:2: unknown marker <!-- fragmnet -->"),
        ("<!-- file: -->\n```python\nx\n```\n", "unknown marker <!-- file: -->"),
        ("<!-- output -->\n```text\n1\n```\n", "<page>:2: an output block follows a block"),
        (
            "<!-- file: a.py -->\n```python\nx\n```\n<!-- output -->\n```text\n1\n```\n",
            "<page>:6: an output block follows",
        ),
        ("<!-- run -->\n```python\nx\n```\n", "only shell blocks take <!-- run -->"),
        ("<!-- background: x -->\n```text\nx\n```\n", "only python and shell blocks run"),
        ("<!-- file: ../x.py -->\n```python\nx\n```\n", "'../x.py' is not a file name"),
        ("<!-- file: /etc/x -->\n```python\nx\n```\n", "'/etc/x' is not a file name"),
    ],
)
def test_a_wrong_page_is_refused_with_its_line(page: str, error: str) -> None:
    with pytest.raises(PageError) as e:
        parse(page)
    assert error in str(e.value)


def test_a_comment_not_above_a_fence_is_no_marker() -> None:
    page = "<!-- a note -->\n\n```python\nx = 1\n```\n"
    assert parse(page) == [Block("<page>", 3, "python", "x = 1\n")]


@pytest.mark.parametrize(
    ("expected", "actual", "same"),
    [
        ("job 1 -> done\n", "job 1 -> done\n", True),
        ("job 1 -> done", "job 1 -> done  \n\n", True),  # trailing space and blank lines
        ("job 1 -> done", "job 2 -> done", False),
        ("job ... -> done", "job 42 -> done", True),
        ("took ... ms\nok", "took 12.5 ms\nok\n", True),
        ("a\n...\nz", "a\nb\nc\nz", True),  # across lines
        ("a\n...\nz", "a\nz", False),  # the lines around it are still there
        ("done", "done\nand more", False),  # all of it
        ("1 (x+y)*", "1 (x+y)*", True),  # no regular expression
    ],
)
def test_output_is_compared_with_ellipsis(expected: str, actual: str, same: bool) -> None:
    assert matches(expected, actual) is same


def test_a_console_block_is_a_transcript_of_commands() -> None:
    page = (
        "text\n<!-- run -->\n```console\n$ kue stats\ntype  inactive\nemail  1\n"
        "$ curl -s localhost:3000/api/job \\\n    -d '{}'\n$ true\n```\n"
    )
    (block,) = parse(page, "p.md")
    assert transcript(block) == [
        Command(4, "kue stats\n", "type  inactive\nemail  1\n"),
        Command(7, "curl -s localhost:3000/api/job \\\n    -d '{}'\n", ""),
        Command(9, "true\n", ""),
    ]


@pytest.mark.parametrize(
    ("page", "error"),
    [
        ("<!-- run -->\n```console\nkue stats\n```\n", "p.md:3: a transcript line before any $"),
        (
            "<!-- run -->\n```console\n$ true\n```\n<!-- output -->\n```text\n\n```\n",
            "p.md:6: a console transcript shows its own output",
        ),
        (
            "<!-- background: up -->\n```console\n$ true\n```\n",
            "p.md:2: a console transcript runs in the foreground",
        ),
        ("<!-- run-with-dashboard -->\n```python\nx\n```\n", "take <!-- run-with-dashboard -->"),
    ],
)
def test_a_wrong_transcript_is_refused(page: str, error: str) -> None:
    with pytest.raises(PageError) as e:
        for block in parse(page, "p.md"):
            if block.is_transcript:
                transcript(block)
    assert error in str(e.value)
