"""The fenced code blocks of a Markdown page, with the marker written above each (pure: no I/O
but reading the page).

A marker is an HTML comment on the line directly above a block's opening fence, invisible in
the rendered page (docs/contributing.md, "Examples in the docs"):

- ``<!-- fragment -->``: a piece of a larger program, not run;
- ``<!-- file: NAME -->``: saved as ``NAME`` in the page's folder, not run by itself;
- ``<!-- output -->`` (on a ``text`` block): what the run block before it prints;
- ``<!-- run -->`` (on a shell block): run it; shell blocks without a marker are not run; a
  ``console`` block is a transcript: each ``$ `` line a command, the lines after it what it
  prints;
- ``<!-- run-with-dashboard -->`` (on a shell block): run it as ``run`` does, with a ``kue
  dashboard`` serving on the page's port (the runner starts one for the page);
- ``<!-- run-until: TEXT -->``: run it until it prints ``TEXT``, then Ctrl-C (SIGINT): it must
  exit cleanly (a program that serves until stopped);
- ``<!-- background: TEXT -->``: start it, and go on with the page's next blocks once it has
  printed ``TEXT``; it gets SIGINT when the page ends, and must exit cleanly (a worker that the
  page's next blocks use).

A ``python`` block without a marker runs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

PYTHON = frozenset({"python", "py", "python3"})
SHELL = frozenset({"bash", "sh", "shell", "console"})

#: Markers that take a value (``name: value``) and those that take none.
WITH_VALUE = frozenset({"file", "run-until", "background"})
BARE = frozenset({"fragment", "output", "run", "run-with-dashboard"})

_OPEN = re.compile(r"^(?P<indent> *)(?P<fence>`{3,}|~{3,})\s*(?P<info>[^`]*)$")
_COMMENT = re.compile(r"^\s*<!--\s*(?P<body>.*?)\s*-->\s*$")
_FILE_NAME = re.compile(r"^[\w.-]+(/[\w.-]+)*$")


class PageError(ValueError):
    """A page whose blocks or markers cannot be read: the message names ``page:line``."""


@dataclass(frozen=True)
class Block:
    """One fenced block: where it opens (1-based line of the fence), its language (the info
    string's first word, lowercased; ``""`` without one), its text (the fence's indentation
    removed) and its marker (``""`` without one; ``value`` for markers that take one)."""

    page: str
    line: int
    lang: str
    code: str
    marker: str = ""
    value: str = ""

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"

    @property
    def is_python(self) -> bool:
        return self.lang in PYTHON

    @property
    def is_shell(self) -> bool:
        return self.lang in SHELL

    @property
    def is_transcript(self) -> bool:
        """A console block: ``$ `` commands, each followed by what it prints."""
        return self.lang == "console"

    @property
    def runs(self) -> bool:
        """Whether the block is run (in the foreground, in the background or until a text)."""
        if self.marker in ("run", "run-with-dashboard", "run-until", "background"):
            return True
        return self.is_python and self.marker == ""


def parse(text: str, page: str = "<page>") -> list[Block]:
    """Every fenced block of ``text`` in order; ``page`` names it in errors and in each
    block's ``where``. Raises :class:`PageError` for an unclosed fence, an unknown marker or one
    that does not fit its block."""
    lines = text.splitlines()
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        opened = _OPEN.match(lines[i])
        if opened is None:
            i += 1
            continue
        indent, fence = len(opened["indent"]), opened["fence"]
        info = opened["info"].strip()
        lang = info.split()[0].lower() if info else ""
        start = i
        body: list[str] = []
        i += 1
        while i < len(lines):
            stripped = lines[i].strip()
            if stripped.startswith(fence[0] * len(fence)) and set(stripped) == {fence[0]}:
                break
            line = lines[i]
            body.append(line[indent:] if line[:indent].strip() == "" else line.lstrip())
            i += 1
        else:
            raise PageError(f"{page}:{start + 1}: the block opened here is never closed")
        marker, value = _marker(lines[start - 1] if start > 0 else "", f"{page}:{start + 1}")
        code = "\n".join(body) + "\n" if body else ""
        blocks.append(Block(page, start + 1, lang, code, marker, value))
        i += 1
    _check(blocks)
    return blocks


def read(path: Path, root: Path) -> list[Block]:
    """The blocks of the page at ``path``, named by its path under ``root``."""
    return parse(path.read_text(encoding="utf-8"), path.relative_to(root).as_posix())


def _marker(above: str, where: str) -> tuple[str, str]:
    comment = _COMMENT.match(above)
    if comment is None:
        return "", ""
    body = comment["body"]
    name, colon, value = body.partition(":")
    name, value = name.strip(), value.strip()
    if colon and name in WITH_VALUE and value:
        return name, value
    if not colon and name in BARE:
        return name, ""
    known = ", ".join([*sorted(BARE), *(f"{n}: ..." for n in sorted(WITH_VALUE))])
    raise PageError(f"{where}: unknown marker <!-- {body} --> above the block (known: {known})")


def _check(blocks: list[Block]) -> None:
    """Each marker on a block it fits."""
    for n, block in enumerate(blocks):
        if block.marker == "output":
            before = blocks[n - 1] if n else None
            if before is None or not before.runs or before.marker == "background":
                raise PageError(
                    f"{block.where}: an output block follows a block that runs in the "
                    "foreground (a python block, or one marked run or run-until)"
                )
            if before.is_transcript:
                raise PageError(f"{block.where}: a console transcript shows its own output")
        elif block.marker in ("run", "run-with-dashboard") and not block.is_shell:
            raise PageError(
                f"{block.where}: only shell blocks take <!-- {block.marker} --> (python "
                "blocks run without a marker)"
            )
        elif block.is_transcript and block.marker in ("run-until", "background"):
            raise PageError(f"{block.where}: a console transcript runs in the foreground")
        elif block.marker in ("run-until", "background") and not (
            block.is_python or block.is_shell
        ):
            raise PageError(f"{block.where}: only python and shell blocks run")
        elif block.marker == "file" and (
            not _FILE_NAME.match(block.value) or ".." in block.value.split("/")
        ):
            raise PageError(f"{block.where}: {block.value!r} is not a file name in the folder")


@dataclass(frozen=True)
class Command:
    """One command of a console transcript: its line on the page, the command (``$ `` and
    continuation backslashes kept out of it: it is as a shell reads it) and what the page
    shows it prints."""

    line: int
    command: str
    output: str


def transcript(block: Block) -> list[Command]:
    """The commands of a console block: each ``$ `` line (with the lines it continues onto
    with a trailing backslash), then the lines up to the next ``$ `` as its output. Raises
    :class:`PageError` for text before the first command."""
    commands: list[Command] = []
    lines = block.code.splitlines()
    i = 0
    while i < len(lines):
        if not lines[i].startswith("$ "):
            raise PageError(f"{block.page}:{block.line + 1 + i}: a transcript line before any $")
        start = i
        command = [lines[i][2:]]
        while command[-1].endswith("\\") and i + 1 < len(lines):
            i += 1
            command.append(lines[i])
        i += 1
        output: list[str] = []
        while i < len(lines) and not lines[i].startswith("$ "):
            output.append(lines[i])
            i += 1
        text = "\n".join(output) + "\n" if output else ""
        commands.append(Command(block.line + 1 + start, "\n".join(command) + "\n", text))
    return commands
